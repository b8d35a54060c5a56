package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// TestRollingOpThroughTheAPI: a rolling restart made, watched, paused,
// resumed and aborted through the native API, every request and reply
// checked against openapi.yaml; a bad rollout is refused with its
// fields; an app outside the task's namespace cannot touch it.
func TestRollingOpThroughTheAPI(t *testing.T) {
	e := newEnv(t, testConfig())
	call := func(method, path string, body any, hdr map[string]string, refused bool) reply {
		t.Helper()
		var b []byte
		if body != nil {
			var err error
			if b, err = json.Marshal(body); err != nil {
				t.Fatal(err)
			}
		}
		r := e.do(method, path, b, hdr)
		checkOpenAPI(t, method, path, b, hdr, r, refused)
		return r
	}
	bad := call(http.MethodPost, "/api/v1/operate", map[string]any{"op_type": 7, "selector": map[string]any{"namespace": "web"},
		"rollout": map[string]any{"batch": "0%", "canary": "-1", "pause": "later"}}, nil, true)
	if bad.Status != http.StatusBadRequest {
		t.Fatalf("bad rollout: %d %s", bad.Status, bad.raw)
	}
	for _, f := range []string{"rollout.batch", "rollout.canary", "rollout.pause"} {
		if !strings.Contains(string(bad.Data), f) {
			t.Fatalf("bad rollout: %s does not name %s", bad.Data, f)
		}
	}

	r := call(http.MethodPost, "/api/v1/operate", map[string]any{"op_type": 7, "selector": map[string]any{"namespace": "web"},
		"rollout": map[string]any{"batch": "25%", "canary": "1", "pause": "manual", "max_fail": "1"}}, nil, false)
	if !r.Result {
		t.Fatalf("rolling operate: %s", r.raw)
	}
	task := decode[model.Task](t, r.Data)
	if task.Rollout == nil || task.Rollout.String() != "batch 25% · canary 1 · pause until resumed · max-fail 1 per batch" {
		t.Fatalf("task %s: rollout %v", r.Data, task.Rollout)
	}
	path := "/api/v1/tasks/" + url.PathEscape(task.ID)
	view := func(what string, ok func(backend.TaskView) bool) backend.TaskView {
		t.Helper()
		var v backend.TaskView
		deadline := time.Now().Add(20 * time.Second)
		for {
			r := call(http.MethodGet, path, nil, nil, false)
			v = decode[backend.TaskView](t, r.Data)
			if v.Roll != nil && ok(v) {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 20s: %s", what, r.Data)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	v := view("the canary done, waiting for a resume", func(v backend.TaskView) bool { return v.Roll.State == model.RollStateWaitingResume })
	if !v.Roll.Batches[0].Canary || v.Roll.Batches[0].State != model.RollStateDone || v.Roll.Threshold != "max-fail 1 per batch" || v.Roll.Started != 1 {
		t.Fatalf("after the canary: %+v", v.Roll)
	}

	narrow := map[string]string{AuthHeader: `{"bk_app_code":"narrow","bk_app_secret":"pw","bk_username":"alice"}`}
	other := call(http.MethodPost, "/api/v1/operate", map[string]any{"op_type": 2, "selector": map[string]any{"namespace": "db"}}, nil, false)
	otherTask := decode[model.Task](t, other.Data)
	if r := call(http.MethodPost, "/api/v1/tasks/"+url.PathEscape(otherTask.ID)+"/abort", nil, narrow, false); r.Status != http.StatusForbidden {
		t.Fatalf("abort of a db task by an app scoped to web: %d %s", r.Status, r.raw)
	}
	if r := call(http.MethodPost, "/api/v1/tasks/"+url.PathEscape(otherTask.ID)+"/pause", nil, nil, false); r.Status != http.StatusConflict {
		t.Fatalf("pause of a task that is no roll: %d %s", r.Status, r.raw)
	}

	if r := call(http.MethodPost, path+"/resume", nil, narrow, false); !r.Result {
		t.Fatalf("resume: %s", r.raw)
	}
	view("batch 2 done, waiting again", func(v backend.TaskView) bool {
		return v.Roll.State == model.RollStateWaitingResume && v.Roll.Started == 2
	})
	if r := call(http.MethodPost, path+"/pause", nil, nil, false); !r.Result {
		t.Fatalf("pause: %s", r.raw)
	}
	v = view("paused", func(v backend.TaskView) bool { return v.Roll.State == model.RollStatePaused })
	if v.Roll.Control.PausedBy == "" {
		t.Fatalf("paused by nobody: %+v", v.Roll.Control)
	}
	if r := call(http.MethodPost, path+"/abort", nil, nil, false); !r.Result {
		t.Fatalf("abort: %s", r.raw)
	}
	v = view("aborted", func(v backend.TaskView) bool { return v.Task.Status.Final() })
	if v.Task.Status != model.TaskCanceled || v.Roll.State != model.RollStateStopped || !strings.HasPrefix(v.Roll.Stopped, "aborted by ") ||
		v.Roll.Batches[len(v.Roll.Batches)-1].State != model.BatchNotSent {
		t.Fatalf("after abort: %s %+v", v.Task.Status, v.Roll)
	}
	if r := call(http.MethodPost, path+"/resume", nil, nil, false); r.Status != http.StatusConflict {
		t.Fatalf("resume of a finished roll: %d %s", r.Status, r.raw)
	}
	es, err := e.eng.Audit(context.Background(), model.AuditQuery{TaskID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, en := range es {
		seen[en.Action+"/"+en.Result] = true
	}
	for _, want := range []string{"operate/ok", "resume/ok", "pause/ok", "abort/ok", "resume/refused"} {
		if !seen[want] {
			t.Fatalf("audit of %s: no %s in %v", task.ID, want, seen)
		}
	}
}
