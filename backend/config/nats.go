package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gseproc/model"
)

// NATSConfig is the [nats] section: how the server and the agents meet.
//
// The server embeds a NATS server with JetStream listening on Listen, unless
// URLs names an external cluster, in which case it connects there and embeds
// nothing. Agents (`gseproc agent`, `gseproc sim`) connect to URLs, or to
// nats://127.0.0.1:4222 when it is empty.
type NATSConfig struct {
	// URLs of an external NATS cluster. Server: use it, embed nothing.
	// Agents: connect here.
	URLs []string `toml:"urls"`
	// Listen is the embedded server's client address ("host:port"; port -1
	// picks a free one).
	Listen string `toml:"listen"`
	// StoreDir holds the embedded JetStream files; "" uses a temporary
	// directory (state then does not survive a restart).
	StoreDir string `toml:"store_dir"`
	// ServerName names the embedded server (required to be unique in a cluster).
	ServerName string `toml:"server_name"`
	// Cluster makes the embedded server one node of a NATS cluster.
	Cluster NATSClusterConfig `toml:"cluster"`
	// Replicas of the JetStream buckets and streams (1 embedded, 3 on a cluster).
	Replicas int `toml:"replicas"`
	// MaxEvents bounds the durable event log.
	MaxEvents int `toml:"max_events"`

	// User/Password or NKeySeedFile are this process's own credentials when
	// it connects as a client (agents; the server to an external cluster).
	User         string `toml:"user"`
	Password     string `toml:"password"`
	NKeySeedFile string `toml:"nkey_seed_file"`
	// CredsFile is a NATS credentials file (user JWT and nkey seed) for a
	// cluster using decentralised JWT auth.
	CredsFile string `toml:"creds_file"`

	// Users are the credentials the embedded server accepts from agents.
	Users []NATSUser `toml:"users"`

	// TLS: the embedded server serves TLS with Cert/Key (and requires client
	// certificates signed by CA when Verify); clients trust CA and present
	// Cert/Key when set.
	TLS NATSTLSConfig `toml:"tls"`

	// HeartbeatInterval is how often an agent reports until a server
	// tells it otherwise, and on a server the shortest interval it tells
	// agents. MaxHeartbeatsPerSecond bounds the heartbeats a server
	// receives from the whole fleet (0: no bound): a fleet of n online
	// hosts is told an interval of at least n / MaxHeartbeatsPerSecond
	// (transport.FleetBeatInterval). A host silent for OfflineAfter, or
	// three of its interval when longer, is offline.
	HeartbeatInterval      Duration `toml:"heartbeat_interval"`
	MaxHeartbeatsPerSecond int      `toml:"max_heartbeats_per_second"`
	OfflineAfter           Duration `toml:"offline_after"`
	// Hosts are statically known hosts ("cloud:ip"), listed (state unknown)
	// before their agents ever report.
	Hosts []string `toml:"hosts"`
}

// NATSUser is one credential the embedded server accepts. Give Password or
// NKey (a public user nkey, "U..."). Role "agent" (the default) serves one
// host: Host ("cloud:ip") binds it to that identity; outside --demo an
// agent credential without Host is refused at start. Role "sim" (`gseproc
// sim`) serves the hosts of Hosts, each "cloud:ip" or "cloud:*" (every host
// of a cloud area). Role "server" has every permission: another gseproc
// server using this NATS (its tasks, JetStream state). What each role may
// publish and subscribe to is transport's (package doc).
type NATSUser struct {
	User     string   `toml:"user"`
	Password string   `toml:"password"`
	NKey     string   `toml:"nkey"`
	Host     string   `toml:"host"`
	Hosts    []string `toml:"hosts"`
	Role     string   `toml:"role"`
}

// NATS user roles.
const (
	NATSRoleAgent  = "agent"
	NATSRoleSim    = "sim"
	NATSRoleServer = "server"
)

// Name names the credential in messages: its user name or nkey.
func (u NATSUser) Name() string {
	if u.NKey != "" {
		return "nkey " + u.NKey
	}
	return "user " + strconv.Quote(u.User)
}

