package ui

import (
	"context"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"gseproc/backend"
	"gseproc/model"
)

// s sorts the hosts by the next column, S reverses; the header and the
// first line say so; the filter and the selection keep working on the
// sorted rows; s past the last column goes back to host order.
func TestHostsSort(t *testing.T) {
	e, _ := simBackend(t, quietSim(200, "web", "gse"))
	d := newDriver(t, e, Options{Namespace: "web"}, 120, 40)
	lp := topAs[*labelsPage](t, d)
	d.until("labels", func() bool { return lp.loaded })
	d.keys("enter")
	hp := topAs[*hostsPage](t, d)
	d.until("hosts", func() bool { return hp.loaded })
	firstIP := hp.rows[hp.shown[0]].v.Host.IP

	for range 5 { // CLOUD, IP, AGENT, PROCESS, STATE
		d.keys("s")
	}
	v := d.view()
	if !strings.Contains(v, "STATE▲") || !strings.Contains(v, "sorted by state ▲") {
		t.Fatalf("the sort is not shown:\n%s", v)
	}
	ranks := func() []int {
		var out []int
		for _, i := range hp.shown {
			out = append(out, procRank(hp.rows[i].state))
		}
		return out
	}
	r := ranks()
	for i := 1; i < len(r); i++ {
		if r[i] < r[i-1] {
			t.Fatalf("not sorted by state (worst first) at %d: %v", i, r)
		}
	}
	if r[0] == r[len(r)-1] {
		t.Fatalf("every host has the same state %d: the test shows nothing", r[0])
	}
	d.keys("S")
	if !strings.Contains(d.view(), "STATE▼") {
		t.Fatalf("reverse not shown:\n%s", d.view())
	}
	r = ranks()
	for i := 1; i < len(r); i++ {
		if r[i] > r[i-1] {
			t.Fatalf("not reversed at %d: %v", i, r)
		}
	}
	// The filter keeps the sorted order; the selection follows hosts.
	d.keys("space")
	sel := hp.rows[hp.shown[0]].v.Host
	d.keys("/")
	d.typeText("state=running")
	d.keys("enter")
	for _, i := range hp.shown {
		if !hasProcIn(hp.rows[i], model.ProcRunning) {
			t.Fatalf("filter shows %s with no running process", hp.rows[i].v.Host)
		}
	}
	d.keys("esc")
	if !hp.sel[sel] || len(hp.sel) != 1 {
		t.Fatalf("selection %v, want %s", hp.sel, sel)
	}
	d.keys("s", "s", "s") // PID, HOSTED, LABELS, then back to host order
	if !strings.Contains(d.view(), "LABELS▲") {
		t.Fatalf("labels sort not shown:\n%s", d.view())
	}
	d.keys("s")
	if strings.Contains(d.view(), "sorted by") || hp.rows[hp.shown[0]].v.Host.IP != firstIP {
		t.Fatalf("not back to host order (first %s, want %s):\n%s", hp.rows[hp.shown[0]].v.Host.IP, firstIP, d.view())
	}
}

