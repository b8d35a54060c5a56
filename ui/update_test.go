package ui

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/server/wire"
	"gseproc/model"
)

func topAs[T page](t *testing.T, d *driver) T {
	t.Helper()
	p, ok := d.m.top().(T)
	if !ok {
		t.Fatalf("top page is %T (%s), want %T", d.m.top(), d.m.top().Title(), *new(T))
	}
	return p
}

// statusWatch selects every host of the open host list, runs the status
// op on them and returns its watch once it is on top.
func statusWatch(t *testing.T, d *driver) *watchPage {
	t.Helper()
	d.keys("a", "o")
	p := topAs[*opPage](t, d)
	d.until("processes", func() bool { return p.loaded })
	for p.ops[p.list.cursor] != model.OpStatus {
		d.keys("k")
	}
	d.keys("enter")
	d.until("watch", func() bool { _, ok := d.m.top().(*watchPage); return ok })
	return topAs[*watchPage](t, d)
}

// openHosts browses web -> the label row key=value -> hosts.
func openHosts(t *testing.T, d *driver, label string) *hostsPage {
	t.Helper()
	d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })
	ns := d.m.stack[0].(*nsPage)
	i := slices.IndexFunc(ns.items, func(s backend.NamespaceSummary) bool { return s.Name == "web" })
	if i < 0 {
		t.Fatalf("no web namespace in %v", ns.items)
	}
	for range i {
		d.keys("j")
	}
	d.keys("enter")
	lp := topAs[*labelsPage](t, d)
	d.until("labels", func() bool { return lp.loaded })
	idx := -1
	for j, it := range lp.items {
		if it.kind == lblLabel && it.key+"="+it.val == label {
			idx = j
		}
	}
	if idx < 0 {
		t.Fatalf("no label row %s", label)
	}
	for range idx {
		d.keys("down")
	}
	d.keys("enter")
	hp := topAs[*hostsPage](t, d)
	d.until("hosts", func() bool { return hp.loaded })
	if len(hp.rows) == 0 {
		t.Fatal("no hosts")
	}
	return hp
}

func TestNamespacesKeys(t *testing.T) {
	e, _ := simBackend(t, quietSim(40, "web", "db"))
	d := newDriver(t, e, Options{}, 100, 30)
	d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })
	ns := d.m.stack[0].(*nsPage)
	if len(ns.items) != 2 || ns.items[0].Name != "db" || ns.items[1].Name != "web" {
		t.Fatalf("namespaces %+v", ns.items)
	}
	d.keys("j")
	if ns.list.cursor != 1 {
		t.Fatalf("cursor %d after j", ns.list.cursor)
	}
	d.keys("j") // stays on the last row
	if ns.list.cursor != 1 {
		t.Fatalf("cursor %d past the end", ns.list.cursor)
	}
	d.keys("g")
	if ns.list.cursor != 0 {
		t.Fatal("g did not go to the top")
	}
	d.keys("G", "enter")
	lp := topAs[*labelsPage](t, d)
	if lp.ns.Name != "web" {
		t.Fatalf("opened %s", lp.ns.Name)
	}
	if !strings.Contains(d.view(), "namespaces › web") {
		t.Fatalf("breadcrumb missing:\n%s", d.view())
	}
	d.keys("esc")
	topAs[*nsPage](t, d)
	d.keys("esc") // nothing below the first page
	topAs[*nsPage](t, d)
	d.keys("n")
	f := topAs[*formPage](t, d)
	if f.vals.Namespace != "web" {
		t.Fatalf("new process form namespace %q", f.vals.Namespace)
	}
	d.keys("esc")
	topAs[*nsPage](t, d)
}

func TestLabelsKeys(t *testing.T) {
	e, _ := simBackend(t, quietSim(40))
	d := newDriver(t, e, Options{Namespace: "web"}, 100, 30)
	lp := topAs[*labelsPage](t, d)
	d.until("labels", func() bool { return lp.loaded })
	if lp.items[0].kind != lblAll {
		t.Fatal("first row is not 'all'")
	}
	// e on a label row says how to edit instead of opening anything.
	d.keys("j", "e")
	topAs[*labelsPage](t, d)
	if !strings.Contains(d.m.flash, "process row") {
		t.Fatalf("flash %q", d.m.flash)
	}
	// o on a label operates on the whole label.
	it := lp.items[1]
	d.keys("o")
	op := topAs[*opPage](t, d)
	if op.tg.sel.Labels[it.key] != it.val || op.tg.sel.Namespace != "web" || len(op.tg.sel.Hosts) != 0 {
		t.Fatalf("op target %+v", op.tg.sel)
	}
	d.keys("esc")
	// e on a process row opens its definition.
	d.keys("G", "e")
	f := topAs[*formPage](t, d)
	last := lp.items[len(lp.items)-1]
	if f.isNew || f.base.Process.Key() != last.def.Process.Key() {
		t.Fatalf("editing %s, want %s", f.base.Process.Key(), last.def.Process.Key())
	}
	d.keys("esc", "enter")
	hp := topAs[*hostsPage](t, d)
	if hp.q.Name != last.key {
		t.Fatalf("hosts query %+v", hp.q)
	}
}

