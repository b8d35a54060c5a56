package ui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/model"
)

// gatedBackend holds Processes and Hosts calls until the test opens the
// gate: a page that is still loading.
type gatedBackend struct {
	backend.Backend
	gate chan struct{}
}

func (g *gatedBackend) wait(ctx context.Context) error {
	select {
	case <-g.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gatedBackend) Processes(ctx context.Context, q backend.ProcQuery) ([]model.ProcessDef, error) {
	if err := g.wait(ctx); err != nil {
		return nil, err
	}
	return g.Backend.Processes(ctx, q)
}

func (g *gatedBackend) Hosts(ctx context.Context, q backend.HostQuery) ([]backend.HostView, error) {
	if err := g.wait(ctx); err != nil {
		return nil, err
	}
	return g.Backend.Hosts(ctx, q)
}

// Defect 6: keys typed while the op picker loads its processes do nothing:
// "o g j enter" opened "Confirm restart" on a list the operator had not seen.
func TestKeysWhileLoadingDoNothing(t *testing.T) {
	e, _ := simBackend(t, quietSim(20))
	g := &gatedBackend{Backend: e, gate: make(chan struct{})}
	d := newDriver(t, g, Options{Guard: time.Nanosecond}, 100, 30)
	d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })
	// The labels page is loading: enter, o and e do nothing.
	d.keys("enter")
	lp := topAs[*labelsPage](t, d)
	d.keys("o", "enter", "e")
	topAs[*labelsPage](t, d)
	if !strings.Contains(d.m.flash, "still loading") {
		t.Fatalf("flash %q", d.m.flash)
	}
	close(g.gate)
	d.until("labels", func() bool { return lp.loaded })
	// The op picker, still loading (a new gate), takes no op.
	g.gate = make(chan struct{})
	d.keys("o")
	op := topAs[*opPage](t, d)
	d.keys("g", "j", "enter")
	if d.m.dialog != nil {
		t.Fatalf("a dialog opened on a picker that had not loaded: %s", d.m.dialog.title)
	}
	if !strings.Contains(d.view(), "checking the selected processes") {
		t.Fatalf("ops not shown disabled while loading:\n%s", d.view())
	}
	close(g.gate)
	d.until("processes", func() bool { return op.loaded })
	d.keys("enter")
	d.until("dialog", func() bool { return d.m.dialog != nil })
	if d.m.dialog.title != "Confirm "+op.ops[op.list.cursor].String() {
		t.Fatalf("dialog %q with the cursor on %s", d.m.dialog.title, op.ops[op.list.cursor])
	}
}

// Defect 9: o with nothing selected names the host under the cursor in the
// picker and the confirmation.
func TestOpOnCursorHostNamesIt(t *testing.T) {
	e, _ := simBackend(t, quietSim(20))
	d := newDriver(t, e, Options{Guard: time.Nanosecond}, 120, 40)
	hp := openHosts(t, d, "app=nginx")
	d.keys("j")
	id := hp.rows[hp.shown[hp.list.cursor]].v.Host.AgentID()
	d.keys("o")
	op := topAs[*opPage](t, d)
	d.until("processes", func() bool { return op.loaded })
	if !strings.Contains(d.view(), "host "+id+" (under the cursor") {
		t.Fatalf("picker does not name %s:\n%s", id, d.view())
	}
	d.keys("enter")
	d.until("dialog", func() bool { return d.m.dialog != nil })
	if !strings.Contains(d.view(), id) {
		t.Fatalf("confirmation does not name %s:\n%s", id, d.view())
	}
}

// Defect 10: a restart or reload over the threshold asks for the typed
// host count like stop and kill do; status asks nothing.
func TestTypedConfirmationForEveryChange(t *testing.T) {
	e, _ := simBackend(t, quietSim(30))
	cfg := config.Default().Console
	cfg.ConfirmThreshold = 2
	d := newDriver(t, e, Options{Guard: time.Nanosecond, Config: cfg}, 120, 40)
	openHosts(t, d, "app=nginx")
	d.keys("a", "o")
	op := topAs[*opPage](t, d)
	d.until("processes", func() bool { return op.loaded })
	for _, o := range []model.OpType{model.OpRestart, model.OpReload, model.OpStart, model.OpRegister} {
		for op.ops[op.list.cursor] != o {
			d.keys("j")
			if op.list.cursor == len(op.ops)-1 && op.ops[op.list.cursor] != o {
				d.keys("g")
			}
		}
		d.keys("enter")
		d.until("dialog", func() bool { return d.m.dialog != nil })
		if d.m.dialog.require == "" {
			t.Fatalf("%s over %d hosts (threshold 2) asks only y/N", o, op.tg.hosts)
		}
		d.keys("esc")
	}
}

// downBackend fails every call while down is set, like a server that went away.
type downBackend struct {
	backend.Backend
	down atomic.Bool
}

var errServerGone = errors.New(`Get "http://127.0.0.1:8080/api/v1/hosts?namespace=web&labels=app%3Dnginx": dial tcp 127.0.0.1:8080: connect: connection refused (after 3 attempts over 1.2s)`)

func (b *downBackend) Info(ctx context.Context) (backend.Info, error) {
	if b.down.Load() {
		return backend.Info{}, errServerGone
	}
	return b.Backend.Info(ctx)
}

func (b *downBackend) Hosts(ctx context.Context, q backend.HostQuery) ([]backend.HostView, error) {
	if b.down.Load() {
		return nil, errServerGone
	}
	return b.Backend.Hosts(ctx, q)
}