// `/` filters the namespaces, tasks and events lists by column or any
// cell; esc clears; s/S sort them.
func TestListsFilterAndSort(t *testing.T) {
	e, fleet := simBackend(t, quietSim(40, "web", "db", "gse"))
	ctx := context.Background()
	for _, op := range []model.OpType{model.OpStatus, model.OpRestart, model.OpStatus} {
		if _, err := e.Operate(ctx, backend.OperateRequest{Op: op, Selector: backend.Selector{Namespace: "db"}}); err != nil {
			t.Fatal(err)
		}
	}
	d := newDriver(t, e, Options{Guard: time.Nanosecond}, 120, 30)
	ns := d.m.stack[0].(*nsPage)
	d.until("namespaces", func() bool { return ns.loaded })
	d.keys("/")
	if !ns.Capturing() {
		t.Fatal("/ did not start the filter on namespaces")
	}
	d.typeText("namespace:w")
	d.keys("enter")
	if len(ns.tb.shown) != 1 || ns.items[ns.tb.shown[0]].Name != "web" {
		t.Fatalf("namespace:w shows %v", ns.tb.shown)
	}
	d.keys("enter") // opens web, the one shown
	if lp := topAs[*labelsPage](t, d); lp.ns.Name != "web" {
		t.Fatalf("opened %s", lp.ns.Name)
	}
	d.keys("esc", "esc") // back; then esc clears the filter (the first page has nothing to go back to)
	if len(ns.tb.shown) != 3 {
		t.Fatalf("esc did not clear the filter: %d shown", len(ns.tb.shown))
	}
	d.keys("S") // by namespace, descending
	if got := ns.items[ns.tb.shown[0]].Name; got != "web" || !strings.Contains(d.view(), "NAMESPACE▼") {
		t.Fatalf("first %s after S:\n%s", got, d.view())
	}

	d.keys("t")
	tp := topAs[*tasksPage](t, d)
	d.until("tasks", func() bool { return tp.loaded })
	if len(tp.tasks) != 3 {
		t.Fatalf("%d tasks", len(tp.tasks))
	}
	d.keys("/")
	d.typeText("op=restart")
	d.keys("enter")
	if len(tp.tb.shown) != 1 || tp.tasks[tp.tb.shown[0]].Op != model.OpRestart {
		t.Fatalf("op=restart shows %v", tp.tb.shown)
	}
	if !strings.Contains(d.view(), "1 shown") || !strings.Contains(d.view(), "filter op=restart") {
		t.Fatalf("filter not shown:\n%s", d.view())
	}
	d.keys("esc")
	if len(tp.tb.shown) != 3 {
		t.Fatalf("esc did not clear: %d", len(tp.tb.shown))
	}

	// Events: one crash gives a restart event; a filter on its host finds it.
	// The fleet's statuses reach the engine through its reports: under load
	// the first ones may not be in yet, so poll until one process crashes.
	// The event is seen through the live subscription, a command started
	// with the console: on a loaded machine it may come after all of the
	// above, so the crash waits for it (as TestFleetMapLiveAndDrill does).
	d.until("live events", func() bool { return d.m.s.eventsLive })
	var host model.Host
	var key string
	d.keys("E")
	ep := topAs[*eventsPage](t, d)
	crashed := false
	for deadline := time.Now().Add(30 * time.Second); !crashed; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no hosted running process to crash (the simulator hosts some from the start)")
		}
		hv, err := e.Hosts(ctx, backend.HostQuery{})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hv {
			for _, pv := range h.Procs {
				if !crashed {
					host, key = h.Host, pv.Key
					crashed = fleet.Crash(host, key, false)
				}
			}
		}
	}
	d.until("the crash's event", func() bool { return len(ep.tb.shown) > 0 })
	d.keys("/")
	d.typeText("host=" + host.AgentID())
	d.keys("enter")
	for _, i := range ep.tb.shown {
		if ep.event(i).Host != host {
			t.Fatalf("host filter shows %s", ep.event(i).Host.AgentID())
		}
	}
	if len(ep.tb.shown) == 0 {
		t.Fatalf("no event of %s shown:\n%s", host.AgentID(), d.view())
	}
	d.keys("/")
	d.typeText("x")
	d.keys("enter")
	if len(ep.tb.shown) != 0 || !strings.Contains(d.view(), "0 shown") {
		t.Fatalf("host=...x shows %d", len(ep.tb.shown))
	}
}

// h and ← → go out and in like esc and enter (l too: keys_test.go), but
// never while a text input has the focus.
func TestHLNavigation(t *testing.T) {
	e, _ := simBackend(t, quietSim(20))
	d := newDriver(t, e, Options{Guard: time.Nanosecond}, 100, 30)
	d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })
	d.send(tea.KeyMsg{Type: tea.KeyRight})
	lp := topAs[*labelsPage](t, d)
	d.until("labels", func() bool { return lp.loaded })
	d.send(tea.KeyMsg{Type: tea.KeyRight})
	hp := topAs[*hostsPage](t, d)
	d.until("hosts", func() bool { return hp.loaded })
	d.keys("/")
	d.typeText("hl")
	d.send(tea.KeyMsg{Type: tea.KeyLeft})
	if topAs[*hostsPage](t, d).filter.value() != "hl" {
		t.Fatalf("h/l/← in the filter: %q", hp.filter.value())
	}
	d.keys("esc")
	d.keys("h")
	topAs[*labelsPage](t, d)
	d.send(tea.KeyMsg{Type: tea.KeyLeft})
	topAs[*nsPage](t, d)
	// ? names them: a new user reads the keys there, not in the README.
	d.keys("?")
	if v := d.view(); !strings.Contains(v, "enter/→") || !strings.Contains(v, "esc/h/←") {
		t.Fatalf("the help does not name → and h/←:\n%s", v)
	}
	d.keys("?")

	// In a form, ← moves in the field and h types.
	d.keys("n")
	f := topAs[*formPage](t, d)
	d.settle(30 * time.Millisecond)
	d.typeText("h")
	d.send(tea.KeyMsg{Type: tea.KeyLeft})
	if d.m.dialog != nil || d.m.top() != page(f) {
		t.Fatalf("h or ← left the form: top %T, dialog %v", d.m.top(), d.m.dialog != nil)
	}
}

