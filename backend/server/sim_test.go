package server

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/client"
	"gseproc/backend/engine"
	"gseproc/backend/simulator"
	"gseproc/model"
)

// A fleet of real agents refuses every simulator control with the reason;
// nothing changes.
func TestSimRefusedOnRealAgents(t *testing.T) {
	e := newEnv(t, testConfig()) // the engine was given no simulator to drive
	r := e.post("/api/v1/sim", `{"action":"offline","share":0.5}`)
	if r.Result || r.Status != http.StatusConflict || !strings.Contains(r.Message, "real agents") ||
		decode[map[string]any](t, r.Data)["kind"] != "not_simulated" {
		t.Fatalf("want 409 not_simulated, got %d %s %s", r.Status, r.Message, r.Data)
	}
	his, _ := e.eng.Hosts(context.Background(), backend.HostQuery{})
	for _, h := range his {
		if s, _ := e.fleet.Host(h.Host); s.Offline {
			t.Fatalf("%s taken offline by a refused control", h.Host)
		}
	}
	c := client.New(e.hs.URL)
	defer c.Close()
	if _, err := c.Simulate(context.Background(), backend.SimRequest{SimChange: model.SimChange{Action: model.SimOffline}}); !errors.Is(err, model.ErrNotSimulated) {
		t.Fatalf("client: want ErrNotSimulated, got %v", err)
	}
}

func TestSimOverHTTP(t *testing.T) {
	e := newEnvEngine(t, testConfig(), quietSim(), func(f *simulator.Fleet) []engine.Option {
		return []engine.Option{engine.WithSimulator(f)}
	})
	ctx := context.Background()
	c := client.New(e.hs.URL)
	defer c.Close()

	// Bad input: every field named, nothing done.
	r := e.post("/api/v1/sim", `{"action":"explode","share":2,"selector":{"hosts":[{"ip":"10.0.0.999"}]}}`)
	if r.Result || r.Status != http.StatusBadRequest {
		t.Fatalf("want 400, got %d %s", r.Status, r.Message)
	}
	for _, f := range []string{"action", "share", "selector.hosts"} {
		if !strings.Contains(r.Message, f) {
			t.Errorf("refusal does not name %s: %s", f, r.Message)
		}
	}
	if _, err := c.Simulate(ctx, backend.SimRequest{SimChange: model.SimChange{Action: model.SimCrash}, Selector: backend.Selector{Namespace: "web"}}); err == nil ||
		!strings.Contains(err.Error(), "selector.name") {
		t.Fatalf("crash without a process name: %v", err)
	}

	out, err := c.Simulate(ctx, backend.SimRequest{SimChange: model.SimChange{Action: model.SimCrash, Count: 4, Note: "watch them come back"},
		Selector: backend.Selector{Namespace: "web", Name: "nginx"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Picked) != 4 || out.Changed == 0 || out.Picked[0].ProcKey != "web:nginx" {
		t.Fatalf("outcome: %+v", out)
	}
	// The same request against the same seed picks the same hosts.
	again, err := e.eng.Simulate(ctx, backend.SimRequest{SimChange: model.SimChange{Action: model.SimCrash, Count: 4},
		Selector: backend.Selector{Namespace: "web", Name: "nginx"}})
	if err != nil || !slices.Equal(again.Picked, out.Picked) {
		t.Fatalf("picks differ: %v %v (%v)", out.Picked, again.Picked, err)
	}
	// The change is an event, and the audit trail has it.
	found := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		evs, err := c.RecentEvents(ctx, 50)
		if err != nil {
			t.Fatal(err)
		}
		found = slices.ContainsFunc(evs, func(ev model.Event) bool {
			return ev.Kind == model.EventSimControl && strings.Contains(ev.Message, "watch them come back")
		})
		if found {
			break
		}
	}
	if !found {
		t.Fatal("no sim_control event")
	}
	es, err := c.Audit(ctx, model.AuditQuery{Action: model.AuditSimulate})
	if err != nil || len(es) != 2 || es[1].Op != "crash" || !strings.HasPrefix(es[1].Actor.Via, "api") || es[1].TargetCount != 4 || es[1].Namespaces[0] != "web" {
		t.Fatalf("audit: %+v %v", es, err)
	}
}