// Defect 1 and 2: with the server gone, a hosts list says it could not
// load (not "no host matches"), the status bar stops showing old counts,
// the error is readable whole at 80 columns and in the message log, R
// retries, and everything clears when the server is back.
func TestFailedLoadIsHonestAndRetries(t *testing.T) {
	e, _ := simBackend(t, quietSim(30))
	b := &downBackend{Backend: e}
	d := newDriver(t, b, Options{Guard: time.Nanosecond}, 80, 24)
	d.until("info", func() bool { return d.m.info.Hosts > 0 })
	d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })
	b.down.Store(true)
	d.keys("enter") // web: its processes load (they work), then a label's hosts fail
	lp := topAs[*labelsPage](t, d)
	d.until("labels", func() bool { return lp.loaded })
	d.keys("j", "enter")
	hp := topAs[*hostsPage](t, d)
	d.until("hosts failed", func() bool { return hp.loaded && d.m.banner != nil })
	d.send(infoTickMsg{})
	d.until("info failed", func() bool { return d.m.infoErr != nil })
	v := d.view()
	checkFrame(t, v, 80, 24)
	if strings.Contains(v, "No host matches") || !strings.Contains(v, "Could not load the hosts") {
		t.Fatalf("a failed load looks like an empty selection:\n%s", v)
	}
	if strings.Contains(v, "hosts online") || !strings.Contains(v, "not answering") {
		t.Fatalf("status bar keeps old counts:\n%s", v)
	}
	// The whole error can be read on screen: its end is there.
	flat := strings.Join(strings.Fields(v), " ")
	if !strings.Contains(flat, "connection refused") || !strings.Contains(flat, "R retries") {
		t.Fatalf("error not shown whole, or no retry offered:\n%s", v)
	}
	// esc dismisses the banner; the message log keeps every message whole.
	d.keys("esc")
	if d.m.banner != nil {
		t.Fatal("esc did not dismiss the error")
	}
	topAs[*hostsPage](t, d)
	d.keys("L")
	mp := topAs[*messagesPage](t, d)
	if len(d.m.s.log) == 0 {
		t.Fatal("message log empty")
	}
	d.keys("enter")
	topAs[*messagePage](t, d)
	if !strings.Contains(strings.Join(strings.Fields(d.view()), " "), "(after 3 attempts over 1.2s)") {
		t.Fatalf("message not shown whole:\n%s", d.view())
	}
	_ = mp
	d.keys("esc", "esc")
	topAs[*hostsPage](t, d)
	// The server is back: R reloads, the status bar counts come back.
	b.down.Store(false)
	d.keys("R")
	d.until("hosts", func() bool { return hp.err == nil && len(hp.rows) > 0 })
	d.send(infoTickMsg{})
	d.until("info", func() bool { return d.m.infoErr == nil })
	v = d.view()
	if strings.Contains(v, "Could not load") || strings.Contains(v, "not answering") || !strings.Contains(v, "hosts online") {
		t.Fatalf("stale failure after the server came back:\n%s", v)
	}
}

// Defect 2: a config warning longer than the screen can be read whole.
func TestWarningsInMessageLog(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	long := `config /etc/gseproc/config.toml: unknown key "console.colour_scheme_for_the_dark_terminal_theme" ignored`
	d := newDriver(t, e, Options{Warnings: []string{long}}, 80, 24)
	if !strings.Contains(d.view(), "1 warning at start") {
		t.Fatalf("no warning notice:\n%s", d.view())
	}
	d.keys("L", "enter")
	if !strings.Contains(strings.Join(strings.Fields(d.view()), " "), "colour_scheme_for_the_dark_terminal_theme\" ignored") {
		t.Fatalf("warning not readable whole:\n%s", d.view())
	}
}

