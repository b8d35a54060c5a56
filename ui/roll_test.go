package ui

import (
	"strings"
	"testing"
	"time"

	"gseproc/backend/config"
	"gseproc/model"
)

// TestRollingFromTheConsole: the op picker rolls an op with the console's
// defaults (b), its pause cycles to manual (p); the confirmation says so;
// the watch shows the roll waiting after the canary, p resumes it, and X
// (after a confirmation) aborts it: the watch says why it stopped.
func TestRollingFromTheConsole(t *testing.T) {
	e, _ := simBackend(t, quietSim(60))
	cfg := config.Default().Console
	cfg.ConfirmThreshold = 1000 // y/N
	d := newDriver(t, e, Options{Guard: time.Nanosecond, Config: cfg}, 120, 36)
	openHosts(t, d, "app=nginx")
	d.keys("a", "o")
	p := topAs[*opPage](t, d)
	d.until("processes", func() bool { return p.loaded })
	if !strings.Contains(d.view(), "b rolls the op in batches") {
		t.Fatalf("the picker does not offer rolling:\n%s", d.view())
	}
	d.keys("b", "p", "p")
	if p.roll == nil || *p.roll != (model.RolloutSpec{Batch: "10%", Canary: "1", MaxFail: "1", Pause: model.PauseManual}) {
		t.Fatalf("rollout %+v", p.roll)
	}
	if v := d.view(); !strings.Contains(v, "rolling: batch 10% · canary 1 · pause until resumed · max-fail 1 per batch") {
		t.Fatalf("picker:\n%s", v)
	}
	d.keys("enter") // restart
	d.until("dialog", func() bool { return d.m.dialog != nil })
	if v := d.view(); !strings.Contains(v, "rolled in batches: batch 10%") {
		t.Fatalf("the confirmation does not say the op is rolled:\n%s", v)
	}
	d.keys("y")
	d.until("watch", func() bool { w, ok := d.m.top().(*watchPage); return ok && w.loaded })
	w := topAs[*watchPage](t, d)
	if w.task.Rollout == nil {
		t.Fatalf("task %+v is not rolled", w.task)
	}
	// R reads the roll again (ticks do it in a live console).
	rollUntil := func(what string, ok func(*model.RollView) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for w.roll == nil || !ok(w.roll) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 30s; roll %+v\n%s", what, w.roll, d.view())
			}
			d.keys("R")
			d.until("roll read", func() bool { return !w.rollLoading })
			time.Sleep(20 * time.Millisecond)
		}
	}
	rollUntil("waiting after the canary", func(r *model.RollView) bool { return r.State == model.RollStateWaitingResume })
	v := d.view()
	for _, want := range []string{"roll waiting resume: batch 1 of", "max-fail 1 per batch", "1 done", "p resume", "X abort"} {
		if !strings.Contains(v, want) {
			t.Fatalf("watch does not say %q:\n%s", want, v)
		}
	}
	d.keys("p")
	rollUntil("batch 2 done", func(r *model.RollView) bool {
		return r.State == model.RollStateWaitingResume && r.Started == 2
	})
	d.keys("X")
	d.until("dialog", func() bool { return d.m.dialog != nil })
	if !strings.Contains(d.view(), "Abort roll") {
		t.Fatalf("abort asks nothing:\n%s", d.view())
	}
	d.keys("y")
	rollUntil("aborted", func(r *model.RollView) bool { return r.State == model.RollStateStopped })
	d.until("task over", func() bool { return taskFinal(w.task.Status) })
	if v := d.view(); !strings.Contains(v, "roll stopped: aborted by") || !strings.Contains(v, "not sent") {
		t.Fatalf("watch after abort:\n%s", v)
	}
	if w.task.Status != model.TaskCanceled {
		t.Fatalf("task %s", w.task.Status)
	}
}
