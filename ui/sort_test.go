package ui

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/lipgloss"

	"gseproc/backend"
	"gseproc/model"
)

// watchKey is the key a watch column sorts by, read from the result as
// its cell shows it (an empty cell first): the specification the page's
// compareKey is checked against.
func watchKey(title string, r model.Result) (n float64, s string) {
	final := r.State.Final()
	st := r.Status
	if st != nil && !r.State.OK() {
		st = nil
	}
	switch title {
	case "HOST", "PROC":
		panic("compared apart")
	case "STATE":
		if st != nil {
			return 0, string(st.State)
		}
		return 0, string(r.State)
	case "CODE":
		if !final {
			return -1, ""
		}
		return float64(r.Code), ""
	case "TIME":
		if !final {
			return -1, ""
		}
		return float64(r.Duration()), ""
	case "MESSAGE":
		if st != nil {
			return 0, st.Message
		}
		if r.Message == "" && final {
			return 0, model.CodeText(r.Code)
		}
		return 0, r.Message
	}
	if st == nil {
		return -2, ""
	}
	switch title {
	case "CPU":
		return st.CPU, ""
	case "MEM":
		return st.Mem, ""
	case "PID":
		if !st.State.Up() {
			return -1, ""
		}
		return float64(st.PID), ""
	case "UPTIME":
		if !st.State.Up() || st.StartTime.IsZero() || r.Finished.IsZero() {
			return -1, ""
		}
		return float64(r.Finished.Sub(st.StartTime)), ""
	}
	panic(title)
}

