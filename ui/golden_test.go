package ui

import (
	"fmt"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/model"
)

// Golden files of rendered screens, mono theme, fixed sizes and a fixed
// clock. Regenerate with: go test ./ui -run TestGolden -update

var goldenSizes = []struct{ w, h int }{{80, 24}, {120, 40}}

func goldenName(screen string, w, h int) string { return fmt.Sprintf("%s_%dx%d", screen, w, h) }

// fixedTask is a task with results in every state, at fixed times.
func fixedTask() (model.Task, []model.Result) {
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	task := model.Task{ID: "GSETASK:20261121100000:42", Op: model.OpRestart, Targets: 12, Namespace: []string{"web"},
		Status: model.TaskRunning, Created: t0}
	states := []struct {
		s    model.ResultState
		code int
		msg  string
	}{
		{model.StateSuccess, 0, "success"}, {model.StateFailed, 65535, "Script exit code non-zero: ./restart.sh: line 3: permission denied"},
		{model.StateSuccess, 0, ""}, {model.StateTimeout, model.CodeTimeout, "no reply within 62s"},
		{model.StateUnreachable, model.CodeAgentAbnormal, "agent abnormal or unreachable"}, {model.StateSuccess, 0, ""},
		{model.StatePending, 0, ""}, {model.StateRunning, 0, ""}, {model.StateFailed, model.CodePostCheckFailed, "post-check failed: not up after 5s"},
		{model.StateSuccess, 0, ""}, {model.StateCancelled, 0, "cancelled"}, {model.StateSkipped, 0, "already running"},
	}
	var rs []model.Result
	for i, s := range states {
		r := model.Result{TaskID: task.ID, Host: model.Host{IP: fmt.Sprintf("10.0.0.%d", i+1)}, ProcKey: "web:nginx",
			Op: model.OpRestart, State: s.s, Code: s.code, Message: s.msg}
		if s.s.Final() {
			r.Seq = int64(i + 1)
			r.Started = t0.Add(time.Duration(i) * 10 * time.Millisecond)
			r.Finished = r.Started.Add(time.Duration(i*137+40) * time.Millisecond)
			r.Proc, r.Hosted = model.ResultProc{ProcName: "nginx", SetupPath: "/usr/local/nginx/sbin"}, true
		}
		rs = append(rs, r)
	}
	return task, rs
}

func TestGolden(t *testing.T) {
	e, _ := simBackend(t, quietSim(40, "web", "db"))
	for _, sz := range goldenSizes {
		t.Run(fmt.Sprintf("%dx%d", sz.w, sz.h), func(t *testing.T) {
			clk := newClock()
			cfg := config.Default().Console
			cfg.ProtectedNamespaces = []string{"db"}
			d := newDriver(t, e, Options{Now: clk.Now, Guard: time.Nanosecond, Config: cfg, Operator: "golden"}, sz.w, sz.h)
			snap := func(screen string) {
				t.Helper()
				v := d.view()
				checkFrame(t, v, sz.w, sz.h)
				golden(t, goldenName(screen, sz.w, sz.h), v)
			}
			d.until("namespaces, info and live events", func() bool {
				return d.m.stack[0].(*nsPage).loaded && d.m.info.Mode != "" && d.m.s.eventsLive
			})
			d.settle(20 * time.Millisecond)
			snap("namespaces")

			hp := openHosts(t, d, "app=nginx")
			d.m.setBanner(nil)
			snap("labels_hosts")
			d.keys("?")
			snap("help_hosts")
			d.keys("?")
			d.keys("space", "space", "j", "space")
			d.keys("/")
			d.typeText("10.0.0.1 nginx")
			d.keys("enter")
			_ = hp
			snap("hosts_filtered_selection")
			d.keys("esc")

			d.keys("esc")
			snap("labels")
			d.keys("enter")
			d.until("hosts", func() bool { p, ok := d.m.top().(*hostsPage); return ok && p.loaded })

			d.keys("a", "o")
			op := topAs[*opPage](t, d)
			d.until("processes", func() bool { return op.loaded })
			snap("op_picker")
			d.keys("G", "enter")
			d.until("dialog", func() bool { return d.m.dialog != nil })
			clk.Add(time.Second)
			d.typeText("1")
			snap("confirm_typed")
			d.m.s.cfg.ConfirmThreshold = 1000 // restart below the threshold: y/N
			d.keys("esc", "k", "k", "enter")
			d.until("dialog", func() bool { return d.m.dialog != nil })
			clk.Add(time.Second)
			snap("confirm_yn")
			d.keys("n")
			if d.m.dialog != nil {
				t.Fatal("n did not close the dialog")
			}

			d.keys("?")
			snap("help_op_picker")
			d.keys("esc")

			// The task watch, fed fixed results.
			task, rs := fixedTask()
			w := newWatchPage(d.m.s, task)
			w.SetSize(d.m.bodySize())
			d.m.stack = append(d.m.stack, w)
			d.send(watchInitMsg{id: w.id, view: backend.TaskView{Task: task, Results: rs}})
			clk.Add(1500 * time.Millisecond)
			snap("watch")
			d.keys("f")
			snap("watch_failed_only")
			d.keys("enter")
			snap("result")
			d.keys("esc", "f")

			ev := model.Event{Time: time.Date(2026, 11, 21, 10, 0, 3, 0, time.UTC), Host: model.Host{IP: "10.0.0.7"},
				ProcKey: "web:nginx", Kind: model.EventRestartSuccess, Message: "restarted after exit status 1 (restart 2)"}
			d.send(eventsMsg{events: []model.Event{ev}, closed: true})
			d.send(errMsg{"restart", fmt.Errorf("agent 0:10.0.0.5: %w", model.ErrUnreachable)})
			d.send(infoMsg{backend.Info{Mode: "embedded", Hosts: 40, Online: 39, Running: 1}, d.m.s.infoSeq})
			snap("watch_status_bar")

			d.keys("E")
			snap("events")
			d.keys("esc")

			tp := newTasksPage(d.m.s)
			tp.SetSize(d.m.bodySize())
			d.m.stack = append(d.m.stack, tp)
			done := task
			done.ID, done.Status, done.Counts = "GSETASK:20261121095500:41", model.TaskFailed, model.Counts{Success: 38, Failed: 2}
			done.Targets, done.Created = 40, task.Created.Add(-5*time.Minute)
			d.send(tasksLoadedMsg{id: tp.id, tasks: []model.Task{task, done}})
			snap("tasks")
		})
	}
}

func TestGoldenTooSmall(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	d := newDriver(t, e, Options{}, 60, 12)
	golden(t, "too_small_60x12", d.view())
	d.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	checkFrame(t, d.view(), 80, 24)
}

func TestGoldenForm(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	d := newDriver(t, e, Options{Namespace: "web"}, 100, 40)
	lp := topAs[*labelsPage](t, d)
	d.until("labels and info", func() bool { return lp.loaded && d.m.info.Mode != "" })
	d.keys("G", "e")
	f := topAs[*formPage](t, d)
	golden(t, "form_edit_100x40", d.view())
	v := *f.vals
	v.StopCmd = "./stop.sh --graceful"
	v.CPU = "40"
	v.Labels += ",team=ops"
	d.send(replaceMsg{newReviewPage(d.m.s, f.base, false, v)})
	golden(t, "form_review_100x40", d.view())
	v.SetupPath = "relative"
	v.InstanceNum = "5000"
	d.send(replaceMsg{newReviewPage(d.m.s, f.base, false, v)})
	golden(t, "form_review_errors_100x40", d.view())
}
