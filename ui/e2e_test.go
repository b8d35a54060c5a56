package ui

import (
	"bytes"
	"context"
	"sort"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/model"
)

// labelRow is the row of key=value on the labels page of ns (the page lists
// "all", then every label pair sorted by key and value).
func labelRow(t *testing.T, be backend.Backend, ns, kv string) int {
	t.Helper()
	defs, err := be.Processes(context.Background(), backend.ProcQuery{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range defs {
		for _, l := range model.SortedLabels(d.Process.Meta.Labels) {
			seen[l] = true
		}
	}
	var pairs [][2]string
	for l := range seen {
		k, v, _ := model.ParseLabel(l)
		pairs = append(pairs, [2]string{k, v})
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i][0] != pairs[j][0] {
			return pairs[i][0] < pairs[j][0]
		}
		return pairs[i][1] < pairs[j][1]
	})
	for i, p := range pairs {
		if p[0]+"="+p[1] == kv {
			return i + 1
		}
	}
	t.Fatalf("no label %s in %s", kv, ns)
	return -1
}

func waitText(t *testing.T, tm *teatest.TestModel, texts ...string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		for _, s := range texts {
			if !bytes.Contains(b, []byte(s)) {
				return false
			}
		}
		return true
	}, teatest.WithDuration(30*time.Second), teatest.WithCheckInterval(20*time.Millisecond))
}

func press(tm *teatest.TestModel, keys ...string) {
	for _, k := range keys {
		tm.Send(keyMsg(k))
	}
}

// TestEndToEnd runs the whole program (a real bubbletea Program through
// teatest, 100x30) on the real engine and simulator: browse web -> the
// app=nginx label -> hosts, select all, op restart, confirm, watch every
// host's result arrive; then the final table must equal the engine's task.
func TestEndToEnd(t *testing.T) {
	sc := quietSim(80)
	sc.FailureRate = 0.2 // some hosts fail: failures must be reported as the engine has them
	sc.LatencyMedian = config.Duration(20 * time.Millisecond)
	sc.LatencyP99 = config.Duration(150 * time.Millisecond)
	e, _ := simBackend(t, sc)
	// The dialog guard runs on a clock the test moves, so a loaded machine
	// that takes long between two keys cannot let a typed-ahead key through.
	clk := &clock{t: time.Now()}
	cfg := config.Default().Console
	cfg.ConfirmThreshold = 1000 // the y/N question (typed counts are tested through the model)
	m, err := New(context.Background(), Options{Backend: e, Config: cfg, Theme: monoTheme(t),
		Guard: 100 * time.Millisecond, Now: clk.Now, Operator: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(100, 30))
	t.Cleanup(func() { _ = tm.Quit() })

	waitText(t, tm, "1 namespace", "web")
	press(tm, "enter")
	waitText(t, tm, "Choose hosts by label", "app=nginx")
	row := labelRow(t, e, "web", "app=nginx")
	for range row {
		press(tm, "j")
	}
	press(tm, "enter")
	waitText(t, tm, "web › app=nginx", "hosts ·")
	press(tm, "a")
	waitText(t, tm, "selected")
	press(tm, "o")
	waitText(t, tm, "Target:", "restart_cmd (or stop then start)") // loaded: the picker takes keys
	// Keys typed ahead with enter must not answer the dialog: y arrives
	// within the guard and is dropped, so the dialog stays up.
	press(tm, "enter", "y")
	waitText(t, tm, "Proceed?")
	tm.Send(tea.WindowSizeMsg{Width: 100, Height: 30}) // a frame: the dialog is still there
	waitText(t, tm, "Proceed?")
	clk.Add(time.Second) // past the guard
	press(tm, "y")
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		return bytes.Contains(b, []byte("restart ✓ done ·")) || bytes.Contains(b, []byte("restart ✗ failed ·"))
	}, teatest.WithDuration(30*time.Second), teatest.WithCheckInterval(20*time.Millisecond))
	press(tm, "q")
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*Model)

	var w *watchPage
	for _, p := range fm.stack {
		if wp, ok := p.(*watchPage); ok {
			w = wp
		}
	}
	if w == nil {
		t.Fatal("no task watch page at the end")
	}
	view, err := e.Task(context.Background(), w.task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if view.Task.Op != model.OpRestart || view.Task.Status != w.task.Status || !taskFinal(w.task.Status) {
		t.Fatalf("engine task %+v, console task %+v", view.Task, w.task)
	}
	if len(view.Results) == 0 || len(view.Results) != w.res.len() || view.Task.Counts != w.counts {
		t.Fatalf("console has %d rows %+v, engine %d %+v", w.res.len(), w.counts, len(view.Results), view.Task.Counts)
	}
	for _, r := range view.Results {
		i, ok := w.res.find(model.Host{IP: r.Host.IP, CloudID: r.Host.CloudID}, r.ProcKey)
		if !ok {
			t.Fatalf("no row for %s %s", r.Host, r.ProcKey)
		}
		got := w.res.result(i)
		if got.State != r.State || got.Code != r.Code || got.Message != r.Message || got.Seq != r.Seq {
			t.Fatalf("%s %s: console %s/%d %q, engine %s/%d %q", r.Host, r.ProcKey, got.State, got.Code, got.Message,
				r.State, r.Code, r.Message)
		}
		if r.ProcKey != "web:nginx" && r.ProcKey != "web:nginx-staging" {
			t.Fatalf("restart reached %s, outside app=nginx", r.ProcKey)
		}
	}
	// Every nginx host of the label was targeted.
	hosts, _ := e.Hosts(context.Background(), backend.HostQuery{Namespace: "web", Labels: map[string]string{"app": "nginx"}})
	if len(hosts) == 0 || view.Task.Targets < len(hosts) {
		t.Fatalf("%d targets for %d hosts", view.Task.Targets, len(hosts))
	}
	// Only one task: the typed-ahead y did not start a second one.
	ts, _ := e.Tasks(context.Background(), 10)
	if len(ts) != 1 {
		t.Fatalf("%d tasks, want 1", len(ts))
	}
}