// s and S sort the watch by any column; new results arriving in batches
// are placed by that column (only the rows a batch moved are placed
// again), so after every batch the order is the one a sort of every row by
// the column gives (ties in the default order: failures first, host,
// process); the header and the order line say so; the cursor stays on its
// row when the sort changes; s past the last column is the default order
// again. For the restart op's columns and the status op's.
func TestWatchSortByColumn(t *testing.T) {
	for _, op := range []model.OpType{model.OpRestart, model.OpStatus} {
		s := benchShared(t, 140, 40)
		t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
		const hosts = 200
		procs := []string{"web:nginx", "web:app", "gse:agent"}
		task := model.Task{ID: "GSETASK:20261121100000:9", Op: op, Targets: hosts * len(procs), Status: model.TaskRunning, Created: t0}
		rng := rand.New(rand.NewPCG(3, 4))
		msgs := []string{"", "exit 1", "refused", "ok"}
		result := func(i int, p string, st model.ResultState) model.Result {
			r := model.Result{TaskID: task.ID, Host: model.Host{IP: fmt.Sprintf("10.0.%d.%d", i/256, i%256), CloudID: i % 2}, ProcKey: p, Op: op, State: st,
				Message: msgs[rng.IntN(len(msgs))], Started: t0, Finished: t0.Add(time.Duration(rng.IntN(50)) * time.Millisecond)}
			if st == model.StateFailed {
				r.Code = model.CodeCommandFailed + rng.IntN(3)
			}
			if op == model.OpStatus && st == model.StateSuccess {
				ps := []model.ProcState{model.ProcRunning, model.ProcStopped, model.ProcRunning}[rng.IntN(3)]
				r.Status = &model.ProcStatus{State: ps, PID: 100 + rng.IntN(50), CPU: float64(rng.IntN(10)) / 2, Mem: float64(rng.IntN(7)),
					StartTime: t0.Add(-time.Duration(rng.IntN(9)) * time.Second), Message: msgs[rng.IntN(len(msgs))]}
			}
			return r
		}
		w := newWatchPage(s, task)
		w.SetSize(140, 36)
		var first []model.Result
		for i := range hosts / 2 {
			first = append(first, result(i, procs[i%len(procs)], model.StatePending))
		}
		w.Update(watchInitMsg{id: w.id, view: backend.TaskView{Task: task, Results: first}})
		cols := w.cols()
		want := func() []int {
			var out []int
			for i := range w.res.len() {
				out = append(out, i)
			}
			title := cols[w.sort.col].title
			slices.SortFunc(out, func(a, b int) int {
				ra, rb := w.res.result(a), w.res.result(b)
				var c int
				switch title {
				case "HOST":
					c = ra.Host.Order().Compare(rb.Host.Order())
				case "PROC":
					_, na, _ := model.SplitKey(ra.ProcKey)
					_, nb, _ := model.SplitKey(rb.ProcKey)
					c = strings.Compare(na, nb)
				default:
					xa, sa := watchKey(title, ra)
					xb, sb := watchKey(title, rb)
					c = cmp.Or(cmp.Compare(xa, xb), strings.Compare(sa, sb))
				}
				if w.sort.desc {
					c = -c
				}
				return cmp.Or(c, cmp.Compare(rowRank(&ra), rowRank(&rb)), ra.Host.Order().Compare(rb.Host.Order()), strings.Compare(ra.ProcKey, rb.ProcKey))
			})
			return out
		}
		states := []model.ResultState{model.StateRunning, model.StateSuccess, model.StateFailed, model.StateTimeout, model.StateSuccess}
		batch := 0
		for c := range cols {
			for _, rev := range []bool{false, true} {
				// The cursor on a row in the middle: s (or S) keeps it there.
				w.Update(keyMsg("j"))
				w.Update(keyMsg("j"))
				on := w.shown[w.list.cursor]
				if rev {
					w.Update(keyMsg("S"))
				} else {
					w.Update(keyMsg("s"))
				}
				if w.sort.col != c || w.sort.desc != rev {
					t.Fatalf("%s: sort %+v, want column %d desc %v:\n%s", op, w.sort, c, rev, w.View())
				}
				if w.shown[w.list.cursor] != on {
					t.Fatalf("%s sorted by %s: the cursor left its row", op, cols[c].title)
				}
				name := strings.ToLower(cols[c].title)
				arrow := map[bool]string{false: "▲", true: "▼"}[rev]
				if v := w.View(); !strings.Contains(v, cols[c].title+arrow) || !strings.Contains(v, "sorted by "+name+" "+arrow) {
					t.Fatalf("%s: sort by %s %s not shown:\n%s", op, name, arrow, v)
				}
				if !slices.Equal(w.shown, want()) {
					t.Fatalf("%s by %s %s: shown %v, a sort gives %v", op, name, arrow, w.shown, want())
				}
				for range 3 { // live results, placed by the column
					var rs []model.Result
					for range 1 + rng.IntN(40) {
						i := rng.IntN(hosts)
						rs = append(rs, result(i, procs[rng.IntN(len(procs))], states[rng.IntN(len(states))]))
					}
					w.Update(watchBatchMsg{id: w.id, results: rs, ch: make(chan model.Result)})
					batch++
					if got := want(); !slices.Equal(w.shown, got) {
						t.Fatalf("%s by %s %s, batch %d: shown %v, a sort gives %v", op, name, arrow, batch, w.shown, got)
					}
				}
			}
		}
		w.Update(keyMsg("s")) // past the last column: failures first again
		if w.sort.col != -1 || strings.Contains(w.View(), "sorted by") || !strings.Contains(w.View(), "first") {
			t.Fatalf("%s: not back to the default order:\n%s", op, w.View())
		}
		w.Close()
	}
}