// Defect 4: retry over several processes is one task and one watch.
func TestRetryFailedIsOneTask(t *testing.T) {
	sc := quietSim(40)
	sc.FailureRate = 0.5
	e, _ := simBackend(t, sc)
	cfg := config.Default().Console
	cfg.ConfirmThreshold = 1000
	d := newDriver(t, e, Options{Guard: time.Nanosecond, Config: cfg, Namespace: "web"}, 120, 40)
	lp := topAs[*labelsPage](t, d)
	d.until("labels", func() bool { return lp.loaded })
	d.keys("o") // every process in web
	op := topAs[*opPage](t, d)
	d.until("processes", func() bool { return op.loaded })
	if len(op.tg.procs) < 2 {
		t.Fatalf("web has %v: the test needs several processes", op.tg.procs)
	}
	d.keys("enter", "y")
	d.until("watch", func() bool { w, ok := d.m.top().(*watchPage); return ok && w.loaded })
	w := topAs[*watchPage](t, d)
	d.until("task done", func() bool { return taskFinal(w.task.Status) })
	failed := map[string]bool{}
	want := map[model.Target]bool{}
	for i := range w.res.len() {
		if r := w.res.result(i); r.State.Final() && !r.State.OK() {
			failed[r.ProcKey] = true
			want[model.Target{Host: r.Host, ProcKey: r.ProcKey}] = true
		}
	}
	if len(failed) < 2 {
		t.Fatalf("failures in %d process(es): the test needs several", len(failed))
	}
	depth := len(d.m.stack)
	d.keys("r")
	d.until("dialog", func() bool { return d.m.dialog != nil })
	d.keys("y")
	d.until("retry watch", func() bool { w2, ok := d.m.top().(*watchPage); return ok && w2 != w && w2.loaded })
	d.settle(50 * time.Millisecond)
	if len(d.m.stack) != depth+1 {
		t.Fatalf("retry stacked %d screens, want 1", len(d.m.stack)-depth)
	}
	ts, err := e.Tasks(context.Background(), 10)
	if err != nil || len(ts) != 2 {
		t.Fatalf("%d tasks after one retry (%v), want 2", len(ts), err)
	}
	view, err := e.Task(context.Background(), ts[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[model.Target]bool{}
	for _, r := range view.Results {
		got[model.Target{Host: r.Host, ProcKey: r.ProcKey}] = true
	}
	if len(got) != len(want) {
		t.Fatalf("retry targets %d pairs, want the %d failed ones", len(got), len(want))
	}
	for p := range want {
		if !got[p] {
			t.Fatalf("failed pair %v not retried", p)
		}
	}
}

// Defect 5: the status op's watch shows each process's state, pid, uptime,
// cpu and memory (not "success 0 success"), stopped processes first.
func TestStatusWatchShowsProcesses(t *testing.T) {
	e, _ := simBackend(t, quietSim(30))
	ctx := context.Background()
	hv, err := e.Hosts(ctx, backend.HostQuery{Namespace: "web", Labels: map[string]string{"app": "nginx"}})
	if err != nil || len(hv) < 5 {
		t.Fatalf("%d hosts, %v", len(hv), err)
	}
	stopped := []model.Host{hv[len(hv)-1].Host, hv[len(hv)-2].Host}
	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStop, Selector: backend.Selector{Namespace: "web", Labels: map[string]string{"app": "nginx"}, Hosts: stopped}})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := e.Watch(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range ch {
	}
	d := newDriver(t, e, Options{Guard: time.Nanosecond}, 120, 40)
	openHosts(t, d, "app=nginx")
	w := statusWatch(t, d)
	d.until("loaded", func() bool { return w.loaded })
	d.until("status done", func() bool { return taskFinal(w.task.Status) && len(w.shown) == w.task.Targets })
	v := d.view()
	for _, col := range []string{"PID", "UPTIME", "CPU", "MEM", "stopped processes first"} {
		if !strings.Contains(v, col) {
			t.Fatalf("no %s in the status watch:\n%s", col, v)
		}
	}
	if strings.Contains(v, "0 success") {
		t.Fatalf("status rows say only success:\n%s", v)
	}
	// Processes not up (the two stopped here among them) come first, then
	// running ones with a pid.
	firstUp := -1
	down := map[model.Host]bool{}
	for i, ri := range w.shown {
		st := w.res.result(ri).Status
		if st == nil {
			t.Fatalf("row %d has no status: %+v", i, w.res.result(ri))
		}
		if st.State.Up() && firstUp < 0 {
			firstUp = i
		}
		if !st.State.Up() {
			if firstUp >= 0 {
				t.Fatalf("row %d (%s) comes after a running process", i, st.State)
			}
			down[w.res.host(ri)] = true
		}
	}
	if firstUp < 0 || !down[stopped[0]] || !down[stopped[1]] {
		t.Fatalf("stopped hosts %v not among the first rows %v", stopped, down)
	}
	run := w.res.result(w.shown[firstUp])
	if run.Status.PID <= 0 {
		t.Fatalf("running row %+v has no pid", run)
	}
	if !strings.Contains(v, fmt.Sprint(run.Status.PID)) || !strings.Contains(v, "▶ running") || !strings.Contains(v, "■ stopped") {
		t.Fatalf("pid %d or states not drawn:\n%s", run.Status.PID, v)
	}
}

// Defect 3: cancel says what really happens: hosts not sent the op are
// cancelled (each row says so), hosts already running are told to stop
// and counted; the task is not called cancelled while they run.
func TestCancelIsHonest(t *testing.T) {
	sc := quietSim(30)
	sc.LatencyMedian = config.Duration(3 * time.Second)
	sc.LatencyP99 = config.Duration(5 * time.Second)
	ec := config.Default().Engine
	ec.Concurrency = 2 // two hosts in flight, the rest wait their turn
	e, _ := simBackendEngine(t, sc, ec)
	d := newDriver(t, e, Options{Guard: time.Nanosecond}, 120, 40)
	openHosts(t, d, "app=nginx")
	w := statusWatch(t, d)
	d.until("streaming", func() bool { return w.streaming })
	d.keys("x")
	d.until("dialog", func() bool { return d.m.dialog != nil })
	if !strings.Contains(d.view(), "are told to stop") {
		t.Fatalf("the dialog promises more than cancel does:\n%s", d.view())
	}
	d.keys("y")
	d.until("cancel answered", func() bool { return w.cancelAsked })
	if strings.Contains(d.m.flash, "cancelled "+w.task.ID) || !strings.Contains(d.m.flash, "not-yet-sent hosts cancelled") {
		t.Fatalf("notice %q", d.m.flash)
	}
	if !taskFinal(w.task.Status) {
		if !strings.Contains(d.m.flash, "already running told to stop") || !strings.Contains(d.view(), "cancelling") {
			t.Fatalf("hosts still run but the notice %q / screen does not say so:\n%s", d.m.flash, d.view())
		}
	}
	d.until("task final", func() bool { return taskFinal(w.task.Status) && !w.streaming })
	view, err := e.Task(context.Background(), w.task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if w.counts != view.Task.Counts || w.counts.Cancelled == 0 {
		t.Fatalf("console counts %+v, engine %+v", w.counts, view.Task.Counts)
	}
	if !strings.Contains(d.view(), "– cancelled") {
		t.Fatalf("no per-host cancelled row:\n%s", d.view())
	}
}

// An Info call that answers after a newer one does not bring old counts
// back (a late "1 task running" made q ask about a finished task).
func TestLateInfoAnswerDropped(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	d := newDriver(t, e, Options{}, 100, 30)
	d.until("info", func() bool { return d.m.info.Mode != "" })
	old := d.m.s.refreshInfo()().(infoMsg)
	fresh := d.m.s.refreshInfo()().(infoMsg)
	fresh.info.Running = 0
	old.info.Running = 3
	d.send(fresh)
	d.send(old)
	if d.m.info.Running != 0 {
		t.Fatalf("the older answer won: %d running", d.m.info.Running)
	}
}

// Defect 7: keys typed right after tab (before huh has moved the focus)
// and a paste go into the field that has the focus, not the one left.
func TestFormFastTypingAndPaste(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	d := newDriver(t, e, Options{Namespace: "web"}, 100, 40)
	lp := topAs[*labelsPage](t, d)
	d.until("labels", func() bool { return lp.loaded })
	d.keys("n")
	f := topAs[*formPage](t, d)
	d.settle(30 * time.Millisecond)
	// tab and the name typed at once: nothing is applied in between.
	d.keys("tab")
	d.typeText("myapp")
	d.keys("tab")
	d.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("app=demo,tier=web"), Paste: true})
	d.settle(300 * time.Millisecond)
	if f.vals.Namespace != "web" || f.vals.Name != "myapp" || f.vals.Labels != "app=demo,tier=web" {
		t.Fatalf("fields: namespace %q name %q labels %q", f.vals.Namespace, f.vals.Name, f.vals.Labels)
	}
}

