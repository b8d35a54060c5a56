package node

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
)

func TestLocalURL(t *testing.T) {
	for listen, want := range map[string]string{
		"":               "http://127.0.0.1:8080",
		"0.0.0.0:9000":   "http://127.0.0.1:9000",
		":9001":          "http://127.0.0.1:9001",
		"[::]:9002":      "http://127.0.0.1:9002",
		"10.1.2.3:9003":  "http://10.1.2.3:9003",
		"[::1]:9004":     "http://[::1]:9004",
		"no port at all": "http://127.0.0.1:8080",
	} {
		if got := LocalURL(listen); got != want {
			t.Errorf("LocalURL(%q) = %q, want %q", listen, got, want)
		}
	}
}

// TestChooseServer: the rules of Choice, in order, against a real local
// server (an HTTP server on 127.0.0.1 answering /healthz as gseproc does)
// and a dead address.
func TestChooseServer(t *testing.T) {
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"result":true,"data":{"status":"ok"}}`))
	}))
	defer live.Close()
	liveListen := strings.TrimPrefix(live.URL, "http://")
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadListen := dead.Addr().String()
	dead.Close()

	cfgOn := func(listen string, servers ...string) config.Config {
		cfg := config.Default()
		cfg.Server.Listen = listen
		cfg.Server.Client.Servers = servers
		return cfg
	}
	tests := []struct {
		name     string
		env      string
		cfg      config.Config
		simAsked bool
		want     Choice
	}{
		{"env none", "none", cfgOn(liveListen), false, Choice{}},
		{"env URL", "http://10.0.0.9:8080", cfgOn(liveListen), false, Choice{URL: "http://10.0.0.9:8080"}},
		{"client servers", "", cfgOn(liveListen, "http://10.0.0.9:8080"), false, Choice{}},
		{"simulated fleet asked", "", cfgOn(liveListen), true, Choice{}},
		{"local server answers", "", cfgOn(liveListen), false, Choice{URL: live.URL, Local: true}},
		{"no local server", "", cfgOn(deadListen), false, Choice{Throwaway: "http://" + deadListen}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvServer, tc.env)
			if got := ChooseServer(context.Background(), tc.cfg, tc.simAsked); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestOpenBackend: without servers it is the embedded engine over a
// simulated fleet; a server URL that does not answer is refused at once.
func TestOpenBackend(t *testing.T) {
	cfg := config.Default()
	cfg.Simulator.Hosts = 10
	b, closer, err := OpenBackend(context.Background(), cfg, "", "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.(*engine.Engine); !ok {
		t.Fatalf("backend %T, want the embedded engine", b)
	}
	hosts, err := b.Hosts(context.Background(), backend.HostQuery{})
	if err != nil || len(hosts) != 10 {
		t.Fatalf("hosts: %d %v", len(hosts), err)
	}
	if err := closer(); err != nil {
		t.Fatal(err)
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + dead.Addr().String()
	dead.Close()
	if _, _, err := OpenBackend(context.Background(), cfg, url, "test", nil); err == nil || !strings.Contains(err.Error(), url) {
		t.Fatalf("a dead server: %v", err)
	}
	if _, _, err := OpenBackend(context.Background(), cfg, "ftp://nowhere", "test", nil); err == nil || !strings.Contains(err.Error(), "--server") {
		t.Fatalf("a bad URL: %v", err)
	}
}

// TestEmbedded: the embedded engine (and the memory pacing the embedded
// console runs) unless a server is named, on the command line or in
// [server.client] servers.
func TestEmbedded(t *testing.T) {
	for _, c := range []struct {
		flag    string
		servers []string
		want    bool
	}{
		{"", nil, true},
		{"http://127.0.0.1:8080", nil, false},
		{"", []string{"http://127.0.0.1:8080"}, false},
		{"http://a:1,http://b:1", []string{"http://c:1"}, false},
	} {
		cfg := config.Default()
		cfg.Server.Client.Servers = c.servers
		if got := Embedded(cfg, c.flag); got != c.want {
			t.Errorf("Embedded(servers %v, --server %q) = %v, want %v", c.servers, c.flag, got, c.want)
		}
	}
}
