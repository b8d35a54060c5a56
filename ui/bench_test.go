package ui

import (
	"context"
	"fmt"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/model"
)

// benchShared is the page context without a backend (pages are fed
// messages directly, as the backend's commands would).
func benchShared(tb testing.TB, w, h int) *shared {
	return &shared{ctx: context.Background(), theme: monoTheme(tb), keys: DefaultKeyMap(), cfg: config.Default().Console,
		now: time.Now, guard: time.Millisecond, batchMax: 2000, batchWin: 0, static: true, width: w, height: h}
}

func fleet10k(n int) []backend.HostView {
	out := make([]backend.HostView, n)
	for i := range out {
		out[i] = backend.HostView{
			HostInfo: model.HostInfo{Host: model.Host{IP: fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256), CloudID: i % 3},
				Labels: map[string]string{"zone": fmt.Sprintf("z%d", i%7), "os": "linux"}, State: model.AgentOnline},
			Procs: []backend.ProcView{{Key: "web:nginx", Labels: map[string]string{"app": "nginx"},
				Status: model.ProcStatus{State: model.ProcRunning, PID: 1000 + i, Hosted: true}}},
		}
	}
	return out
}

// BenchmarkHostsView renders the hosts screen of 10,000 hosts (120x40),
// moving the cursor each time: only the visible rows are drawn.
func BenchmarkHostsView(b *testing.B) {
	s := benchShared(b, 120, 40)
	p := newHostsPage(s, backend.HostQuery{Namespace: "web"})
	p.SetSize(120, 36)
	p.Update(hostsLoadedMsg{id: p.id, hosts: fleet10k(10000)})
	if len(p.shown) != 10000 {
		b.Fatalf("%d rows", len(p.shown))
	}
	down := keyMsg("j")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p.Update(down)
		_ = p.View()
	}
}

// BenchmarkHostsFilter10k re-filters 10,000 hosts fuzzily (one keystroke).
func BenchmarkHostsFilter10k(b *testing.B) {
	s := benchShared(b, 120, 40)
	p := newHostsPage(s, backend.HostQuery{Namespace: "web"})
	p.SetSize(120, 36)
	p.Update(hostsLoadedMsg{id: p.id, hosts: fleet10k(10000)})
	p.filter.input.SetValue("z3 ngx")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p.applyFilter()
	}
	if len(p.shown) == 0 {
		b.Fatal("filter matched nothing")
	}
}

// watchResults is task's n targets, one host each, pending, and their
// final results (one in 97 failed), result i at final[at(i)].
func watchResults(task model.Task, n int, at func(int) int) (pending, final []model.Result) {
	t0 := task.Created
	pending = make([]model.Result, n)
	final = make([]model.Result, n)
	for i := range n {
		h := model.Host{IP: fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256)}
		pending[i] = model.Result{TaskID: task.ID, Host: h, ProcKey: "web:nginx", Op: task.Op, State: model.StatePending}
		f := pending[i]
		f.Seq, f.Started, f.Finished = int64(i+1), t0, t0.Add(time.Duration(i%900)*time.Millisecond)
		f.State = model.StateSuccess
		if i%97 == 0 {
			f.State, f.Code, f.Message = model.StateFailed, model.CodeCommandFailed, "Script exit code non-zero"
		}
		final[at(i)] = f
	}
	return pending, final
}

// BenchmarkTaskWatch10k feeds a task watch 10,000 results in batches of
// 2,000 (as the drain command delivers them) and renders after each batch;
// one op is the whole task.
func BenchmarkTaskWatch10k(b *testing.B) {
	s := benchShared(b, 120, 40)
	const n = 10000
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	task := model.Task{ID: "GSETASK:20261121100000:1", Op: model.OpRestart, Targets: n, Status: model.TaskRunning, Created: t0}
	pending, final := watchResults(task, n, func(i int) int { return i })
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w := newWatchPage(s, task)
		w.SetSize(120, 36)
		w.Update(watchInitMsg{id: w.id, view: backend.TaskView{Task: task, Results: pending}})
		_ = w.View()
		for i := 0; i < n; i += 2000 {
			w.Update(watchBatchMsg{id: w.id, results: final[i : i+2000]})
			_ = w.View()
		}
		if w.counts.Final() != n {
			b.Fatalf("%d final", w.counts.Final())
		}
		w.Close()
	}
}

// BenchmarkTaskWatch100kTrickle: a task of 100,000 targets, all pending,
// whose results come in 400 batches of 250 (a slow fleet's trickle); one
// op is every batch applied and the table ordered after each. Per batch
// the watch must cost the batch, not the table.
func BenchmarkTaskWatch100kTrickle(b *testing.B) {
	benchTrickle100k(b, "GSETASK:20261121100000:3", unsorted())
}

// benchTrickle100k is BenchmarkTaskWatch100kTrickle with the watch sorted
// by by (unsorted(): its default order) before the results come.
func benchTrickle100k(b *testing.B, id string, by sortState) {
	s := benchShared(b, 120, 40)
	const n, batch = 100000, 250
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	task := model.Task{ID: id, Op: model.OpRestart, Targets: n, Status: model.TaskRunning, Created: t0}
	pending, final := watchResults(task, n, func(i int) int { return (i * 7919) % n }) // out of host order, as a fleet answers
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w := newWatchPage(s, task)
		w.SetSize(120, 36)
		w.Update(watchInitMsg{id: w.id, view: backend.TaskView{Task: task, Results: pending}})
		if by.col >= 0 {
			w.setSort(func(s *sortState) { *s = by })
		}
		for i := 0; i < n; i += batch {
			w.Update(watchBatchMsg{id: w.id, results: final[i : i+batch]})
		}
		if w.counts.Final() != n {
			b.Fatalf("%d final", w.counts.Final())
		}
		w.Close()
	}
}

// BenchmarkRootView renders the whole screen (breadcrumb, hosts, ticker,
// status bar, help) over 10,000 hosts.
func BenchmarkRootView(b *testing.B) {
	e, _ := simBackend(b, quietSim(10))
	m, err := New(context.Background(), Options{Backend: e, Config: config.Default().Console, Theme: monoTheme(b), Static: true, Operator: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	p := newHostsPage(m.s, backend.HostQuery{Namespace: "web"})
	m.Update(pushMsg{p})
	m.Update(hostsLoadedMsg{id: p.id, hosts: fleet10k(10000)})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		m.Update(keyMsg("j"))
		_ = m.View()
	}
}

// BenchmarkWatchFilter100k: a finished task of 100,000 results filtered
// by host as typed (/host:10.1.2), one op the filter set and cleared: two
// passes over every row, the cost of a keystroke in the watch's filter.
func BenchmarkWatchFilter100k(b *testing.B) {
	s := benchShared(b, 120, 40)
	const n = 100000
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	task := model.Task{ID: "GSETASK:20261121100000:1", Op: model.OpRestart, Targets: n, Status: model.TaskRunning, Created: t0}
	pending, final := watchResults(task, n, func(i int) int { return i })
	w := newWatchPage(s, task)
	w.SetSize(120, 36)
	w.Update(watchInitMsg{id: w.id, view: backend.TaskView{Task: task, Results: pending}})
	w.Update(watchBatchMsg{id: w.id, results: final})
	_ = w.View()
	defer w.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w.filter.input.SetValue("host:10.1.2")
		w.refilter()
		if len(w.shown) == 0 || len(w.shown) == n {
			b.Fatalf("%d shown", len(w.shown))
		}
		w.filter.clear()
		w.refilter()
	}
}