func TestHostsFilterSelect(t *testing.T) {
	e, _ := simBackend(t, quietSim(60))
	d := newDriver(t, e, Options{}, 100, 30)
	hp := openHosts(t, d, "app=nginx")
	n := len(hp.rows)
	if !strings.Contains(d.view(), "web › app=nginx") {
		t.Fatalf("breadcrumb:\n%s", d.view())
	}
	// Select two rows with space (the cursor moves down after each).
	d.keys("space", "space")
	if len(hp.sel) != 2 || hp.list.cursor != 2 {
		t.Fatalf("selected %d, cursor %d", len(hp.sel), hp.list.cursor)
	}
	first := hp.rows[0]
	// Filter fuzzily on the last octet of another host: the selection stays.
	other := hp.rows[n-1]
	d.keys("/")
	if !hp.Capturing() {
		t.Fatal("/ did not focus the filter")
	}
	d.typeText(other.v.Host.IP)
	d.keys("enter")
	if hp.Capturing() {
		t.Fatal("enter did not leave the filter")
	}
	if len(hp.shown) == 0 || len(hp.shown) == n {
		t.Fatalf("filter %q shows %d of %d", other.v.Host.IP, len(hp.shown), n)
	}
	if !slices.ContainsFunc(hp.shown, func(i int) bool { return hp.rows[i].v.Host == other.v.Host }) {
		t.Fatalf("%s is not among the %d rows shown for its own IP", other.v.Host, len(hp.shown))
	}
	if len(hp.sel) != 2 || !hp.sel[first.v.Host] {
		t.Fatal("selection lost by filtering")
	}
	if !strings.Contains(d.view(), "hidden by filter") {
		t.Fatalf("hidden selection not mentioned:\n%s", d.view())
	}
	// a selects every shown row; a again unselects them, and only them.
	hidden := map[model.Host]bool{}
	for id := range hp.sel {
		if !slices.ContainsFunc(hp.shown, func(i int) bool { return hp.rows[i].v.Host == id }) {
			hidden[id] = true
		}
	}
	d.keys("a")
	for _, i := range hp.shown {
		if !hp.sel[hp.rows[i].v.Host] {
			t.Fatalf("a left %s unselected", hp.rows[i].v.Host)
		}
	}
	d.keys("a")
	if len(hp.sel) != len(hidden) {
		t.Fatalf("second a: %d selected, want the %d hidden ones", len(hp.sel), len(hidden))
	}
	for id := range hidden {
		if !hp.sel[id] {
			t.Fatalf("hidden selection %s lost", id)
		}
	}
	d.keys("space", "k") // select one again for the op below
	// esc clears the filter before it goes back.
	d.keys("esc")
	topAs[*hostsPage](t, d)
	if len(hp.shown) != n || hp.filter.value() != "" {
		t.Fatal("esc did not clear the filter")
	}
	// A key=value filter on a host label narrows to hosts carrying it.
	var lk, lv string
	for k, v := range first.v.labels.toMap() {
		lk, lv = k, v
		break
	}
	d.keys("/")
	d.typeText(lk + "=" + lv)
	d.keys("enter")
	for _, i := range hp.shown {
		if hp.rows[i].v.labels.toMap()[lk] != lv {
			t.Fatalf("host %s lacks %s=%s", hp.rows[i].v.Host, lk, lv)
		}
	}
	if hp.procLabels()[lk] != "" {
		t.Fatal("a host label became a process selector")
	}
	// o acts on the selection (all of it, shown or not).
	d.keys("o")
	op := topAs[*opPage](t, d)
	if op.tg.hosts != len(hp.sel) || len(op.tg.sel.Hosts) != len(hp.sel) || op.tg.sel.Labels["app"] != "nginx" {
		t.Fatalf("op target %+v (%d hosts)", op.tg.sel, op.tg.hosts)
	}
	d.keys("esc", "A")
	if len(hp.sel) != 0 {
		t.Fatal("A did not clear the selection")
	}
	// With nothing selected, o acts on the host under the cursor.
	d.keys("esc", "o")
	op = topAs[*opPage](t, d)
	if len(op.tg.sel.Hosts) != 1 || op.tg.sel.Hosts[0] != hp.rows[hp.shown[hp.list.cursor]].v.Host {
		t.Fatalf("cursor target %+v", op.tg.sel.Hosts)
	}
}

