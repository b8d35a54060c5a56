package node

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"gseproc/backend/config"
)

func TestApplyDemo(t *testing.T) {
	cfg := config.Default()
	cfg.Server.Apps = []config.AppConfig{{Code: DemoAppCode, Salt: "s", SecretSHA256: "old"}, {Code: "other", Salt: "s", SecretSHA256: "x"}}
	ApplyDemo(&cfg)
	if !cfg.Simulator.Demo || cfg.Server.Fleet != "mixed" || cfg.Server.AnonymousApp != DemoAppCode || cfg.Server.NativeAuth {
		t.Fatalf("demo config: %+v %+v", cfg.Simulator, cfg.Server)
	}
	if len(cfg.Server.Apps) != 2 || cfg.Server.Apps[1].Code != "other" {
		t.Fatalf("apps: %+v", cfg.Server.Apps)
	}
	demo := cfg.Server.Apps[0]
	if demo.Code != DemoAppCode || demo.SecretSHA256 != config.HashSecret(demo.Salt, DemoSecret) || demo.Salt == "s" {
		t.Fatalf("the demo app replaces the configured one with a fresh salt: %+v", demo)
	}
	cfg = config.Default()
	cfg.Server.Fleet = "simulated"
	ApplyDemo(&cfg)
	if cfg.Server.Fleet != "simulated" {
		t.Fatalf("a simulated fleet stays simulated: %q", cfg.Server.Fleet)
	}
}

func TestServePprof(t *testing.T) {
	for _, bad := range []string{"0.0.0.0:0", "10.0.0.1:6060", "example.com:6060", "nohostport"} {
		if _, stop, err := ServePprof(bad); err == nil {
			stop()
			t.Errorf("ServePprof(%q) served; want refused", bad)
		}
	}
	addr, stop, err := ServePprof("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("pprof: %d %.200s", resp.StatusCode, body)
	}
	stop()
	if _, err := http.Get("http://" + addr.String() + "/debug/pprof/"); err == nil {
		t.Fatal("pprof still served after stop")
	}
}

// TestServeAPI: the API of a server node on a simulated fleet answers once
// the node runs (serving is told the address), and stops with ctx.
func TestServeAPI(t *testing.T) {
	cfg := config.Default()
	cfg.Server.Fleet = "simulated"
	cfg.Simulator.Hosts = 20
	ApplyDemo(&cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := StartServer(ctx, cfg, true, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serving := make(chan net.Addr, 1)
	served := make(chan error, 1)
	go func() { served <- n.ServeAPI(ctx, ln, cfg.Server, func(a net.Addr) { serving <- a }) }()
	select {
	case a := <-serving:
		if a.String() != ln.Addr().String() {
			t.Fatalf("serving at %s, listening on %s", a, ln.Addr())
		}
	case err := <-served:
		t.Fatalf("ServeAPI ended before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not serving within 30s")
	}
	resp, err := http.Get("http://" + ln.Addr().String() + "/api/v1/info")
	if err != nil {
		t.Fatal(err)
	}
	var reply struct {
		Result bool `json:"result"`
		Data   struct {
			Hosts int `json:"hosts"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&reply)
	resp.Body.Close()
	if err != nil || !reply.Result || reply.Data.Hosts == 0 {
		t.Fatalf("info: %v %+v", err, reply)
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("ServeAPI: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ServeAPI did not stop within 30s of cancel")
	}
}