// Defect 8: the form's footer shows its own keys (not ? and q, which type
// into fields); ctrl+s reviews from any field; ctrl+c in a changed form
// asks first.
func TestFormKeys(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	d := newDriver(t, e, Options{Namespace: "web", Guard: time.Nanosecond}, 80, 24)
	lp := topAs[*labelsPage](t, d)
	d.until("labels", func() bool { return lp.loaded })
	d.keys("G", "e")
	f := topAs[*formPage](t, d)
	d.settle(30 * time.Millisecond)
	foot := strings.Split(d.view(), "\n")[23]
	if strings.Contains(foot, "? help") || strings.Contains(foot, "q quit") || !strings.Contains(foot, "ctrl+s") || !strings.Contains(foot, "esc") {
		t.Fatalf("form footer %q", foot)
	}
	// ctrl+c on an unchanged form would quit; change a field first.
	d.keys("tab", "tab")
	d.settle(30 * time.Millisecond)
	d.typeText(",team=ops")
	// The typed keys wait in the form until huh has moved the focus (or
	// flushAfter passed): wait for them to land, not for a time.
	d.until("labels changed", f.changed)
	if !strings.HasSuffix(f.vals.Labels, ",team=ops") {
		t.Fatalf("labels %q: the typed text did not land in the labels field", f.vals.Labels)
	}
	d.send(tea.KeyMsg{Type: tea.KeyCtrlC})
	if d.quit || d.m.dialog == nil {
		t.Fatal("ctrl+c left a changed form without asking")
	}
	d.keys("n")
	topAs[*formPage](t, d)
	// ctrl+s: straight to the review, from the third field.
	d.send(tea.KeyMsg{Type: tea.KeyCtrlS})
	rp := topAs[*reviewPage](t, d)
	if len(rp.diff) != 1 || rp.diff[0].field != "process.meta.labels" || !strings.Contains(rp.diff[0].new, "team=ops") {
		t.Fatalf("review diff %+v", rp.diff)
	}
}

// Defect 12: the filter is structured (state=stopped matches the stopped
// processes' hosts, letters scattered over a row match nothing), its hint
// shows the syntax, and clearing it keeps the cursor on the same host.
func TestStructuredFilter(t *testing.T) {
	e, _ := simBackend(t, quietSim(200, "web", "gse"))
	d := newDriver(t, e, Options{Namespace: "web"}, 120, 40)
	lp := topAs[*labelsPage](t, d)
	d.until("labels", func() bool { return lp.loaded })
	d.keys("enter") // every process in web
	hp := topAs[*hostsPage](t, d)
	d.until("hosts", func() bool { return hp.loaded })
	d.filter("state=stopped", "state=stopped")
	if len(hp.shown) == 0 || len(hp.shown) == len(hp.rows) {
		t.Fatalf("state=stopped shows %d of %d", len(hp.shown), len(hp.rows))
	}
	for _, i := range hp.shown {
		if !hasProcIn(hp.rows[i], model.ProcStopped) {
			t.Fatalf("%s has no stopped process", hp.rows[i].v.Host)
		}
	}
	d.keys("j", "j")
	cur := hp.rows[hp.shown[hp.list.cursor]].v.Host
	d.keys("esc") // clears the filter
	if len(hp.shown) != len(hp.rows) || hp.rows[hp.shown[hp.list.cursor]].v.Host != cur {
		t.Fatalf("after clearing: %d shown, cursor on %s, want %s", len(hp.shown), hp.rows[hp.shown[hp.list.cursor]].v.Host, cur)
	}
	d.keys("/")
	d.typeText("ngixstop")
	d.keys("enter")
	if len(hp.shown) != 0 {
		t.Fatalf("scattered letters matched %d hosts", len(hp.shown))
	}
}

// Defect 13: at 64x16 no IP is cut, the typed confirmation keeps its
// frame, and alternating t and E does not stack screens.
func TestLayoutAt64x16(t *testing.T) {
	e, _ := simBackend(t, quietSim(300))
	cfg := config.Default().Console
	cfg.ConfirmThreshold = 2
	d := newDriver(t, e, Options{Guard: time.Nanosecond, Config: cfg}, 64, 16)
	hp := openHosts(t, d, "app=nginx")
	d.keys("G") // the longest IPs are at the end
	v := d.view()
	checkFrame(t, v, 64, 16)
	s, end := hp.list.window()
	for i := s; i < end; i++ {
		if ip := hp.rows[hp.shown[i]].v.Host.IP; !strings.Contains(v, ip+" ") {
			t.Fatalf("IP %s cut at 64 columns:\n%s", ip, v)
		}
	}
	d.keys("a", "o")
	op := topAs[*opPage](t, d)
	d.until("processes", func() bool { return op.loaded })
	d.keys("enter")
	d.until("dialog", func() bool { return d.m.dialog != nil })
	v = d.view()
	checkFrame(t, v, 64, 16)
	if d.m.dialog.require == "" || !strings.Contains(v, "┌") || !strings.Contains(v, "└") || !strings.Contains(v, "Type "+d.m.dialog.require) {
		t.Fatalf("typed confirmation lost its frame or its question at 64x16:\n%s", v)
	}
	d.keys("esc", "esc")
	depth := len(d.m.stack)
	for range 5 {
		d.keys("t", "E")
	}
	if len(d.m.stack) > depth+2 {
		t.Fatalf("alternating t and E stacked %d screens", len(d.m.stack)-depth)
	}
}