func TestHostsTypedProcessLabelNarrowsTheOp(t *testing.T) {
	e, _ := simBackend(t, quietSim(40))
	d := newDriver(t, e, Options{Namespace: "web"}, 100, 30)
	lp := topAs[*labelsPage](t, d)
	d.until("labels", func() bool { return lp.loaded })
	d.keys("enter") // every process in web
	hp := topAs[*hostsPage](t, d)
	d.until("hosts", func() bool { return hp.loaded })
	d.keys("/")
	d.typeText("app=nginx")
	d.keys("enter", "a", "o")
	op := topAs[*opPage](t, d)
	if op.tg.sel.Labels["app"] != "nginx" {
		t.Fatalf("typed process label not in the selector: %+v", op.tg.sel)
	}
}

func TestOpPickerReadOnly(t *testing.T) {
	e, _ := simBackend(t, quietSim(20))
	op := model.OpRestart
	d := newDriver(t, e, Options{Namespace: "web", Labels: map[string]string{"app": "nginx"}, Op: &op, ReadOnly: true}, 100, 30)
	p := topAs[*opPage](t, d)
	d.until("processes", func() bool { return p.loaded })
	for _, o := range model.AllOps() {
		_, off := p.disabled[o]
		if o.Mutating() != off {
			t.Fatalf("%s disabled=%v in read-only mode", o, off)
		}
	}
	if !strings.Contains(d.view(), "disabled: read-only mode") {
		t.Fatalf("no reason shown:\n%s", d.view())
	}
	if p.ops[p.list.cursor] != model.OpStatus {
		t.Fatalf("read-only picker starts on %s, not status", p.ops[p.list.cursor])
	}
	for p.ops[p.list.cursor] != model.OpRestart {
		d.keys("j")
	}
	d.keys("enter") // restart: disabled
	if d.m.dialog != nil || !strings.Contains(d.m.flash, "read-only") {
		t.Fatalf("disabled op: dialog %v flash %q", d.m.dialog, d.m.flash)
	}
	// status runs at once, without a dialog, and opens the watch.
	for p.ops[p.list.cursor] != model.OpStatus {
		d.keys("k")
	}
	d.keys("enter")
	if d.m.dialog != nil {
		t.Fatal("status asked for confirmation")
	}
	w := func() bool { _, ok := d.m.top().(*watchPage); return ok }
	d.until("watch", w)
	// the form is off too
	d.keys("esc", "e")
	if _, ok := d.m.top().(*formPage); ok {
		t.Fatal("form opened in read-only mode")
	}
}

func TestConfirmGuardDefaultNoAndTyping(t *testing.T) {
	e, _ := simBackend(t, quietSim(60))
	clk := newClock()
	cfg := config.Default().Console
	cfg.ConfirmThreshold = 1000 // below it: y/N
	cfg.ProtectedNamespaces = []string{"web"}
	d := newDriver(t, e, Options{Now: clk.Now, Guard: time.Second, Config: cfg}, 100, 30)
	hp := openHosts(t, d, "app=nginx")
	_ = hp
	d.keys("a", "o")
	p := topAs[*opPage](t, d)
	d.until("processes", func() bool { return p.loaded })
	// restart: a y/N question.
	d.keys("enter")
	d.until("dialog", func() bool { return d.m.dialog != nil })
	dl := d.m.dialog
	// Keys typed before the dialog appeared (within the guard) do nothing.
	d.keys("y", "enter")
	if d.m.dialog == nil || dl.ignored != 2 {
		t.Fatalf("guard: dialog %v, ignored %d", d.m.dialog, dl.ignored)
	}
	clk.Add(2 * time.Second)
	// The default answer is No.
	d.keys("enter")
	if d.m.dialog != nil {
		t.Fatal("enter did not close the dialog")
	}
	topAs[*opPage](t, d)
	// kill in a protected namespace: type the namespace.
	for p.ops[p.list.cursor] != model.OpKill {
		d.keys("j")
	}
	d.keys("enter")
	d.until("dialog", func() bool { return d.m.dialog != nil })
	if d.m.dialog.require != "web" {
		t.Fatalf("require %q, want the namespace", d.m.dialog.require)
	}
	clk.Add(2 * time.Second)
	d.keys("y")
	d.typeText("es")
	d.keys("enter")
	if d.m.dialog == nil || d.m.dialog.errText == "" {
		t.Fatal("wrong text accepted")
	}
	d.keys("esc")
	if d.m.dialog != nil {
		t.Fatal("esc did not cancel")
	}
	topAs[*opPage](t, d)

	// Not protected, over the threshold: type the host count.
	d.m.s.cfg.ProtectedNamespaces = nil
	d.m.s.cfg.ConfirmThreshold = 3
	d.keys("enter")
	d.until("dialog", func() bool { return d.m.dialog != nil })
	want := d.m.dialog.require
	if want != strconv.Itoa(p.tg.hosts) {
		t.Fatalf("require %q, want %d", want, p.tg.hosts)
	}
	clk.Add(2 * time.Second)
	d.typeText(want)
	d.keys("enter")
	w := func() bool { _, ok := d.m.top().(*watchPage); return ok }
	d.until("watch", w)
}

