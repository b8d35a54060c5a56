package ui

import (
	"context"
	"runtime"
	"sort"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/model"
)

// The console's speed targets at 100,000 hosts (issue 15), on the real
// engine over a simulated fleet of 100,000 hosts: the first screen, opening
// the biggest host list, one filter keystroke, and memory after select-all
// and an op. `make bench` runs them; figures are per operation.

const fleet100k = 100000

// bench100k is one engine over 100,000 simulated hosts, shared by the
// benchmarks of a run (building it takes seconds).
func bench100k(b *testing.B) *engine.Engine {
	b.Helper()
	sc := quietSim(fleet100k, "web", "gse", "db")
	ec := config.Default().Engine
	// The biggest namespace carries ~228,000 (host, process) pairs over
	// its ~100,000 hosts: an op on all of it must not be refused.
	ec.MaxTargets = 4 * fleet100k
	e, _ := simBackendEngine(b, sc, ec)
	return e
}

// biggestQuery is the label selection with the most hosts.
func biggestQuery(b *testing.B, e *engine.Engine) (backend.HostQuery, int) {
	b.Helper()
	ctx := context.Background()
	nss, err := e.Namespaces(ctx)
	if err != nil {
		b.Fatal(err)
	}
	best, n := backend.HostQuery{}, 0
	for _, ns := range nss {
		q := backend.HostQuery{Namespace: ns.Name}
		hv, err := e.Hosts(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		if len(hv) > n {
			best, n = q, len(hv)
		}
	}
	return best, n
}

// runUntil runs cmd as bubbletea would (each command in its own
// goroutine, messages applied one at a time) until done holds; commands
// still blocked then (event subscriptions) end with the model's context.
// An error message fails the benchmark at once: the path it measures
// broke, and waiting for its end would wait out the deadline (an op
// refused for its target count once made BenchmarkSelectAllOp100k wait
// 10 minutes for a watch that was never opened).
func runUntil(b *testing.B, m *Model, cmd tea.Cmd, done func() bool) {
	b.Helper()
	msgs := make(chan tea.Msg, 1024)
	stop := make(chan struct{})
	defer close(stop)
	var exec func(tea.Cmd)
	exec = func(c tea.Cmd) {
		if c == nil {
			return
		}
		go func() {
			msg := c()
			if bm, ok := msg.(tea.BatchMsg); ok {
				for _, c := range bm {
					exec(c)
				}
				return
			}
			if msg == nil {
				return
			}
			select {
			case msgs <- msg:
			case <-stop:
			}
		}()
	}
	exec(cmd)
	deadline := time.After(10 * time.Minute)
	for !done() {
		select {
		case msg := <-msgs:
			if em, ok := msg.(errMsg); ok {
				b.Fatalf("%s: %v", em.what, em.err)
			}
			_, next := m.Update(msg)
			exec(next)
		case <-deadline:
			b.Fatal("never loaded")
		}
	}
}

// BenchmarkFirstScreen100k: from New to the namespaces screen drawn with
// the status bar's counts, over 100,000 hosts (target < 0.5 s).
func BenchmarkFirstScreen100k(b *testing.B) {
	e := bench100k(b)
	b.ResetTimer()
	for b.Loop() {
		m, err := New(context.Background(), Options{Backend: e, Config: config.Default().Console, Theme: monoTheme(b), Static: true, Operator: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
		ns := m.stack[0].(*nsPage)
		runUntil(b, m, m.Init(), func() bool { return ns.loaded && m.info.Hosts > 0 })
		_ = m.View()
		m.Close()
	}
}

// BenchmarkOpenHosts100k: opening the biggest host list (the namespace
// holding most of the 100,000 hosts): its first rows drawn (the first
// page's backend call, rows and frame: ms-first; target < 0.5 s), then the
// whole list (the backend call, the rows, the frame: ms-backend and
// ms-console). Each op is both, one after the other.
func BenchmarkOpenHosts100k(b *testing.B) {
	e := bench100k(b)
	q, n := biggestQuery(b, e)
	s := benchShared(b, 120, 40)
	s.be = e
	var first, be, ui time.Duration
	b.ResetTimer()
	for b.Loop() {
		p := newHostsPage(s, q)
		p.SetSize(120, 36)
		t0 := time.Now()
		p.Update(p.loadFirst()())
		if !p.first || len(p.rows) == 0 {
			b.Fatalf("no first rows (%d)", len(p.rows))
		}
		_ = p.View()
		t1 := time.Now()
		msg := p.load()()
		t2 := time.Now()
		p.Update(msg)
		if len(p.rows) != n {
			b.Fatalf("%d rows, want %d", len(p.rows), n)
		}
		_ = p.View()
		first += t1.Sub(t0)
		be += t2.Sub(t1)
		ui += time.Since(t2)
	}
	b.ReportMetric(float64(n), "hosts")
	b.ReportMetric(float64(first.Milliseconds())/float64(b.N), "ms-first")
	b.ReportMetric(float64(be.Milliseconds())/float64(b.N), "ms-backend")
	b.ReportMetric(float64(ui.Milliseconds())/float64(b.N), "ms-console")
}

// BenchmarkFilterKeystroke100k: one keystroke in the filter of the
// biggest host list, typing "state=stopped" then a process name; each op is
// one keystroke (target < 30 ms).
func BenchmarkFilterKeystroke100k(b *testing.B) {
	e := bench100k(b)
	q, _ := biggestQuery(b, e)
	s := benchShared(b, 120, 40)
	s.be = e
	p := newHostsPage(s, q)
	p.SetSize(120, 36)
	p.Update(p.load()())
	p.Update(keyMsg("/"))
	text := []rune("state=stopped nginx")
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if i == len(text) {
			p.filter.clear()
			i = 0
		}
		p.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{text[i]}})
		_ = p.View()
		i++
	}
}