// The host page's process table filters with / (column:value, column=value,
// words) and sorts with s/S, shown in its header; esc clears the filter
// before it goes back. The watch opened from the tasks list sorts too.
func TestHostPageProcsSortFilter(t *testing.T) {
	e, _ := simBackend(t, quietSim(20, "web", "db", "gse"))
	hv, err := e.Hosts(context.Background(), backend.HostQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var h backend.HostView
	for _, v := range hv {
		if len(v.Procs) >= 3 {
			h = v
			break
		}
	}
	if len(h.Procs) < 3 {
		t.Fatal("no host with 3 processes")
	}
	d := newDriver(t, e, Options{Guard: time.Nanosecond}, 120, 40)
	d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })
	d.keys("@")
	d.typeText(h.Host.AgentID())
	d.keys("enter")
	hp := topAs[*hostPage](t, d)
	d.until("host", func() bool { return hp.loaded })
	keys := func() []string {
		var out []string
		for _, i := range hp.tb.shown {
			out = append(out, hp.v.Procs[i].Key)
		}
		return out
	}
	all := keys()
	d.keys("s") // PROCESS ascending
	if v := d.view(); !strings.Contains(v, "PROCESS▲") || !strings.Contains(v, "sorted by process ▲") {
		t.Fatalf("sort not shown:\n%s", v)
	}
	if got := keys(); !slices.IsSorted(got) {
		t.Fatalf("not sorted by process: %v", got)
	}
	d.keys("S")
	got := keys()
	if !strings.Contains(d.view(), "PROCESS▼") || !slices.IsSortedFunc(got, func(a, b string) int { return strings.Compare(b, a) }) {
		t.Fatalf("not reversed (%v):\n%s", got, d.view())
	}
	// The rows are drawn in that order.
	v := d.view()
	for i := 1; i < len(got); i++ {
		if strings.Index(v, got[i-1]+" ") > strings.Index(v, got[i]+" ") {
			t.Fatalf("%s drawn after %s:\n%s", got[i-1], got[i], v)
		}
	}
	ns, _, _ := model.SplitKey(all[0])
	d.keys("/")
	if !d.m.top().Capturing() {
		t.Fatal("/ did not start the filter")
	}
	d.typeText("process:" + ns + ":")
	d.keys("enter")
	for _, k := range keys() {
		if !strings.HasPrefix(k, ns+":") {
			t.Fatalf("filter process:%s: shows %s", ns, k)
		}
	}
	if n := len(keys()); n == 0 || n == len(all) {
		t.Fatalf("filter process:%s: shows %d of %d:\n%s", ns, n, len(all), d.view())
	}
	if !strings.Contains(d.view(), "filter process:"+ns+":") {
		t.Fatalf("filter not shown:\n%s", d.view())
	}
	// state=word matches the state's word exactly (drawn with its glyph).
	d.keys("esc", "/")
	d.typeText("state=" + string(h.Procs[0].Status.State))
	d.keys("enter")
	if n := len(keys()); n == 0 {
		t.Fatalf("state=%s shows none:\n%s", h.Procs[0].Status.State, d.view())
	}
	for _, i := range hp.tb.shown {
		if hp.v.Procs[i].Status.State != h.Procs[0].Status.State {
			t.Fatalf("state=%s shows %s", h.Procs[0].Status.State, hp.v.Procs[i].Status.State)
		}
	}
	d.keys("esc") // clears the filter, stays on the page
	if topAs[*hostPage](t, d) != hp || len(keys()) != len(all) {
		t.Fatalf("esc: %d of %d shown", len(keys()), len(all))
	}

	// A filter longer than the screen scrolls inside its one line, what is
	// typed last in sight (the input had no width: the page's text wrapped
	// it over two lines, pushing the table down).
	d.keys("/")
	d.typeText("process:" + strings.Repeat("x", 150) + "END") // within the filter's 200 characters
	for _, l := range strings.Split(d.view(), "\n") {
		if lipgloss.Width(l) > 120 {
			t.Fatalf("a line of %d cells at 120 columns:\n%s", lipgloss.Width(l), d.view())
		}
	}
	if i := strings.Index(d.view(), "xEND"); i < 0 || !strings.HasPrefix(d.view()[strings.LastIndex(d.view()[:i], "\n")+1:], "/x") {
		t.Fatalf("a long filter is not one line ending with what is typed last:\n%s", d.view())
	}
	d.keys("esc", "esc")
	if d.m.top().Capturing() || len(keys()) != len(all) {
		t.Fatalf("esc left the long filter: capturing %v, %d of %d shown", d.m.top().Capturing(), len(keys()), len(all))
	}

	// The watch of a task opened from the tasks list: s sorts it.
	if _, err := e.Operate(context.Background(), backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "web"}}); err != nil {
		t.Fatal(err)
	}
	d.keys("t")
	tp := topAs[*tasksPage](t, d)
	d.until("tasks", func() bool { return tp.loaded && len(tp.tasks) > 0 })
	d.keys("enter")
	wp := topAs[*watchPage](t, d)
	d.until("the watch", func() bool { return wp.loaded && len(wp.shown) > 0 })
	d.keys("s", "s", "s")
	if v := d.view(); !strings.Contains(v, "STATE▲") || !strings.Contains(v, "sorted by state ▲") {
		t.Fatalf("watch sort not shown:\n%s", v)
	}
}