func TestWatchFailuresRetryResult(t *testing.T) {
	sc := quietSim(60)
	sc.FailureRate = 0.4
	e, _ := simBackend(t, sc)
	cfg := config.Default().Console
	cfg.ConfirmThreshold = 1000 // y/N
	d := newDriver(t, e, Options{Guard: time.Nanosecond, Config: cfg}, 100, 30)
	openHosts(t, d, "app=nginx")
	d.keys("a", "o")
	p := topAs[*opPage](t, d)
	d.until("processes", func() bool { return p.loaded })
	d.keys("enter") // restart
	d.until("dialog", func() bool { return d.m.dialog != nil })
	d.keys("y")
	d.until("watch", func() bool { _, ok := d.m.top().(*watchPage); return ok })
	w := topAs[*watchPage](t, d)
	d.until("task done", func() bool { return taskFinal(w.task.Status) })
	view, err := e.Task(context.Background(), w.task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if w.res.len() != len(view.Results) || w.counts != view.Task.Counts {
		t.Fatalf("console counts %+v, engine %+v", w.counts, view.Task.Counts)
	}
	bad := w.counts.Bad()
	if bad == 0 {
		t.Fatalf("no failure drawn at failure rate 0.4 over %d results: the retry path is not exercised", w.res.len())
	}
	// Failures first.
	for i := range bad {
		if stateRank(w.res.state(w.shown[i])) != 0 {
			t.Fatalf("row %d is %s, failures must come first", i, w.res.state(w.shown[i]))
		}
	}
	// f shows only failures, and again all.
	d.keys("f")
	if len(w.shown) != bad {
		t.Fatalf("failed only: %d rows, want %d", len(w.shown), bad)
	}
	// enter opens the host's full result.
	d.keys("enter")
	rp := topAs[*resultPage](t, d)
	if rp.r.State.OK() || !strings.Contains(d.view(), rp.r.Host.AgentID()) {
		t.Fatalf("result page of %s:\n%s", rp.r.Host, d.view())
	}
	d.keys("esc", "f")
	if len(w.shown) != w.res.len() {
		t.Fatal("f did not show all again")
	}
	// r retries the failed hosts, after the same confirmation: one task
	// over exactly the failed (host, process) pairs, in one watch.
	depth := len(d.m.stack)
	d.keys("r")
	d.until("dialog", func() bool { return d.m.dialog != nil })
	d.keys("y")
	d.until("retry watch", func() bool { w2, ok := d.m.top().(*watchPage); return ok && w2 != w && w2.loaded })
	w2 := topAs[*watchPage](t, d)
	d.until("retry done", func() bool { return taskFinal(w2.task.Status) })
	if w2.task.Targets != bad || w2.task.Op != model.OpRestart || len(d.m.stack) != depth+1 {
		t.Fatalf("retry task %+v over %d targets (want %d), stack %d (want %d)", w2.task, w2.task.Targets, bad, len(d.m.stack), depth+1)
	}
	retries := []model.Task{w2.task}
	// t lists both tasks; enter reopens the newest.
	d.keys("t")
	tp := topAs[*tasksPage](t, d)
	d.until("tasks", func() bool { return tp.loaded })
	if len(tp.tasks) != 1+len(retries) || tp.tasks[len(tp.tasks)-1].ID != w.task.ID {
		t.Fatalf("recent tasks %+v", tp.tasks)
	}
	d.keys("G", "enter")
	w3 := topAs[*watchPage](t, d)
	d.until("reopened", func() bool { return w3.loaded })
	if w3.task.ID != w.task.ID || w3.res.len() != w.res.len() {
		t.Fatalf("reopened %s with %d rows", w3.task.ID, w3.res.len())
	}
}

func TestWatchCancelClosesSubscription(t *testing.T) {
	sc := quietSim(40)
	// Slow agents and one op at a time: the task lasts far longer than the
	// keys to cancel it take even on a loaded machine (cancel ends the
	// ops in flight, so the test does not wait them out).
	sc.LatencyMedian = config.Duration(2 * time.Second)
	sc.LatencyP99 = config.Duration(4 * time.Second)
	ec := config.Default().Engine
	ec.Concurrency = 1 // most hosts wait their turn, so cancel has something to cancel
	e, _ := simBackendEngine(t, sc, ec)
	d := newDriver(t, e, Options{Guard: time.Nanosecond}, 100, 30)
	openHosts(t, d, "app=nginx")
	w := statusWatch(t, d)
	d.until("streaming", func() bool { return w.streaming })
	d.keys("x")
	d.until("dialog", func() bool { return d.m.dialog != nil })
	d.keys("y")
	d.until("cancelled", func() bool { return w.task.Status == model.TaskCanceled })
	// The task's status comes with the cancel's answer, the hosts'
	// cancelled results after it through the watch: wait for one.
	d.until("a cancelled host", func() bool { return w.counts.Cancelled > 0 })
	// Closing the page cancels its context (and so its Watch).
	d.keys("esc")
	if w.ctx.Err() == nil {
		t.Fatal("watch context still live after the page closed")
	}
}

func TestEventsTickerAndPage(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	d := newDriver(t, e, Options{}, 100, 30)
	ev := model.Event{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Host: model.Host{IP: "10.0.0.9"},
		ProcKey: "web:nginx", Kind: model.EventRestartSuccess, Message: "restarted after exit 1"}
	d.send(eventsMsg{events: []model.Event{ev}, closed: true})
	v := d.view()
	if !strings.Contains(v, "↻ restarted 03:04:05 0:10.0.0.9 web:nginx: restarted after exit 1") {
		t.Fatalf("ticker:\n%s", v)
	}
	d.keys("E")
	topAs[*eventsPage](t, d)
	if !strings.Contains(d.view(), "restarted after exit 1") {
		t.Fatalf("events page:\n%s", d.view())
	}
	// The same event twice (replay after subscribe) is kept once.
	d.send(recentEventsMsg{[]model.Event{ev}})
	if len(d.m.s.events) != 1 {
		t.Fatalf("%d events", len(d.m.s.events))
	}
}

func TestHelpFromBindingsAndOverrides(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	cfg := config.Default().Console
	cfg.Keys = map[string][]string{"op": {"O"}, "quit": {"Q", "ctrl+c"}}
	d := newDriver(t, e, Options{Config: cfg}, 100, 30)
	hp := openHosts(t, d, "app=nginx")
	_ = hp
	if !strings.Contains(d.view(), "O operate") || !strings.Contains(d.view(), "Q quit") {
		t.Fatalf("short help does not follow overrides:\n%s", d.view())
	}
	d.keys("?")
	v := d.view()
	for _, want := range []string{"Keys of app=nginx", "space", "select all shown", "O", "recent tasks", "filter"} {
		if !strings.Contains(v, want) {
			t.Fatalf("full help lacks %q:\n%s", want, v)
		}
	}
	d.keys("esc", "o") // o is no longer bound
	topAs[*hostsPage](t, d)
	d.keys("O")
	topAs[*opPage](t, d)
	d.keys("q") // q no longer quits
	if d.quit {
		t.Fatal("q quit although overridden")
	}
	d.keys("Q")
	d.until("quit", func() bool { return d.quit })
	// An unknown action is ignored (config.Load warns); a key given to two
	// actions is a warning.
	_, warns, err := NewKeyMap(map[string][]string{"explode": {"x"}, "tasks": {"E"}})
	if err != nil || len(warns) != 1 || !strings.Contains(warns[0], `"E" is bound to both events and tasks`) {
		t.Fatalf("warnings %q, err %v", warns, err)
	}
	if _, warns, _ := NewKeyMap(nil); len(warns) != 0 {
		t.Fatalf("the default keys collide: %q", warns)
	}
}

func TestTooSmallAndResize(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	d := newDriver(t, e, Options{}, 50, 10)
	if !strings.Contains(d.view(), "Terminal too small: 50x10") {
		t.Fatalf("view:\n%s", d.view())
	}
	d.keys("j", "enter") // ignored while too small
	topAs[*nsPage](t, d)
	d.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })
	checkFrame(t, d.view(), 80, 24)
	d.send(tea.WindowSizeMsg{Width: 120, Height: 40})
	checkFrame(t, d.view(), 120, 40)
	d.keys("q")
	d.until("quit", func() bool { return d.quit })
}