// BenchmarkIdle100k: what an idle console does at 100,000 hosts: the
// status bar's Info every InfoEvery (5 s by default) and the frame it
// draws; idle-%cpu is that work's share of one core.
func BenchmarkIdle100k(b *testing.B) {
	e := bench100k(b)
	m, err := New(context.Background(), Options{Backend: e, Config: config.Default().Console, Theme: monoTheme(b), Static: true, Operator: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		m.Update(m.s.refreshInfo()())
		_ = m.View()
	}
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(100*float64(per)/float64(5*time.Second), "idle-%cpu")
}

// BenchmarkSelectAllOp100k: the whole path at 100,000 hosts: open the host
// list, select all, run status on them and watch every result arrive; it
// reports the heap in use afterwards (the console's share of the process,
// with the engine and the simulated fleet) as MB-heap (target: RSS < 300 MB).
func BenchmarkSelectAllOp100k(b *testing.B) {
	e := bench100k(b)
	q, n := biggestQuery(b, e)
	var heap uint64
	b.ResetTimer()
	for b.Loop() {
		m, err := New(context.Background(), Options{Backend: e, Config: config.Default().Console, Theme: monoTheme(b), Static: true, Operator: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
		hp := newHostsPage(m.s, q)
		runUntil(b, m, func() tea.Msg { return pushMsg{hp} }, func() bool { return hp.loaded })
		m.Update(keyMsg("a"))
		if len(hp.sel) != n {
			b.Fatalf("%d selected of %d", len(hp.sel), n)
		}
		tg := target{sel: backend.Selector{Namespace: q.Namespace, Hosts: hp.targetHosts()}, hosts: n}
		var w *watchPage
		runUntil(b, m, m.s.operate(0, backend.OperateRequest{Op: model.OpStatus, Selector: tg.sel}), func() bool {
			w, _ = m.top().(*watchPage)
			return w != nil && w.loaded && !w.streaming && taskFinal(w.task.Status)
		})
		_ = m.View()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = ms.HeapInuse
		m.Close()
	}
	b.ReportMetric(float64(heap)/(1<<20), "MB-heap")
}

var _ = sort.Ints