// Item 11: a host page shows every process on the host across namespaces,
// its agent and recent events, o operates on it, and @ finds a host by IP
// from anywhere.
func TestHostPageFromAnywhere(t *testing.T) {
	e, _ := simBackend(t, quietSim(30, "web", "gse"))
	hv, err := e.Hosts(context.Background(), backend.HostQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var h backend.HostView
	for _, v := range hv {
		nss := map[string]bool{}
		for _, pv := range v.Procs {
			ns, _, _ := model.SplitKey(pv.Key)
			nss[ns] = true
		}
		if len(nss) == 2 && v.Host.CloudID == 0 {
			h = v
			break
		}
	}
	if h.Host.IP == "" {
		t.Fatal("no host of cloud 0 with processes in both namespaces")
	}
	d := newDriver(t, e, Options{Guard: time.Nanosecond}, 120, 40)
	d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })
	d.send(eventsMsg{events: []model.Event{{Time: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), Host: h.Host,
		ProcKey: h.Procs[0].Key, Kind: model.EventRestartSuccess, Message: "restarted after exit status 3"}}, closed: true})
	d.keys("@")
	topAs[*findPage](t, d)
	d.typeText(h.Host.IP) // an IP alone means cloud 0
	d.keys("enter")
	hp := topAs[*hostPage](t, d)
	d.until("host", func() bool { return hp.loaded })
	v := d.view()
	for _, want := range []string{h.Host.AgentID(), "version", "heartbeat", "restarted after exit status 3", fmt.Sprintf("Processes (%d, every namespace)", len(h.Procs))} {
		if !strings.Contains(v, want) {
			t.Fatalf("host page lacks %q:\n%s", want, v)
		}
	}
	for _, pv := range h.Procs {
		if !strings.Contains(v, pv.Key) {
			t.Fatalf("host page lacks process %s:\n%s", pv.Key, v)
		}
	}
	d.keys("o")
	op := topAs[*opPage](t, d)
	if len(op.tg.sel.Hosts) != 1 || op.tg.sel.Hosts[0] != h.Host || !strings.Contains(d.view(), "host "+h.Host.AgentID()) {
		t.Fatalf("op target %+v:\n%s", op.tg.sel, d.view())
	}
}

// Item 14: read-only offers no n/e and never starts the picker on a
// disabled op; enter on an event opens it whole; the watch's header does
// not repeat the footer's keys.
func TestSmallerItems(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	op := model.OpRestart
	d := newDriver(t, e, Options{ReadOnly: true, Namespace: "web", Labels: map[string]string{"app": "nginx"}, Op: &op}, 120, 40)
	p := topAs[*opPage](t, d)
	if p.ops[p.list.cursor] != model.OpStatus {
		t.Fatalf("read-only picker starts on %s", p.ops[p.list.cursor])
	}
	d.keys("esc", "esc")
	topAs[*labelsPage](t, d)
	foot := strings.Split(d.view(), "\n")[39]
	if strings.Contains(foot, "new process") || strings.Contains(foot, "edit process") {
		t.Fatalf("read-only footer offers changes: %q", foot)
	}
	long := strings.Repeat("restart failed: exit status 1; ", 12) + "the end"
	d.send(eventsMsg{events: []model.Event{{Time: time.Now(), Host: model.Host{IP: "10.0.0.3"}, ProcKey: "web:nginx",
		Kind: model.EventRestartFailed, Message: long}}, closed: true})
	d.keys("E", "enter")
	topAs[*eventPage](t, d)
	if !strings.Contains(strings.Join(strings.Fields(d.view()), " "), "exit status 1; the end") {
		t.Fatalf("event not whole:\n%s", d.view())
	}
}

// Item 14: a key bound to two actions is reported naming the one that
// really acts: the console-wide one before a screen's (quit = ["j"] said
// "down wins" and j quit), and of two console-wide ones the first tried.
func TestKeyCollisionNamesTheWinner(t *testing.T) {
	_, warns, err := NewKeyMap(map[string][]string{"quit": {"j"}})
	if err != nil || len(warns) != 1 || !strings.Contains(warns[0], `"j" is bound to both down and quit; quit wins`) {
		t.Fatalf("warnings %q, err %v", warns, err)
	}
	_, warns, _ = NewKeyMap(map[string][]string{"tasks": {"E"}})
	if len(warns) != 1 || !strings.Contains(warns[0], "tasks wins") {
		t.Fatalf("warnings %q", warns)
	}
	_, warns, _ = NewKeyMap(map[string][]string{"sort": {"o"}})
	if len(warns) != 1 || strings.Contains(warns[0], "wins") || !strings.Contains(warns[0], "only one acts") {
		t.Fatalf("two screen actions: warnings %q", warns)
	}
	// What the warnings say is what the console does.
	e, _ := simBackend(t, quietSim(10))
	open := func(keys map[string][]string) *driver {
		cfg := config.Default().Console
		cfg.Keys = keys
		d := newDriver(t, e, Options{Config: cfg}, 100, 30)
		d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })
		return d
	}
	d := open(map[string][]string{"tasks": {"E"}})
	d.keys("E")
	topAs[*tasksPage](t, d)
	d = open(map[string][]string{"quit": {"j"}})
	d.keys("j")
	d.until("quit", func() bool { return d.quit })
}

// Item 13: the footer always ends with the console-wide keys: the page's
// keys are cut whole, with an ellipsis (at 80 columns the labels page's
// footer ran over and lost "esc back · q quit").
func TestFooterKeepsGlobalKeys(t *testing.T) {
	e, _ := simBackend(t, quietSim(30))
	for _, size := range [][2]int{{80, 24}, {64, 16}, {120, 40}} {
		d := newDriver(t, e, Options{Guard: time.Nanosecond}, size[0], size[1])
		foot := func(page string) {
			t.Helper()
			v := d.view()
			checkFrame(t, v, size[0], size[1])
			lines := strings.Split(v, "\n")
			if last := strings.TrimRight(lines[len(lines)-1], " "); !strings.HasSuffix(last, "q quit") {
				t.Fatalf("%dx%d %s: footer %q", size[0], size[1], page, last)
			}
		}
		d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })
		foot("namespaces")
		d.keys("G", "enter")
		lp := topAs[*labelsPage](t, d)
		d.until("labels", func() bool { return lp.loaded })
		foot("labels")
		d.keys("j", "enter")
		hp := topAs[*hostsPage](t, d)
		d.until("hosts", func() bool { return hp.loaded })
		foot("hosts")
		for _, k := range []string{"t", "E", "L"} {
			d.keys(k)
			foot(k)
		}
	}
}