func TestFormValidationDiffSave(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	d := newDriver(t, e, Options{Namespace: "web"}, 100, 40)
	lp := topAs[*labelsPage](t, d)
	d.until("labels", func() bool { return lp.loaded })
	d.keys("G", "e")
	f := topAs[*formPage](t, d)
	base := f.base
	// The field validators are the API's: same field names and messages.
	v := *f.vals
	v.SetupPath = "relative/dir"
	v.CPU = "150"
	v.Hosts = "0:10.0.0.1,nonsense"
	_, errs := validateDef(v, base)
	for _, field := range []string{"process.spec.identity.setup_path", "process.spec.resource.cpu", "hosts[1]"} {
		if fieldErr(errs, field) == nil {
			t.Fatalf("no error for %s in %v", field, errs)
		}
	}
	// The engine refuses the same definition with the same message.
	bad, _ := v.toDef(base)
	bad.Hosts = bad.Hosts[:1]
	err := e.SaveProcess(context.Background(), bad)
	if err == nil || !strings.Contains(err.Error(), fieldErr(errs, "process.spec.identity.setup_path").Error()) {
		t.Fatalf("form message %q is not the engine's %v", fieldErr(errs, "process.spec.identity.setup_path"), err)
	}
	// Review: change the stop command and a label, see the diff, save.
	f.vals.StopCmd = "./stop.sh --graceful"
	f.vals.Labels += ",team=ops"
	d.send(replaceMsg{newReviewPage(d.m.s, f.base, false, *f.vals)})
	rv := topAs[*reviewPage](t, d)
	if len(rv.errs) != 0 {
		t.Fatalf("errors %v", rv.errs)
	}
	fields := []string{}
	for _, l := range rv.diff {
		fields = append(fields, l.field)
	}
	if !slices.Equal(fields, []string{"process.meta.labels", "process.spec.control.stop_cmd"}) {
		t.Fatalf("diff fields %v", fields)
	}
	if !strings.Contains(d.view(), "./stop.sh --graceful") {
		t.Fatalf("diff view:\n%s", d.view())
	}
	d.keys("y")
	d.until("saved", func() bool { _, ok := d.m.top().(*reviewPage); return !ok })
	defs, err := e.Processes(context.Background(), backend.ProcQuery{Namespace: "web", Name: base.Process.Meta.Name})
	if err != nil || len(defs) != 1 {
		t.Fatalf("%v %v", defs, err)
	}
	if defs[0].Process.Spec.Control.StopCmd != "./stop.sh --graceful" || defs[0].Process.Meta.Labels["team"] != "ops" {
		t.Fatalf("saved %+v", defs[0].Process)
	}
	// A review with errors refuses to save and e goes back to the form.
	wrong := *f.vals
	wrong.OpTimeout = "soon"
	d.send(pushMsg{newReviewPage(d.m.s, f.base, false, wrong)})
	rv = topAs[*reviewPage](t, d)
	d.keys("y")
	if !strings.Contains(d.m.flash, "fix the errors") || !strings.Contains(d.view(), `process.spec.monitor_policy.op_timeout: "soon" is not a whole number`) {
		t.Fatalf("flash %q view:\n%s", d.m.flash, d.view())
	}
	d.keys("e")
	f2 := topAs[*formPage](t, d)
	if f2.vals.OpTimeout != "soon" {
		t.Fatal("edit again lost the values")
	}
}

