package model

import (
	"reflect"
	"testing"
	"time"
)

// TestResultTableKeepsEveryField: a result with every field set reads back
// whole from the compact table, its host and process from its target, its
// agent id whether it is its target's or another; a field added to Result
// that the rows forget fails the count below.
func TestResultTableKeepsEveryField(t *testing.T) {
	if n := reflect.TypeFor[Result]().NumField(); n != 15 {
		t.Fatalf("Result has %d fields: keep the new ones in ResultTable's rows or shapes, then count them here", n)
	}
	at := time.Date(2026, 11, 29, 1, 2, 3, 4, time.UTC)
	tg := Target{Host: Host{IP: "10.0.0.1", CloudID: 2}, ProcKey: "ns:p", AgentID: "agent-1"}
	full := Result{TaskID: "t", Seq: 9, Host: tg.Host, ProcKey: tg.ProcKey, ValueKey: "v", AgentID: "agent-2",
		Op: OpStatus, State: StateFailed, Code: 7, Message: "m", Hosted: true,
		Proc:   ResultProc{ProcName: "p", SetupPath: "/s", FuncID: "f", InstanceID: "i"},
		Status: &ProcStatus{ProcKey: "ns:p", PID: 3}, Started: at, Finished: at.Add(time.Second)}
	for _, tc := range []struct {
		name string
		put  []Result // set in turn; the last is read back
	}{
		{"every field", []Result{full}},
		{"its target's agent id", []Result{func() Result { r := full; r.AgentID = tg.AgentID; return r }()}},
		{"replaced by its target's agent id", []Result{full, func() Result { r := full; r.AgentID = tg.AgentID; r.Seq = 10; return r }()}},
		{"pending", []Result{{TaskID: "t", Host: tg.Host, ProcKey: tg.ProcKey, AgentID: tg.AgentID, Op: OpStart, State: StatePending}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := MakeResultTable(2)
			if _, ok := rt.Get(0, &tg); ok || rt.State(0) != "" {
				t.Fatal("a result before any was set")
			}
			for k, r := range tc.put {
				if isNew := rt.Set(0, &tg, &r); isNew != (k == 0) {
					t.Fatalf("set %d: new %v", k, isNew)
				}
			}
			want := tc.put[len(tc.put)-1]
			got, ok := rt.Get(0, &tg)
			if !ok || !reflect.DeepEqual(got, want) || got.Status != want.Status {
				t.Fatalf("read back\n got %+v\nwant %+v", got, want)
			}
			if rt.State(0) != want.State || rt.Seq(0) != want.Seq {
				t.Fatalf("state %q seq %d, want %q %d", rt.State(0), rt.Seq(0), want.State, want.Seq)
			}
			if _, ok := rt.Get(1, &tg); ok {
				t.Fatal("target 1 has a result it was never given")
			}
		})
	}
}