// The breadcrumb line says when a live list last loaded; R refreshes it.
func TestRefreshedIndicator(t *testing.T) {
	e, _ := simBackend(t, quietSim(20))
	clk := newClock()
	d := newDriver(t, e, Options{Now: clk.Now}, 100, 30)
	ns := d.m.stack[0].(*nsPage)
	d.until("namespaces", func() bool { return ns.loaded })
	top := func() string { return strings.Split(d.view(), "\n")[0] }
	if !strings.Contains(top(), "↻ refreshed at 10:00:00") {
		t.Fatalf("breadcrumb %q", top())
	}
	clk.Add(90 * time.Second)
	d.keys("R")
	d.until("the reload", func() bool { return strings.Contains(top(), "refreshed at 10:01:30") })

	// The age, when the clock runs (not in golden files).
	s := &shared{now: clk.Now}
	at := clk.Now()
	for _, c := range []struct {
		after time.Duration
		want  string
	}{{3 * time.Second, "just now"}, {25 * time.Second, "20s ago"}, {3 * time.Minute, "3m ago"}, {2 * time.Hour, "at 08:01"}} {
		if got := s.age(at.Add(-c.after)); got != c.want {
			t.Errorf("age of %s = %q, want %q", c.after, got, c.want)
		}
	}
}

// e on a host with several processes asks which one; the recent tasks say
// what each selected.
func TestEditAsksWhichProcessAndTaskSelection(t *testing.T) {
	e, _ := simBackend(t, quietSim(60, "web", "gse"))
	d := newDriver(t, e, Options{Namespace: "web", Guard: time.Nanosecond}, 120, 30)
	lp := topAs[*labelsPage](t, d)
	d.until("labels", func() bool { return lp.loaded })
	d.keys("enter") // every process of web
	hp := topAs[*hostsPage](t, d)
	d.until("hosts", func() bool { return hp.loaded })
	pos := -1
	for i, ri := range hp.shown {
		if len(hp.rows[ri].v.Procs) > 1 && pos < 0 {
			pos = i
		}
	}
	if pos < 0 {
		t.Fatal("no host with several processes in web")
	}
	hp.list.cursor = pos
	r, _ := hp.cursorRow()
	d.keys("e")
	p := d.m.palette
	if p == nil || len(p.matches) != len(r.v.Procs) {
		t.Fatalf("e did not ask which of %d processes:\n%s", len(r.v.Procs), d.view())
	}
	if !strings.Contains(d.view(), "which process of "+r.v.Host.AgentID()) {
		t.Fatalf("the question is not shown:\n%s", d.view())
	}
	want := r.v.Procs[1].Key
	d.keys("down", "enter")
	d.until("the form", func() bool { _, ok := d.m.top().(*formPage); return ok })
	f := topAs[*formPage](t, d)
	if got := f.base.Process.Meta.Namespace + ":" + f.base.Process.Meta.Name; got != want {
		t.Fatalf("editing %s, want %s", got, want)
	}
	d.keys("esc")
	topAs[*hostsPage](t, d)

	// Operate on two selected hosts; the tasks list names them.
	d.keys("g", "space", "space", "o")
	op := topAs[*opPage](t, d)
	d.until("processes", func() bool { return op.loaded })
	op.point(model.OpStatus)
	d.keys("enter")
	d.until("the watch", func() bool { _, ok := d.m.top().(*watchPage); return ok })
	d.keys("t")
	tp := topAs[*tasksPage](t, d)
	d.until("tasks", func() bool { return tp.loaded && len(tp.tasks) == 1 })
	h0, h1 := hp.rows[hp.shown[0]].v.Host.AgentID(), hp.rows[hp.shown[1]].v.Host.AgentID()
	if sel := tp.tasks[0].Selection; sel != "hosts "+h0+","+h1 {
		t.Fatalf("selection %q", sel)
	}
	if !strings.Contains(d.view(), "web · hosts "+h0) {
		t.Fatalf("the tasks list does not show the selection:\n%s", d.view())
	}
}

// A reload with fewer rows (a namespace or task gone) keeps the cursor on
// its row when it is still there, and never reads past the new rows.
func TestReloadFewerRows(t *testing.T) {
	e, _ := simBackend(t, quietSim(20, "web", "db", "gse"))
	d := newDriver(t, e, Options{}, 100, 30)
	ns := d.m.stack[0].(*nsPage)
	d.until("namespaces", func() bool { return ns.loaded })
	d.keys("G") // web, the last of db, gse, web
	d.send(nsLoadedMsg{id: ns.id, items: []backend.NamespaceSummary{{Name: "web"}}})
	if got, _ := ns.selected(); got.Name != "web" || len(ns.tb.shown) != 1 {
		t.Fatalf("after the reload: on %q, %d shown", got.Name, len(ns.tb.shown))
	}
	d.send(nsLoadedMsg{id: ns.id, items: []backend.NamespaceSummary{{Name: "a"}, {Name: "b"}}})
	if got, _ := ns.selected(); got.Name != "a" {
		t.Fatalf("web gone: on %q", got.Name)
	}
	_ = d.view()
}