func TestFormTypingShowsInlineError(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	d := newDriver(t, e, Options{}, 100, 40)
	d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })
	d.keys("n")
	f := topAs[*formPage](t, d)
	d.exec(f.Init())
	d.settle(50 * time.Millisecond)
	// Namespace is focused: a colon is refused with the API's message.
	d.typeText("we:b")
	d.keys("enter")
	d.settle(50 * time.Millisecond)
	if !strings.Contains(d.view(), "character ':'") {
		t.Fatalf("no inline error:\n%s", d.view())
	}
	// q types into the field rather than quitting.
	d.keys("q")
	if d.quit {
		t.Fatal("q quit from a text field")
	}
}

// Keys typed fast arrive as one message with several runes: each counts.
func TestKeyBurstSplit(t *testing.T) {
	e, _ := simBackend(t, quietSim(20, "web", "db", "gse"))
	d := newDriver(t, e, Options{}, 100, 30)
	d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })
	d.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("jj")})
	if c := d.m.stack[0].(*nsPage).list.cursor; c != 2 {
		t.Fatalf("cursor %d after a burst of two j", c)
	}
}

// TestOptionsRefused: the console's config is the one config.Load filled,
// not defaulted again here; a console without an operator is refused.
func TestOptionsRefused(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	if _, err := New(context.Background(), Options{Backend: e, Theme: monoTheme(t), Operator: "test"}); err == nil ||
		!strings.Contains(err.Error(), "console.recent_tasks") {
		t.Fatalf("a zero [console] config: %v, want refused naming recent_tasks", err)
	}
	if _, err := New(context.Background(), Options{Backend: e, Config: config.Default().Console, Theme: monoTheme(t)}); err == nil ||
		!strings.Contains(err.Error(), "operator") {
		t.Fatalf("no operator: %v, want refused", err)
	}
}