// NATSClusterConfig joins the embedded server to a cluster. Every node
// shares one route credential (User/Password): a node accepts a route only
// with it, and presents it on the routes it opens. Outside --demo a cluster
// listener without it is refused at start. With TLS, routes are encrypted
// and each side verifies the other's certificate against CA (both ways:
// each node's certificate must allow server and client auth).
type NATSClusterConfig struct {
	Name     string       `toml:"name"`
	Listen   string       `toml:"listen"` // route address, "host:port"
	Routes   []string     `toml:"routes"` // nats-route://host:port of every node
	User     string       `toml:"user"`
	Password string       `toml:"password"`
	TLS      NATSRouteTLS `toml:"tls"`
}

// NATSRouteTLS are the route TLS files; peers are always verified.
type NATSRouteTLS struct {
	Cert string `toml:"cert"`
	Key  string `toml:"key"`
	CA   string `toml:"ca"`
}

// NATSTLSConfig are TLS files.
type NATSTLSConfig struct {
	Cert   string `toml:"cert"`
	Key    string `toml:"key"`
	CA     string `toml:"ca"`
	Verify bool   `toml:"verify"`
}

// Enabled reports whether any TLS file is set.
func (t NATSTLSConfig) Enabled() bool { return t.Cert != "" || t.Key != "" || t.CA != "" }

// DefaultNATSListen is where the embedded server listens and where agents
// connect by default.
const DefaultNATSListen = "127.0.0.1:4222"

func defaultNATS() NATSConfig {
	return NATSConfig{
		Listen:            DefaultNATSListen,
		Replicas:          1,
		MaxEvents:         10000,
		HeartbeatInterval: Duration(5 * time.Second),
		// 5,000 a second: up to 25,000 hosts beat every 5 s; 100,000
		// every 20 s (offline within a minute), a quarter of the beats
		// of 5 s. Measured idle with 100,000 simulated hosts (e41485b):
		// the server's CPU 170-217 -> 49-80 ms/s, the simulator's
		// 22-51 -> 23-38 ms/s (no clear change).
		MaxHeartbeatsPerSecond: 5000,
		OfflineAfter:           Duration(16 * time.Second),
	}
}

// External reports whether the config names an external cluster.
func (c NATSConfig) External() bool { return len(c.URLs) > 0 }

// ClientURLs is where agents connect: URLs, or the default listen address.
func (c NATSConfig) ClientURLs() string {
	if len(c.URLs) > 0 {
		return strings.Join(c.URLs, ",")
	}
	return "nats://" + DefaultNATSListen
}

// Validate checks the section (every bad field is named).
func (c NATSConfig) Validate() error { return c.validate() }