// A filter set, a row's update that leaves its rank (failures first) alone
// is placed again too: a running result whose message changes comes into
// the filter, or leaves it (rows were only placed again when their rank
// changed, so the filter kept what it saw first).
func TestWatchFilterFollowsUpdates(t *testing.T) {
	s := benchShared(t, 120, 40)
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	task := model.Task{ID: "GSETASK:20261121100000:8", Op: model.OpRestart, Targets: 2, Status: model.TaskRunning, Created: t0}
	run := func(ip, msg string) model.Result {
		return model.Result{TaskID: task.ID, Host: model.Host{IP: ip}, ProcKey: "web:nginx", Op: task.Op, State: model.StateRunning, Message: msg}
	}
	w := newWatchPage(s, task)
	w.SetSize(120, 36)
	w.Update(watchInitMsg{id: w.id, view: backend.TaskView{Task: task, Results: []model.Result{run("10.0.0.1", "starting"), run("10.0.0.2", "refused")}}})
	w.filter.input.SetValue("message:refused")
	w.refilter()
	if len(w.shown) != 1 || w.res.host(w.shown[0]).IP != "10.0.0.2" {
		t.Fatalf("message:refused shows %v", w.shown)
	}
	w.Update(watchBatchMsg{id: w.id, results: []model.Result{run("10.0.0.1", "refused"), run("10.0.0.2", "waiting")}, ch: make(chan model.Result)})
	if len(w.shown) != 1 || w.res.host(w.shown[0]).IP != "10.0.0.1" {
		var got []string
		for _, i := range w.shown {
			got = append(got, w.res.host(i).IP+" "+w.res.message(i))
		}
		t.Fatalf("after the update message:refused shows %q, want 10.0.0.1's row alone", got)
	}
}

// A status watch's filter reads the cells as drawn: a process reported
// running with no message has an empty MESSAGE cell, so "success" (the
// result's code text, drawn nowhere in its row) does not find it.
func TestWatchFilterReadsDrawnCells(t *testing.T) {
	s := benchShared(t, 120, 40)
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	task := model.Task{ID: "GSETASK:20261121100000:7", Op: model.OpStatus, Targets: 1, Status: model.TaskDone, Created: t0}
	r := model.Result{TaskID: task.ID, Host: model.Host{IP: "10.0.0.1"}, ProcKey: "web:nginx", Op: task.Op, State: model.StateSuccess,
		Started: t0, Finished: t0.Add(time.Second), Status: &model.ProcStatus{State: model.ProcRunning, PID: 42, StartTime: t0}}
	w := newWatchPage(s, task)
	w.SetSize(120, 36)
	w.Update(watchInitMsg{id: w.id, view: backend.TaskView{Task: task, Results: []model.Result{r}}})
	if v := w.View(); strings.Contains(v, "success") {
		t.Fatalf("the row draws %q:\n%s", "success", v)
	}
	for _, f := range []string{"success", "message:success"} {
		w.filter.input.SetValue(f)
		w.refilter()
		if len(w.shown) != 0 {
			t.Fatalf("filter %q finds the row, whose cells do not say it:\n%s", f, w.View())
		}
	}
	w.filter.input.SetValue("state=running")
	w.refilter()
	if len(w.shown) != 1 {
		t.Fatalf("state=running does not find the running process:\n%s", w.View())
	}
}