func TestClosedConsoleMakesNoCalls(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	m, err := New(context.Background(), Options{Backend: e, Config: config.Default().Console, Theme: monoTheme(t), Operator: "test"})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if _, err := m.s.be.Namespaces(context.Background()); err == nil {
		t.Fatal("a call after Close reached the backend")
	}
	m.Close() // twice is fine
}

// The elapsed-time clock ticks only while the task runs and its page is on
// top: nothing ticks when nothing moves.
func TestWatchTicksOnlyWhenVisibleAndRunning(t *testing.T) {
	s := benchShared(t, 100, 30)
	s.static = false
	task, rs := fixedTask()
	w := newWatchPage(s, task)
	w.Update(watchInitMsg{id: w.id, view: backend.TaskView{Task: task, Results: rs}})
	s.topID = w.id
	if w.tick() == nil {
		t.Fatal("a running task on top does not tick")
	}
	if w.Update(watchTickMsg{w.id}) == nil {
		t.Fatal("the tick was not re-armed")
	}
	s.topID = w.id + 1 // another page opened on top
	if w.Update(watchTickMsg{w.id}) != nil {
		t.Fatal("ticks while hidden")
	}
	s.topID = w.id
	if w.Resume() == nil {
		t.Fatal("Resume did not restart the clock")
	}
	w.ticking = false
	w.Update(watchTaskMsg{id: w.id, task: model.Task{ID: task.ID, Status: model.TaskDone, Created: task.Created}})
	if w.Update(watchTickMsg{w.id}) != nil || w.tick() != nil {
		t.Fatal("ticks after the task finished")
	}
}

func TestDrainBatches(t *testing.T) {
	ch := make(chan int, 10)
	for i := range 7 {
		ch <- i
	}
	got, closed := drain(ch, 5, time.Millisecond)
	if len(got) != 5 || closed {
		t.Fatalf("first batch %v closed=%v, want 5 items", got, closed)
	}
	got, closed = drain(ch, 5, time.Millisecond)
	if len(got) != 2 || closed {
		t.Fatalf("second batch %v closed=%v, want the 2 left after the window", got, closed)
	}
	ch <- 9
	close(ch)
	got, closed = drain(ch, 5, time.Second)
	if len(got) != 1 || !closed {
		t.Fatalf("last batch %v closed=%v", got, closed)
	}
	// It blocks for the first item: nothing ticks while nothing moves.
	ch2 := make(chan int)
	done := make(chan struct{})
	go func() { drain(ch2, 5, 0); close(done) }()
	select {
	case <-done:
		t.Fatal("drain returned with nothing to read")
	case <-time.After(30 * time.Millisecond):
	}
	close(ch2)
	<-done
}

func TestFormDiscardAsks(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	d := newDriver(t, e, Options{Guard: time.Nanosecond}, 100, 40)
	d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })
	d.keys("n")
	f := topAs[*formPage](t, d)
	d.keys("esc") // unchanged: closes at once
	topAs[*nsPage](t, d)
	d.keys("n")
	f = topAs[*formPage](t, d)
	d.typeText("x")
	d.keys("esc")
	if d.m.dialog == nil {
		t.Fatal("esc on a changed form did not ask")
	}
	d.keys("enter") // default No: the form stays
	topAs[*formPage](t, d)
	d.keys("esc", "y")
	d.until("discarded", func() bool { _, ok := d.m.top().(*nsPage); return ok })
	_ = f
}

