package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/simulator"
	"gseproc/backend/store"
)

// env is a real server on 127.0.0.1 over the real engine and a simulated
// demo fleet.
type env struct {
	t     testing.TB
	srv   *Server
	hs    *httptest.Server
	eng   *engine.Engine
	fleet *simulator.Fleet
}

// demoApp is the app of the documents' examples: esb_test / xxx on biz 1
// and biz_set 1, every namespace.
func demoApp() config.AppConfig {
	return config.AppConfig{Code: "esb_test", Salt: "s4lt", SecretSHA256: config.HashSecret("s4lt", "xxx"),
		Biz: []int{1}, BizSet: []int{1}, Namespaces: []string{"*"}}
}

func testConfig() config.ServerConfig {
	cfg := config.Default().Server
	cfg.Apps = []config.AppConfig{demoApp(),
		{Code: "narrow", Salt: "x", SecretSHA256: config.HashSecret("x", "pw"), Biz: []int{2}, Namespaces: []string{"web"},
			Users: []string{"alice"}}}
	cfg.AnonymousApp = "esb_test"
	cfg.Rate = 0
	cfg.SyncTimeout = config.Duration(20 * time.Second)
	return cfg
}

func quietSim() config.SimulatorConfig {
	sc := config.Default().Simulator
	sc.Hosts = 120
	sc.Seed = 11
	sc.Demo = true
	sc.LatencyMedian = config.Duration(2 * time.Millisecond)
	sc.LatencyP99 = config.Duration(10 * time.Millisecond)
	sc.FailureRate, sc.OfflineRate, sc.UnreachableRate, sc.CrashRate = 0, 0, 0, 0
	return sc
}

func newEnv(t testing.TB, cfg config.ServerConfig, opts ...Option) *env {
	t.Helper()
	return newEnvSim(t, cfg, quietSim(), opts...)
}

func newEnvSim(t testing.TB, cfg config.ServerConfig, sc config.SimulatorConfig, opts ...Option) *env {
	t.Helper()
	return newEnvEngine(t, cfg, sc, nil, opts...)
}

// newEnvEngine is newEnvSim with the engine's options (fleet gives the
// simulated fleet, e.g. to engine.WithSimulator).
func newEnvEngine(t testing.TB, cfg config.ServerConfig, sc config.SimulatorConfig, engOpts func(*simulator.Fleet) []engine.Option, opts ...Option) *env {
	t.Helper()
	fleet := simulator.New(sc)
	var eo []engine.Option
	if engOpts != nil {
		eo = engOpts(fleet)
	}
	eng := engine.New(config.Default().Engine, fleet, fleet, store.NewMemory(), eo...)
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := eng.Seed(ctx, fleet.Definitions()); err != nil {
		t.Fatal(err)
	}
	srv := New(eng, cfg, nil, opts...)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		_ = srv.Close()
		_ = eng.Close()
		_ = fleet.Close()
	})
	return &env{t: t, srv: srv, hs: hs, eng: eng, fleet: fleet}
}

// reply is a decoded envelope.
type reply struct {
	Status     int
	Header     http.Header
	Result     bool            `json:"result"`
	Code       int             `json:"code"`
	Message    string          `json:"message"`
	Data       json.RawMessage `json:"data"`
	Permission json.RawMessage `json:"permission"`
	RequestID  string          `json:"request_id"`
	raw        []byte
}

func (e *env) do(method, path string, body []byte, hdr map[string]string) reply {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.hs.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.hs.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	r := reply{Status: resp.StatusCode, Header: resp.Header, raw: raw}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return r // an event stream (raw)
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		e.t.Fatalf("%s %s: reply is not the envelope: %v\n%s", method, path, err, raw)
	}
	return r
}

func (e *env) post(path string, body any) reply {
	e.t.Helper()
	var b []byte
	switch x := body.(type) {
	case []byte:
		b = x
	case string:
		b = []byte(x)
	default:
		var err error
		if b, err = json.Marshal(body); err != nil {
			e.t.Fatal(err)
		}
	}
	return e.do(http.MethodPost, path, b, nil)
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withAuth adds the demo gateway fields to a body.
func withAuth(m map[string]any) map[string]any {
	m["bk_app_code"] = "esb_test"
	m["bk_app_secret"] = "xxx"
	m["bk_username"] = "admin"
	return m
}

func decode[T any](t testing.TB, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return v
}
