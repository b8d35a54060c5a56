package server

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// TestTaskViewJSON: a task read's data written by taskViewJSON is the
// bytes encoding/json writes for it (the envelope's encoder) when no
// result holds an HTML character, and decodes to the same view when one
// does (escaped as the task's stream escapes it); no results, a roll and
// a result of every kind included.
func TestTaskViewJSON(t *testing.T) {
	now := time.Date(2026, 11, 28, 18, 0, 0, 123456789, time.UTC)
	h := model.Host{IP: "10.0.0.1"}
	task := model.Task{ID: "GSETASK:20261128180000:1", Op: model.OpStatus, Targets: 3, Namespace: []string{"web"},
		Source: "console", Operator: "ops <night>", Selection: "3 hosts", Status: model.TaskRunning, Created: now,
		Counts: model.Counts{Pending: 1, Success: 1, Failed: 1}}
	results := []model.Result{
		{TaskID: task.ID, Host: h, ProcKey: "web:nginx", Op: model.OpStatus, State: model.StatePending},
		{TaskID: task.ID, Host: h, ProcKey: "web:php", AgentID: "0:10.0.0.1", Op: model.OpStatus, State: model.StateSuccess, Seq: 2,
			Started: now, Finished: now.Add(time.Second), Message: "success",
			Status: &model.ProcStatus{State: model.ProcRunning, PID: 42, Hosted: true, CPU: 1.5, Mem: 0.25}},
		{TaskID: task.ID, Host: model.Host{IP: "10.0.0.2", CloudID: 3}, ProcKey: "web:db", Op: model.OpStatus, State: model.StateFailed, Seq: 1,
			Code: model.CodeCommandFailed, Message: "exit 1: can't open \"x\"\n"},
	}
	roll := &model.RollView{}
	for _, tc := range []struct {
		name string
		tv   backend.TaskView
		same bool // byte for byte
	}{
		{"no results", backend.TaskView{Task: task, Results: []model.Result{}}, true},
		{"results", backend.TaskView{Task: task, Results: results}, true},
		{"nil results, a roll", backend.TaskView{Task: task, Roll: roll}, true},
		{"HTML in a result", backend.TaskView{Task: task, Results: append(slices.Clone(results),
			model.Result{TaskID: task.ID, Host: h, ProcKey: "web:x", State: model.StateFailed, Message: "a <b> & c \\u003c"})}, false},
	} {
		got, err := taskViewJSON(&tc.tv)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want, err := compactJSON(tc.tv)
		if err != nil {
			t.Fatal(err)
		}
		if tc.same && string(got) != string(want) {
			t.Fatalf("%s:\n got %s\nwant %s", tc.name, got, want)
		}
		var a, b backend.TaskView
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatalf("%s: %v in %s", tc.name, err, got)
		}
		if err := json.Unmarshal(want, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: decodes to\n%+v\nwant\n%+v", tc.name, a, b)
		}
	}
}