// Items 13 and 14: at 80 columns the recent tasks show what each selected
// (its labels), not "web · lab…" beside a cut task id; at 64 the frame holds.
func TestTasksShowSelectionWhenNarrow(t *testing.T) {
	e, _ := simBackend(t, quietSim(30))
	for _, size := range [][2]int{{80, 24}, {64, 16}} {
		d := newDriver(t, e, Options{Guard: time.Nanosecond}, size[0], size[1])
		openHosts(t, d, "app=nginx")
		w := statusWatch(t, d)
		d.until("status done", func() bool { return taskFinal(w.task.Status) })
		d.keys("t")
		tp := topAs[*tasksPage](t, d)
		d.until("tasks", func() bool { return tp.loaded && len(tp.tasks) > 0 })
		v := d.view()
		checkFrame(t, v, size[0], size[1])
		if size[0] >= 80 && !strings.Contains(v, "web · labels app=nginx") {
			t.Fatalf("%dx%d: selection %q not shown:\n%s", size[0], size[1], taskSelection(tp.tasks[0]), v)
		}
	}
}

// Item 12: / filters the message log too (every list filters), and enter
// opens the message under the cursor among those shown.
func TestMessagesFilter(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	d := newDriver(t, e, Options{Warnings: []string{"config x.toml: unknown key \"console.colour\" ignored", "config x.toml: unknown key \"engine.speed\" ignored"}}, 100, 30)
	d.m.s.addLog(levelError, "list hosts", "connection refused")
	d.keys("L")
	mp := topAs[*messagesPage](t, d)
	if len(mp.tb.shown) != 3 {
		t.Fatalf("%d messages shown, want 3", len(mp.tb.shown))
	}
	d.filter("level:error", "level:warn speed")
	if len(mp.tb.shown) != 1 || !strings.Contains(d.view(), "1 shown") {
		t.Fatalf("level:warn speed shows %d:\n%s", len(mp.tb.shown), d.view())
	}
	d.keys("enter")
	topAs[*messagePage](t, d)
	if !strings.Contains(d.view(), "engine.speed") {
		t.Fatalf("enter opened another message:\n%s", d.view())
	}
	d.keys("esc", "esc") // back, then the filter cleared
	topAs[*messagesPage](t, d)
	if len(mp.tb.shown) != 3 {
		t.Fatalf("%d shown after esc", len(mp.tb.shown))
	}
	// A message logged while the page is open is listed.
	d.m.s.addLog(levelError, "list tasks", "timeout")
	if d.view(); len(mp.tb.shown) != 4 {
		t.Fatalf("%d shown after a new message", len(mp.tb.shown))
	}
}

// Item 12: the labels and processes of a namespace filter and sort like
// every list; enter, o and e act on the row under the cursor among those
// shown.
func TestLabelsFilter(t *testing.T) {
	e, _ := simBackend(t, quietSim(40))
	d := newDriver(t, e, Options{Namespace: "web"}, 100, 30)
	lp := topAs[*labelsPage](t, d)
	d.until("labels", func() bool { return lp.loaded })
	d.filter("selector:", "selector:staging detail:nginx")
	if len(lp.tb.shown) != 1 || !strings.Contains(d.view(), "1 shown · filter selector:staging") {
		t.Fatalf("selector:staging detail:nginx shows %d rows:\n%s", len(lp.tb.shown), d.view())
	}
	it, _ := lp.cursorItem()
	if it.kind != lblProc || !strings.Contains(it.key, "staging") {
		t.Fatalf("cursor on %+v", it)
	}
	d.keys("o")
	op := topAs[*opPage](t, d)
	if op.tg.sel.Name != it.key {
		t.Fatalf("o on %s targets %+v", it.key, op.tg.sel)
	}
	d.keys("esc", "esc") // the picker closed, then the filter cleared
	topAs[*labelsPage](t, d)
	if len(lp.tb.shown) != len(lp.items) {
		t.Fatalf("%d of %d shown after esc", len(lp.tb.shown), len(lp.items))
	}
	if it2, _ := lp.cursorItem(); it2.key != it.key {
		t.Fatalf("the cursor left %s for %s", it.key, it2.key)
	}
	// s sorts by the next column, S reverses: HOSTS, most first.
	for range 4 {
		d.keys("s")
	}
	d.keys("S")
	if !strings.Contains(d.view(), "HOSTS▼") {
		t.Fatalf("not sorted by hosts:\n%s", d.view())
	}
	for i := 1; i < len(lp.tb.shown); i++ {
		if lp.items[lp.tb.shown[i-1]].hosts < lp.items[lp.tb.shown[i]].hosts {
			t.Fatalf("row %d has more hosts than the one before", i)
		}
	}
}

// Item 2: the message log keeps every notice, the started task's id too
// (the status bar's "started GSETASK:…" was not logged, so lost once it
// moved on).
func TestStartedTaskInMessageLog(t *testing.T) {
	e, _ := simBackend(t, quietSim(20))
	d := newDriver(t, e, Options{Guard: time.Nanosecond}, 80, 24)
	openHosts(t, d, "app=nginx")
	w := statusWatch(t, d)
	d.until("loaded", func() bool { return w.loaded })
	d.keys("L", "/")
	d.typeText(w.task.ID)
	d.keys("enter")
	mp := topAs[*messagesPage](t, d)
	if len(mp.tb.shown) != 1 || !strings.Contains(d.view(), "started "+w.task.ID) {
		t.Fatalf("the started task is not in the message log:\n%s", d.view())
	}
}

// Item 8: a long Hosts value is read back whole on the review, however
// it wraps at 80 columns (the wrapped field lost a character at each
// line break).
func TestFormLongHostsWhole(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	d := newDriver(t, e, Options{Namespace: "web"}, 80, 40)
	lp := topAs[*labelsPage](t, d)
	d.until("labels", func() bool { return lp.loaded })
	d.keys("n")
	f := topAs[*formPage](t, d)
	var hosts []string
	for i := 1; i <= 24; i++ {
		hosts = append(hosts, fmt.Sprintf("0:10.0.%d.%d", i, 100+i))
	}
	f.vals.Hosts = strings.Join(hosts, ",")
	d.send(tea.KeyMsg{Type: tea.KeyCtrlS})
	rp := topAs[*reviewPage](t, d)
	var joined strings.Builder
	for _, l := range rp.lines {
		joined.WriteString(strings.TrimSpace(ansi.Strip(l)))
	}
	if !strings.Contains(joined.String(), f.vals.Hosts) {
		t.Fatalf("the review lost part of the hosts:\n%s", strings.Join(rp.lines, "\n"))
	}
}

