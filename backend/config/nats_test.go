package config

import (
	"strings"
	"testing"
	"time"
)

func TestNATSValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*NATSConfig)
		want string // "" = valid; else a substring naming the field
	}{
		{"defaults", func(*NATSConfig) {}, ""},
		{"external urls", func(c *NATSConfig) { c.URLs = []string{"nats://a:4222", "tls://b:4222"} }, ""},
		{"bad url", func(c *NATSConfig) { c.URLs = []string{"::nope"} }, "nats.urls[0]"},
		{"bad listen", func(c *NATSConfig) { c.Listen = "localhost" }, "nats.listen"},
		{"bad port", func(c *NATSConfig) { c.Listen = "127.0.0.1:70000" }, "nats.listen"},
		{"random port", func(c *NATSConfig) { c.Listen = "127.0.0.1:-1" }, ""},
		{"replicas", func(c *NATSConfig) { c.Replicas = 0 }, "nats.replicas"},
		{"max events", func(c *NATSConfig) { c.MaxEvents = 0 }, "nats.max_events"},
		{"negative heartbeat rate", func(c *NATSConfig) { c.MaxHeartbeatsPerSecond = -1 }, "nats.max_heartbeats_per_second"},
		{"no heartbeat rate bound", func(c *NATSConfig) { c.MaxHeartbeatsPerSecond = 0 }, ""},
		{"offline before heartbeat", func(c *NATSConfig) { c.OfflineAfter = Duration(time.Second) }, "nats.offline_after"},
		{"password without user", func(c *NATSConfig) { c.Password = "x" }, "nats.user"},
		{"user and nkey", func(c *NATSConfig) { c.User, c.NKeySeedFile = "u", "/seed" }, "nats.nkey_seed_file"},
		{"user without password", func(c *NATSConfig) { c.Users = []NATSUser{{User: "a"}} }, "nats.users[0].password"},
		{"user twice", func(c *NATSConfig) { c.Users = []NATSUser{{User: "a", Password: "p"}, {User: "a", Password: "q"}} }, "nats.users[1]"},
		{"bad nkey", func(c *NATSConfig) { c.Users = []NATSUser{{NKey: "SUABC"}} }, "nats.users[0].nkey"},
		{"bad host", func(c *NATSConfig) { c.Users = []NATSUser{{User: "a", Password: "p", Host: "10.0.0.1"}} }, "nats.users[0].host"},
		{"bad role", func(c *NATSConfig) { c.Users = []NATSUser{{User: "a", Password: "p", Role: "admin"}} }, "nats.users[0].role"},
		{"server bound to a host", func(c *NATSConfig) {
			c.Users = []NATSUser{{User: "a", Password: "p", Role: NATSRoleServer, Host: "0:10.0.0.1"}}
		}, "nats.users[0].host"},
		{"sim user", func(c *NATSConfig) {
			c.Users = []NATSUser{{User: "s", Password: "p", Role: NATSRoleSim, Hosts: []string{"7:*", "0:10.0.0.9"}}}
		}, ""},
		{"sim without hosts", func(c *NATSConfig) { c.Users = []NATSUser{{User: "s", Password: "p", Role: NATSRoleSim}} }, "nats.users[0].hosts"},
		{"sim bad pattern", func(c *NATSConfig) {
			c.Users = []NATSUser{{User: "s", Password: "p", Role: NATSRoleSim, Hosts: []string{"*:*"}}}
		}, "nats.users[0].hosts[0]"},
		{"agent with hosts", func(c *NATSConfig) { c.Users = []NATSUser{{User: "a", Password: "p", Hosts: []string{"0:*"}}} }, "nats.users[0].hosts"},
		{"agent user", func(c *NATSConfig) { c.Users = []NATSUser{{User: "a", Password: "p", Host: "0:10.0.0.1"}} }, ""},
		{"static host", func(c *NATSConfig) { c.Hosts = []string{"0:10.0.0.1", "x"} }, "nats.hosts[1]"},
		{"cert without key", func(c *NATSConfig) { c.TLS.Cert = "c.pem" }, "nats.tls"},
		{"verify without ca", func(c *NATSConfig) { c.TLS = NATSTLSConfig{Cert: "c", Key: "k", Verify: true} }, "nats.tls.ca"},
		{"cluster without name", func(c *NATSConfig) {
			c.Cluster = NATSClusterConfig{Listen: "127.0.0.1:6222", Routes: []string{"nats-route://127.0.0.1:6222"}}
		}, "nats.cluster.name"},
		{"cluster without routes", func(c *NATSConfig) { c.Cluster = NATSClusterConfig{Name: "c", Listen: "127.0.0.1:6222"} }, "nats.cluster.routes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default().NATS
			tt.edit(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one naming %s", err, tt.want)
			}
		})
	}
}

func TestNATSLoad(t *testing.T) {
	body := `[nats]
listen = "127.0.0.1:4333"
store_dir = "/var/lib/gseproc/nats"
heartbeat_interval = "2s"
offline_after = "7s"
max_heartbeats_per_second = 800
replicas = 3
[[nats.users]]
user = "agent1"
password = "s3cret"
host = "0:10.0.0.1"
[[nats.users]]
user = "peer"
password = "p"
role = "server"
[nats.cluster]
name = "prod"
listen = "10.0.0.9:6222"
routes = ["nats-route://10.0.0.9:6222", "nats-route://10.0.0.10:6222"]
`
	cfg, err := loadTOML(t, body)
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.NATS
	if n.Listen != "127.0.0.1:4333" || n.HeartbeatInterval.D() != 2*time.Second || n.MaxHeartbeatsPerSecond != 800 || n.Replicas != 3 ||
		len(n.Users) != 2 || n.Users[1].Role != NATSRoleServer || len(n.Cluster.Routes) != 2 || len(cfg.Warnings) != 0 {
		t.Fatalf("loaded %+v (warnings %v)", n, cfg.Warnings)
	}
	if n.External() || n.ClientURLs() != "nats://"+DefaultNATSListen {
		t.Fatalf("External %v, ClientURLs %q", n.External(), n.ClientURLs())
	}
}