func (c NATSConfig) validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("nats.%s: %s", field, fmt.Sprintf(format, a...)))
	}
	for i, u := range c.URLs {
		p, err := url.Parse(u)
		if err != nil || p.Host == "" {
			bad(fmt.Sprintf("urls[%d]", i), "%q is not a URL like nats://host:4222", u)
		}
	}
	if c.Listen != "" {
		if _, _, err := SplitListen(c.Listen); err != nil {
			bad("listen", "%v", err)
		}
	}
	if c.Cluster.Listen != "" {
		if _, _, err := SplitListen(c.Cluster.Listen); err != nil {
			bad("cluster.listen", "%v", err)
		}
		if c.Cluster.Name == "" {
			bad("cluster.name", "required when cluster.listen is set")
		}
		if len(c.Cluster.Routes) == 0 {
			bad("cluster.routes", "required when cluster.listen is set (JetStream needs them: list every node's route URL, this one's included)")
		}
	}
	for i, r := range c.Cluster.Routes {
		if p, err := url.Parse(r); err != nil || p.Host == "" {
			bad(fmt.Sprintf("cluster.routes[%d]", i), "%q is not a URL like nats-route://host:6222", r)
		} else if p.User != nil {
			bad(fmt.Sprintf("cluster.routes[%d]", i), "carries credentials in the URL: set cluster.user and cluster.password instead")
		}
	}
	if (c.Cluster.User == "") != (c.Cluster.Password == "") {
		bad("cluster.password", "cluster.user and cluster.password go together")
	}
	if rt := c.Cluster.TLS; rt != (NATSRouteTLS{}) && (rt.Cert == "" || rt.Key == "" || rt.CA == "") {
		bad("cluster.tls", "cert, key and ca go together (routes verify their peers against ca)")
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		bad("replicas", "%d must be between 1 and 5", c.Replicas)
	}
	if c.MaxEvents < 1 {
		bad("max_events", "%d must be >= 1", c.MaxEvents)
	}
	if c.HeartbeatInterval.D() <= 0 {
		bad("heartbeat_interval", "%s must be > 0", c.HeartbeatInterval.D())
	}
	if c.MaxHeartbeatsPerSecond < 0 {
		bad("max_heartbeats_per_second", "%d must be >= 0 (0: no bound)", c.MaxHeartbeatsPerSecond)
	}
	if c.OfflineAfter.D() <= c.HeartbeatInterval.D() {
		bad("offline_after", "%s must be longer than heartbeat_interval (%s)", c.OfflineAfter.D(), c.HeartbeatInterval.D())
	}
	if c.Password != "" && c.User == "" {
		bad("user", "required when password is set")
	}
	if n := btoi(c.User != "") + btoi(c.NKeySeedFile != "") + btoi(c.CredsFile != ""); n > 1 {
		bad("nkey_seed_file", "give one of user/password, nkey_seed_file, creds_file")
	}
	seen := map[string]bool{}
	for i, u := range c.Users {
		f := fmt.Sprintf("users[%d]", i)
		switch {
		case u.NKey != "" && (u.User != "" || u.Password != ""):
			bad(f, "give user/password or nkey, not both")
		case u.NKey != "":
			if !strings.HasPrefix(u.NKey, "U") {
				bad(f+".nkey", "%q is not a public user nkey (starts with U)", u.NKey)
			}
		case u.User == "":
			bad(f+".user", "required (or nkey)")
		case u.Password == "":
			bad(f+".password", "required for user %q", u.User)
		}
		id := u.User + u.NKey
		if id != "" && seen[id] {
			bad(f, "%q is listed twice", id)
		}
		seen[id] = true
		switch u.Role {
		case "", NATSRoleAgent:
			if len(u.Hosts) > 0 {
				bad(f+".hosts", "an agent credential serves one host: set host, or role = \"sim\" for a simulated fleet")
			}
		case NATSRoleSim:
			if u.Host != "" {
				bad(f+".host", "a sim credential is bound by hosts (a list), not host")
			}
			if len(u.Hosts) == 0 {
				bad(f+".hosts", "required for role sim: the hosts it may serve, each \"cloud:ip\" or \"cloud:*\"")
			}
			for j, h := range u.Hosts {
				if _, err := model.ParseHostPattern(h); err != nil {
					bad(fmt.Sprintf("%s.hosts[%d]", f, j), "%v", err)
				}
			}
		case NATSRoleServer:
			if u.Host != "" || len(u.Hosts) > 0 {
				bad(f+".host", "a server credential is not bound to a host")
			}
		default:
			bad(f+".role", "%q: want agent, sim or server", u.Role)
		}
		if u.Host != "" {
			if _, err := model.ParseAgentID(u.Host); err != nil {
				bad(f+".host", "%v", err)
			}
		}
	}
	for i, h := range c.Hosts {
		if _, err := model.ParseAgentID(h); err != nil {
			bad(fmt.Sprintf("hosts[%d]", i), "%v", err)
		}
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		bad("tls", "cert and key go together")
	}
	if c.TLS.Verify && c.TLS.CA == "" {
		bad("tls.ca", "required when tls.verify is set")
	}
	return errors.Join(errs...)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SplitListen parses a listen address "host:port" (port -1 = any free port).
func SplitListen(s string) (string, int, error) {
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port: %v", s, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < -1 || n > 65535 {
		return "", 0, fmt.Errorf("%q: port %q is not a number in -1..65535", s, p)
	}
	return h, n, nil
}
