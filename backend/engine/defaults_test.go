package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/model"
)

// TestPolicyDefaultsAppliedOnce: a definition that leaves its policy empty
// (as the native API, the console and apply may send it) gets the
// documented defaults once, where it enters the registry; a value set once
// (op_timeout 7) is what is stored, what the agent is sent and what the
// task's per-host deadline is made of.
func TestPolicyDefaultsAppliedOnce(t *testing.T) {
	f := newFake(2)
	var mu sync.Mutex
	sent := map[string]model.AgentRequest{}
	f.reply = func(_ context.Context, _ model.Host, req model.AgentRequest) (model.AgentReply, error) {
		mu.Lock()
		sent[req.Process.Key()] = req
		mu.Unlock()
		return model.AgentReply{Code: 0, Message: "success"}, nil
	}
	clock := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	cfg := testCfg()
	cfg.DeadlineSlack = config.Duration(3 * time.Second)
	e, _ := start(t, f, cfg, engine.WithClock(func() time.Time { return clock }))
	ctx := context.Background()

	bare := func(name string) model.Process {
		p := model.Process{Meta: model.Meta{Namespace: "def", Name: name}}
		p.Spec.Identity = model.Identity{ProcName: name, SetupPath: "/opt/" + name, PidPath: "/var/run/" + name + ".pid"}
		p.Spec.Control = model.Control{StartCmd: "./start.sh", StopCmd: "./stop.sh"}
		p.Spec.Policy.AutoType = model.AutoResident
		return p
	}
	empty, seven := bare("empty"), bare("seven")
	seven.Spec.Policy.OpTimeout = 7
	for _, p := range []model.Process{empty, seven} {
		if err := e.SaveProcess(ctx, model.ProcessDef{Process: p, Hosts: []model.Host{hostN(0)}}); err != nil {
			t.Fatal(err)
		}
	}
	defs, err := e.Processes(ctx, backend.ProcQuery{Namespace: "def"})
	if err != nil || len(defs) != 2 {
		t.Fatalf("definitions %v (%v)", defs, err)
	}
	want := map[string]int{"def:empty": model.DefaultOpTimeout, "def:seven": 7}
	for _, d := range defs {
		pol := d.Process.Spec.Policy
		if pol.OpTimeout != want[d.Process.Key()] || pol.StartCheckSecs != model.DefaultStartCheckSecs ||
			pol.StartRetries != model.DefaultStartRetries || pol.StartInterval != model.DefaultStartInterval ||
			pol.InstanceNum != 1 || d.Process.Spec.Control.ShellExt != "sh" {
			t.Fatalf("stored %s policy %+v, shell %q", d.Process.Key(), pol, d.Process.Spec.Control.ShellExt)
		}
	}

	_, res := operate(t, e, backend.OperateRequest{Op: model.OpStart, Selector: backend.Selector{Namespace: "def"}})
	if len(res) != 2 {
		t.Fatalf("%d results", len(res))
	}
	mu.Lock()
	defer mu.Unlock()
	for key, secs := range want {
		req, ok := sent[key]
		if !ok {
			t.Fatalf("%s never sent", key)
		}
		if got := req.Process.Spec.Policy.OpTimeout; got != secs {
			t.Fatalf("%s sent with op_timeout %d, want %d", key, got, secs)
		}
		_, end := req.Process.CheckWindow()
		budget := time.Duration(secs+end)*time.Second + 3*time.Second
		if !req.Deadline.Equal(clock.Add(budget)) {
			t.Fatalf("%s deadline %s, want %s (op_timeout %d + start check %d + slack 3s)", key, req.Deadline.Sub(clock), budget, secs, end)
		}
	}
}