// A live list (host events, the fleet map) says whether the event stream
// that keeps it current is live: not when it closed or its backend stopped
// answering (the list then shows only what came before).
func TestEventsLiveIndicator(t *testing.T) {
	e, _ := simBackend(t, quietSim(20))
	b := &downBackend{Backend: e}
	d := newDriver(t, b, Options{Guard: time.Nanosecond}, 80, 24)
	d.until("live events", func() bool { return d.m.s.eventsLive && d.m.info.Hosts > 0 })
	d.keys("E")
	topAs[*eventsPage](t, d)
	if first := strings.Split(d.view(), "\n")[0]; !strings.Contains(first, "● live") {
		t.Fatalf("top line %q", first)
	}
	b.down.Store(true)
	d.send(infoTickMsg{})
	d.until("info failed", func() bool { return d.m.infoErr != nil })
	if first := strings.Split(d.view(), "\n")[0]; !strings.Contains(first, "○ not live") {
		t.Fatalf("backend gone, top line %q", first)
	}
	b.down.Store(false)
	d.send(infoTickMsg{})
	d.until("info", func() bool { return d.m.infoErr == nil })
	d.send(eventsMsg{closed: true})
	if first := strings.Split(d.view(), "\n")[0]; !strings.Contains(first, "○ not live") {
		t.Fatalf("stream closed, top line %q", first)
	}
}

// Item 12: / works on the task watch too: a host's result is found among
// thousands by host, state, process or message; esc clears the filter
// before it leaves the watch.
func TestWatchFilter(t *testing.T) {
	sc := quietSim(40)
	sc.FailureRate = 0.3
	e, _ := simBackend(t, sc)
	cfg := config.Default().Console
	cfg.ConfirmThreshold = 1000
	d := newDriver(t, e, Options{Guard: time.Nanosecond, Config: cfg}, 100, 30)
	openHosts(t, d, "app=nginx")
	d.keys("a", "o")
	op := topAs[*opPage](t, d)
	d.until("processes", func() bool { return op.loaded })
	op.point(model.OpRestart)
	d.keys("enter", "y")
	d.until("watch", func() bool { w, ok := d.m.top().(*watchPage); return ok && w.loaded })
	w := topAs[*watchPage](t, d)
	d.until("task done", func() bool { return taskFinal(w.task.Status) && len(w.shown) == w.res.len() })
	failed := 0
	for i := range w.res.len() {
		if w.res.state(i) == model.StateFailed {
			failed++
		}
	}
	if failed == 0 || failed == w.res.len() {
		t.Fatalf("%d of %d failed: the test needs both", failed, w.res.len())
	}
	d.filter("state=failed", "state=failed")
	if len(w.shown) != failed || !strings.Contains(d.view(), fmt.Sprintf("%d shown · filter state=failed", failed)) {
		t.Fatalf("state=failed shows %d of %d failed:\n%s", len(w.shown), failed, d.view())
	}
	d.keys("esc") // clears the filter, stays on the watch
	topAs[*watchPage](t, d)
	if len(w.shown) != w.res.len() {
		t.Fatalf("%d of %d shown after esc", len(w.shown), w.res.len())
	}
	// One host among all (typed keys go to the filter, not the list).
	h := w.res.host(w.shown[len(w.shown)-1])
	d.keys("/")
	d.typeText("host=" + h.AgentID() + " ")
	d.keys("enter")
	if len(w.shown) == 0 {
		t.Fatalf("host=%s shows nothing", h.AgentID())
	}
	for _, i := range w.shown {
		if w.res.host(i) != h {
			t.Fatalf("host=%s shows %s", h.AgentID(), w.res.host(i))
		}
	}
	d.keys("enter")
	rp := topAs[*resultPage](t, d)
	if rp.r.Host != h {
		t.Fatalf("enter opened %s", rp.r.Host)
	}
}

// Item 14: the watch's keys are in the footer once, not repeated in a
// help line of the page's own.
func TestWatchHelpOnce(t *testing.T) {
	e, _ := simBackend(t, quietSim(20))
	for _, size := range [][2]int{{80, 24}, {120, 40}} {
		d := newDriver(t, e, Options{Guard: time.Nanosecond}, size[0], size[1])
		openHosts(t, d, "app=nginx")
		w := statusWatch(t, d)
		d.until("loaded", func() bool { return w.loaded })
		v := d.view()
		for _, k := range []string{"f failed only", "enter open", "? help"} {
			if n := strings.Count(v, k); n != 1 {
				t.Fatalf("%dx%d: %q %d times:\n%s", size[0], size[1], k, n, v)
			}
		}
	}
}

// Mouse: a click on a screen's title in the breadcrumb goes back to it
// (the k9s/lazydocker "tabs"), also when the first titles are cut to "…";
// a form is not left by a click.
func TestMouseBreadcrumb(t *testing.T) {
	e, _ := simBackend(t, quietSim(30))
	d := newDriver(t, e, Options{}, 100, 30)
	openHosts(t, d, "app=nginx")
	click := func(x int) {
		d.view() // lays the breadcrumb out
		d.send(tea.MouseMsg{X: x, Y: 0, Button: tea.MouseButtonLeft, Action: tea.MouseActionPress})
	}
	first := strings.Split(d.view(), "\n")[0]
	at := func(title string) int { return ansi.StringWidth(first[:strings.Index(first, " "+title+" ")+1]) }
	click(at("web") + 1)
	lp := topAs[*labelsPage](t, d)
	d.until("labels", func() bool { return lp.loaded })
	d.keys("n")
	topAs[*formPage](t, d)
	click(at("namespaces"))
	topAs[*formPage](t, d)
	d.keys("esc")
	topAs[*labelsPage](t, d)
	click(at("namespaces"))
	topAs[*nsPage](t, d)

	// At 64 columns a deep stack's first titles are "…": the others still
	// answer a click where they are drawn.
	d = newDriver(t, e, Options{}, 64, 16)
	openHosts(t, d, "app=nginx")
	d.keys("t", "E")
	first = strings.Split(d.view(), "\n")[0]
	if !strings.Contains(first, "…") {
		t.Fatalf("breadcrumb not cut: %q", first)
	}
	click(at("recent tasks"))
	topAs[*tasksPage](t, d)
}