func TestHostPageAndQuitWhileRunning(t *testing.T) {
	sc := quietSim(20)
	sc.LatencyMedian = config.Duration(10 * time.Minute) // the task below runs until its hosts' deadline, past the test's end
	sc.LatencyP99 = config.Duration(20 * time.Minute)
	e, _ := simBackend(t, sc)
	d := newDriver(t, e, Options{Guard: time.Nanosecond}, 100, 30)
	hp := openHosts(t, d, "app=nginx")
	row := hp.rows[hp.shown[0]]
	d.keys("enter")
	// The page loads the host whole (the list keeps only its columns).
	pg := topAs[*hostPage](t, d)
	d.until("the host loaded", func() bool { return pg.loaded })
	if v := d.view(); !strings.Contains(v, row.v.Host.AgentID()) || !strings.Contains(v, "web:nginx") ||
		row.v.AgentID == "" || !strings.Contains(v, "agent id   "+row.v.AgentID) {
		t.Fatalf("host page (want its agent id %q):\n%s", row.v.AgentID, v)
	}
	d.keys("esc")
	// With a task running in the embedded engine, q asks (default No).
	if _, err := e.Operate(context.Background(), backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "web"}}); err != nil {
		t.Fatal(err)
	}
	d.send(infoMsg{backend.Info{Mode: "embedded", Running: 1}, d.m.s.infoSeq})
	d.keys("q")
	d.until("dialog", func() bool { return d.m.dialog != nil || d.quit })
	if d.quit {
		t.Fatal("q quit with a task running")
	}
	d.keys("enter")
	if d.m.dialog != nil || d.quit {
		t.Fatal("default answer is not No")
	}
	d.keys("q")
	d.until("dialog", func() bool { return d.m.dialog != nil || d.quit })
	if d.quit {
		t.Fatal("q quit with a task running")
	}
	d.keys("y")
	d.until("quit", func() bool { return d.quit })

	// The status bar says a task runs, but none does any more: q quits
	// without asking (the count is asked again when q is pressed).
	e2, _ := simBackend(t, quietSim(5))
	d2 := newDriver(t, e2, Options{Guard: time.Nanosecond}, 100, 30)
	d2.until("info", func() bool { return d2.m.info.Mode != "" })
	d2.send(infoMsg{backend.Info{Mode: "embedded", Running: 2}, d2.m.s.infoSeq})
	d2.keys("q")
	d2.until("quit", func() bool { return d2.quit || d2.m.dialog != nil })
	if d2.m.dialog != nil {
		t.Fatal("q asked about tasks that are not running")
	}
}

func TestHostsReloadOnEvent(t *testing.T) {
	e, _ := simBackend(t, quietSim(20))
	d := newDriver(t, e, Options{}, 100, 30)
	hp := openHosts(t, d, "app=nginx")
	other := model.Event{Time: time.Now(), Host: model.Host{IP: "192.0.2.1"}, Kind: model.EventAgentOnline}
	d.send(eventsMsg{events: []model.Event{other}, closed: true})
	if hp.rl.loading {
		t.Fatal("an event of another host reloaded the table")
	}
	mine := model.Event{Time: time.Now(), Host: hp.rows[0].v.Host, ProcKey: "web:nginx", Kind: model.EventRestartSuccess}
	d.send(eventsMsg{events: []model.Event{mine}, closed: true})
	if !hp.rl.loading && !hp.rl.queued {
		t.Fatal("an event of a shown host did not reload the table")
	}
	// Right after a load, the reload waits (at most one every reloadGap).
	d.until("reloaded", func() bool { return !hp.rl.loading && !hp.rl.queued })
	hp.rl.at = time.Now().Add(-time.Hour)
	d.send(eventsMsg{events: []model.Event{mine}, closed: true})
	if !hp.rl.loading {
		t.Fatal("an event long after the last load did not reload at once")
	}
	d.send(eventsMsg{events: []model.Event{mine}, closed: true}) // one at a time
	d.until("reloaded again", func() bool { return !hp.rl.loading && !hp.rl.queued })
}

// The scrolling screens move with the navigation keys.
func TestScrollingScreens(t *testing.T) {
	s := benchShared(t, 80, 12)
	_, rs := fixedTask()
	r := rs[1]
	r.Op, r.Proc = model.OpStatus, model.ResultProc{ProcName: "nginx"}
	r.Status = &model.ProcStatus{State: model.ProcRunning, PID: 42}
	rp := newResultPage(s, r)
	rp.SetSize(80, 10)
	rp.Update(keyMsg("j"))
	rp.Update(keyMsg("j"))
	if rp.vp.YOffset != 2 {
		t.Fatalf("result page offset %d after jj", rp.vp.YOffset)
	}
	rp.Update(keyMsg("k"))
	if rp.vp.YOffset != 1 {
		t.Fatalf("result page offset %d after k", rp.vp.YOffset)
	}
	rp.Update(keyMsg("G"))
	if !rp.vp.AtBottom() {
		t.Fatal("G did not reach the bottom")
	}
	if c := prettyJSON(wire.Content(r)); !strings.Contains(c, "\n  \"process\": [") {
		t.Fatalf("content not indented: %s", c)
	}

	for i := range 30 {
		s.events = append(s.events, model.Event{Time: time.Unix(int64(i), 0), Host: model.Host{IP: "10.0.0.1"}, Kind: model.EventAgentOnline})
	}
	ep := newEventsPage(s)
	ep.SetSize(80, 10)
	ep.Update(keyMsg("j"))
	ep.Update(keyMsg("G"))
	if ep.list.cursor != 29 || ep.list.offset == 0 {
		t.Fatalf("events cursor %d offset %d", ep.list.cursor, ep.list.offset)
	}
	if v := ep.View(); !strings.Contains(v, "30 events") || len(strings.Split(v, "\n")) > 10 {
		t.Fatalf("events view:\n%s", v)
	}
}
