package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/model"
)

// TestPolicyDefaultsAppliedOnce: a definition that leaves its policy
// fields out (decoded from JSON, as the native API, the console's client
// and apply receive it) gets the documented defaults once, where it is
// decoded; a value given (op_timeout 7, and start_check_secs,
// start_retries, start_interval 0) is what is stored, what the agent is
// sent and what the task's per-host deadline is made of: the registry
// defaults nothing again. op_timeout 0 means no time and is refused with
// the reason. (Before, the registry filled every zero: a 0 given on
// purpose became 5, 4 or 10.)
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

	decode := func(name, policy string) model.Process {
		t.Helper()
		p := model.NewProcess() // as an entrance decodes a definition
		js := `{"meta": {"namespace": "def", "name": "` + name + `"}, "spec": {
			"identity": {"proc_name": "` + name + `", "setup_path": "/opt/` + name + `", "pid_path": "/var/run/` + name + `.pid"},
			"control": {"start_cmd": "./start.sh", "stop_cmd": "./stop.sh"}` + policy + `}}`
		if err := json.Unmarshal([]byte(js), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := decode("empty", `, "monitor_policy": {"auto_type": 1}`)
	seven := decode("seven", `, "monitor_policy": {"auto_type": 1, "op_timeout": 7}`)
	zeros := decode("zeros", `, "monitor_policy": {"auto_type": 1, "start_check_secs": 0, "start_retries": 0, "start_interval": 0}`)
	for _, p := range []model.Process{empty, seven, zeros} {
		if err := e.SaveProcess(ctx, model.ProcessDef{Process: p, Hosts: []model.Host{hostN(0)}}); err != nil {
			t.Fatal(err)
		}
	}
	noTime := decode("notime", `, "monitor_policy": {"auto_type": 1, "op_timeout": 0}`)
	if err := e.SaveProcess(ctx, model.ProcessDef{Process: noTime, Hosts: []model.Host{hostN(0)}}); err == nil ||
		!strings.Contains(err.Error(), "process.spec.monitor_policy.op_timeout: 0 leaves no time") {
		t.Fatalf("op_timeout 0 saved: %v", err)
	}
	defs, err := e.Processes(ctx, backend.ProcQuery{Namespace: "def"})
	if err != nil || len(defs) != 3 {
		t.Fatalf("definitions %v (%v)", defs, err)
	}
	want := map[string]int{"def:empty": model.DefaultOpTimeout, "def:seven": 7, "def:zeros": model.DefaultOpTimeout}
	for _, d := range defs {
		pol := d.Process.Spec.Policy
		check, retries, interval := model.DefaultStartCheckSecs, model.DefaultStartRetries, model.DefaultStartInterval
		if d.Process.Key() == "def:zeros" {
			check, retries, interval = 0, 0, 0
		}
		if pol.OpTimeout != want[d.Process.Key()] || pol.StartCheckSecs != check ||
			pol.StartRetries != retries || pol.StartInterval != interval ||
			pol.InstanceNum != 1 || d.Process.Spec.Control.ShellExt != "sh" {
			t.Fatalf("stored %s policy %+v, shell %q", d.Process.Key(), pol, d.Process.Spec.Control.ShellExt)
		}
	}

	_, res := operate(t, e, backend.OperateRequest{Op: model.OpStart, Selector: backend.Selector{Namespace: "def"}})
	if len(res) != 3 {
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
		if pol := req.Process.Spec.Policy; key == "def:zeros" && (pol.StartCheckSecs != 0 || pol.StartRetries != 0 || pol.StartInterval != 0) {
			t.Fatalf("%s sent with policy %+v, want its zeros", key, pol)
		}
		_, end := req.Process.CheckWindow()
		budget := time.Duration(secs+end)*time.Second + 3*time.Second
		if !req.Deadline.Equal(clock.Add(budget)) {
			t.Fatalf("%s deadline %s, want %s (op_timeout %d + start check %d + slack 3s)", key, req.Deadline.Sub(clock), budget, secs, end)
		}
	}
}