// Items 8 and 12: while a filter is typed the footer shows the filter's
// keys, not the page's (s, a, o ... type into the filter then).
func TestFilterFooter(t *testing.T) {
	e, _ := simBackend(t, quietSim(20))
	d := newDriver(t, e, Options{}, 80, 24)
	foot := func() string { l := strings.Split(d.view(), "\n"); return l[len(l)-1] }
	d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })
	d.keys("/")
	if f := foot(); !strings.Contains(f, "enter keep it") || !strings.Contains(f, "esc clear it") || strings.Contains(f, "/ filter") {
		t.Fatalf("namespaces filter footer %q", f)
	}
	d.keys("esc")
	hp := openHosts(t, d, "app=nginx")
	d.keys("/")
	if f := foot(); !strings.Contains(f, "enter keep it") || strings.Contains(f, "s sort") || strings.Contains(f, "select") {
		t.Fatalf("hosts filter footer %q", f)
	}
	d.typeText("sa")
	if hp.filter.value() != "sa" {
		t.Fatalf("filter %q", hp.filter.value())
	}
	d.keys("enter")
	if f := foot(); !strings.Contains(f, "select") {
		t.Fatalf("the page's keys did not come back: %q", f)
	}
}

// Item 13: the screen stack is bounded whatever the way in: M then enter
// from a host's page (map, host, map, host ...) goes back to the map
// already stacked, and past maxStack screens the oldest above the
// namespaces go.
func TestStackBounded(t *testing.T) {
	e, _ := simBackend(t, quietSim(30))
	d := newDriver(t, e, Options{Guard: time.Nanosecond}, 100, 30)
	openHosts(t, d, "app=nginx")
	depth := 0
	for i := range 8 {
		d.keys("M")
		mp := topAs[*fleetMapPage](t, d)
		d.until("map", func() bool { return mp.total > 0 })
		d.keys("enter")
		hp := topAs[*hostPage](t, d)
		d.until("host", func() bool { return hp.loaded })
		if i == 1 {
			depth = len(d.m.stack)
		}
		if i > 1 && len(d.m.stack) != depth {
			t.Fatalf("round %d: %d screens, %d after the second", i, len(d.m.stack), depth)
		}
	}
	for range 2 * maxStack {
		d.send(pushMsg{newEventPage(d.m.s, model.Event{Time: time.Now(), Message: "x"})})
	}
	if len(d.m.stack) > maxStack {
		t.Fatalf("%d screens stacked", len(d.m.stack))
	}
	topAs[*eventPage](t, d)
	if _, ok := d.m.stack[0].(*nsPage); !ok {
		t.Fatalf("the namespaces left the bottom of the stack: %T", d.m.stack[0])
	}
}

// The message log full (maxLog kept, its length no longer grows), a
// message logged while the page is open is still listed, first.
func TestMessagesFullLogListsNew(t *testing.T) {
	s := benchShared(t, 100, 30)
	for i := range maxLog + 5 {
		s.addLog(levelNotice, "", fmt.Sprintf("notice %d", i))
	}
	p := newMessagesPage(s)
	p.SetSize(100, 28)
	s.addLog(levelError, "list hosts", "the newest")
	if v := p.View(); len(p.tb.shown) != maxLog || !strings.Contains(strings.Split(v, "\n")[2], "the newest") {
		t.Fatalf("%d shown, the first row not the newest:\n%s", len(p.tb.shown), v)
	}
}

// The TIME column (15:04:05) sorts by when, not by its text: messages
// logged either side of midnight sort oldest first ascending, 23:59:58
// before 00:00:01, and reversed newest first.
func TestMessagesTimeSortAcrossMidnight(t *testing.T) {
	s := benchShared(t, 100, 30)
	midnight := time.Date(2026, 11, 29, 0, 0, 0, 0, time.Local)
	for _, m := range []struct {
		at   time.Duration
		text string
	}{{-2 * time.Second, "before"}, {-time.Second, "just before"}, {time.Second, "after"}} {
		s.now = func() time.Time { return midnight.Add(m.at) }
		s.addLog(levelNotice, "", m.text)
	}
	p := newMessagesPage(s)
	p.SetSize(100, 28)
	first := func() string { e, _ := p.cursorEntry(); return e.text }
	p.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("s")}) // TIME, ascending
	if v := p.View(); first() != "before" || !strings.Contains(v, "TIME▲") {
		t.Fatalf("TIME ascending starts with %q:\n%s", first(), v)
	}
	p.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("S")}) // descending
	if first() != "after" {
		t.Fatalf("TIME descending starts with %q:\n%s", first(), p.View())
	}
}

// filter opens the page's / input, checks its hint names hint (the
// syntax shown before anything is typed), types text and keeps it.
func (d *driver) filter(hint, text string) {
	d.t.Helper()
	d.keys("/")
	if !strings.Contains(d.view(), hint) {
		d.t.Fatalf("no syntax hint %q:\n%s", hint, d.view())
	}
	d.typeText(text)
	d.keys("enter")
}

// An error's text can come from a server (its answer quoted, an agent's
// words in it): the message log keeps it plain (model.PlainText), as the
// fleet's text is kept, so that an SGR in it (ESC[8m: the rest hidden)
// does not style the log's row, the banner or the copy.
func TestMessageLogPlain(t *testing.T) {
	s := benchShared(t, 100, 30)
	e := s.addLog(levelError, "list \x1b[31mhosts", "server: \x1b[8mhidden\x1b[0m\x07 words")
	if e.full() != "list hosts: server: hidden words" {
		t.Fatalf("logged %q", e.full())
	}
	p := newMessagesPage(s)
	p.SetSize(100, 28)
	if v := p.View(); strings.Contains(v, "\x1b[8m") || !strings.Contains(v, "hidden") {
		t.Fatalf("the log's row:\n%q", v)
	}
}
