package ui

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/model"
)

// TestWatchOrderMerged: the watch places again only the rows a batch moved
// (merged into the others); after every batch the order must be the one a
// sort of every row gives (failures first, then stopped processes of a
// status, running, pending, successes; by host and process within), the
// failed-only view too, and the cursor the operator moved stays on its row.
func TestWatchOrderMerged(t *testing.T) {
	s := benchShared(t, 120, 40)
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	const hosts = 300
	procs := []string{"web:nginx", "web:app", "gse:agent"}
	task := model.Task{ID: "GSETASK:20261121100000:2", Op: model.OpStatus, Targets: hosts * len(procs), Status: model.TaskRunning, Created: t0}
	rng := rand.New(rand.NewPCG(1, 2))
	result := func(i int, p string, st model.ResultState) model.Result {
		r := model.Result{TaskID: task.ID, Host: model.Host{IP: fmt.Sprintf("10.0.%d.%d", i/256, i%256), CloudID: i % 2}, ProcKey: p, Op: task.Op, State: st,
			Started: t0, Finished: t0.Add(time.Duration(i) * time.Millisecond)}
		if st == model.StateSuccess && rng.IntN(4) == 0 {
			r.Status = &model.ProcStatus{State: model.ProcStopped}
		}
		if st == model.StateFailed {
			r.Code = model.CodeCommandFailed
		}
		return r
	}
	w := newWatchPage(s, task)
	w.SetSize(120, 36)
	// A part of the targets pending at first, the rest arrive with results.
	var first []model.Result
	for i := range hosts / 2 {
		first = append(first, result(i, procs[i%len(procs)], model.StatePending))
	}
	w.Update(watchInitMsg{id: w.id, view: backend.TaskView{Task: task, Results: first}})
	check := func(step string) {
		t.Helper()
		var want []int
		for i := range w.res.len() {
			if !w.failedOnly || stateRank(w.res.state(i)) == 0 {
				want = append(want, i)
			}
		}
		// Ranked from the results themselves, not the ranks the rows keep.
		sort.Slice(want, func(a, b int) bool {
			ra, rb := w.res.result(want[a]), w.res.result(want[b])
			if x, y := rowRank(&ra), rowRank(&rb); x != y {
				return x < y
			}
			if c := ra.Host.Order().Compare(rb.Host.Order()); c != 0 {
				return c < 0
			}
			return ra.ProcKey < rb.ProcKey
		})
		if !slices.Equal(w.shown, want) {
			t.Fatalf("%s: shown %v, a sort gives %v", step, w.shown, want)
		}
	}
	check("init")
	states := []model.ResultState{model.StateRunning, model.StateSuccess, model.StateFailed, model.StateTimeout, model.StateSuccess, model.StateSuccess}
	for batch := range 40 {
		var rs []model.Result
		for range 1 + rng.IntN(60) {
			i := rng.IntN(hosts)
			rs = append(rs, result(i, procs[rng.IntN(len(procs))], states[rng.IntN(len(states))]))
		}
		// Put the cursor on a row now and then: it must stay on it.
		var on int = -1
		if batch%5 == 2 && len(w.shown) > 10 {
			w.Update(keyMsg("j"))
			w.Update(keyMsg("j"))
			on = w.shown[w.list.cursor]
		}
		if batch%13 == 7 {
			w.Update(keyMsg("f")) // failed only, on and off
		}
		w.Update(watchBatchMsg{id: w.id, results: rs, ch: make(chan model.Result)})
		check(fmt.Sprintf("batch %d", batch))
		if on >= 0 && (!w.failedOnly || stateRank(w.res.state(on)) == 0) && w.shown[w.list.cursor] != on {
			t.Fatalf("batch %d: the cursor left its row", batch)
		}
	}
	if w.counts.Total() != w.res.len() {
		t.Fatalf("counts %d of %d rows", w.counts.Total(), w.res.len())
	}
}

// TestWatchOneTable: a watch makes room for its task's rows once: Init's
// read of the results makes it and the page takes that table, even with
// no row yet, instead of a second one made with the page (a task over
// 100,000 hosts held two tables of room for 228,000 rows); results read
// whole (not Init's table) get room for every row first.
func TestWatchOneTable(t *testing.T) {
	s := benchShared(t, 120, 40)
	task := model.Task{ID: "GSETASK:20261121100000:9", Op: model.OpStatus, Targets: 1000, Status: model.TaskRunning}
	w := newWatchPage(s, task)
	if c := w.res.cap(); c != 0 {
		t.Fatalf("a new page has room for %d rows, want none (Init's read makes it)", c)
	}
	rows := newResults(w.rowsWant, true, false)
	w.Update(watchInitMsg{id: w.id, view: backend.TaskView{Task: task}, rows: rows})
	if w.res != rows || w.res.cap() < 1000 {
		t.Fatalf("the page's table is not Init's (room for %d rows)", w.res.cap())
	}
	w2 := newWatchPage(s, task)
	pending, _ := watchResults(task, 10, func(i int) int { return i })
	w2.Update(watchInitMsg{id: w2.id, view: backend.TaskView{Task: task, Results: pending}})
	if w2.res.len() != 10 || w2.res.cap() < 1000 {
		t.Fatalf("results read whole: %d rows, room for %d, want 10 and 1000", w2.res.len(), w2.res.cap())
	}
}

// TestWatchBatchesReuseTheirRoom: the watch reads each batch of live
// results into the room of the one it applied before (apply keeps nothing
// of a batch): a watch of 228,000 results allocated 220 MB of batches,
// the embedded console's most. What it reads is each batch's, whole.
func TestWatchBatchesReuseTheirRoom(t *testing.T) {
	s := benchShared(t, 120, 40)
	task := model.Task{ID: "GSETASK:20261121100000:9", Op: model.OpRestart, Targets: 3, Status: model.TaskRunning,
		Created: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	res := func(ip string, st model.ResultState) model.Result {
		return model.Result{TaskID: task.ID, Host: model.Host{IP: ip}, ProcKey: "web:nginx", Op: task.Op, State: st}
	}
	w := newWatchPage(s, task)
	w.SetSize(120, 36)
	ch := make(chan model.Result, 4)
	first := make([]model.Result, 0, 8)
	first = append(first, res("10.0.0.1", model.StateRunning), res("10.0.0.2", model.StateRunning))
	ch <- res("10.0.0.3", model.StateSuccess)
	ch <- res("10.0.0.1", model.StateFailed)
	cmd := w.Update(watchBatchMsg{id: w.id, results: first, ch: ch})
	if cmd == nil {
		t.Fatal("no read of the next batch")
	}
	msg, ok := cmd().(watchBatchMsg)
	if !ok {
		t.Fatalf("next batch %T", msg)
	}
	if len(msg.results) != 2 || &msg.results[0] != &first[:1][0] {
		t.Fatalf("next batch of %d read into new room, not the applied batch's", len(msg.results))
	}
	if msg.results[0].Host.IP != "10.0.0.3" || msg.results[1].State != model.StateFailed {
		t.Fatalf("next batch %+v", msg.results)
	}
	w.Update(msg)
	if w.res.len() != 3 || w.counts.Failed != 1 || w.counts.Success != 1 || w.counts.Running != 1 {
		t.Fatalf("%d rows, counts %+v", w.res.len(), w.counts)
	}
}

// TestWatchKeepsTheEngineStatuses: a watch over the engine in the
// console's process (backend.SharesStatuses) keeps each result's status as
// the engine handed it, not a copy of it (16 MB of the embedded console
// for a status op over 228,000 processes, besides the engine's and its
// store's); over a backend that does not share them, it copies them.
func TestWatchKeepsTheEngineStatuses(t *testing.T) {
	ctx := context.Background()
	e, _ := simBackendEngine(t, quietSim(30, "web"), config.Default().Engine)
	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := e.Watch(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range ch { // to the task's end
	}
	v, err := e.Task(ctx, task.ID)
	if err != nil || len(v.Results) == 0 {
		t.Fatalf("%d results, %v", len(v.Results), err)
	}
	for _, shares := range []bool{true, false} {
		s := benchShared(t, 120, 40)
		s.be = guard(e)
		if !shares {
			s.be = guard(struct{ backend.Backend }{e}) // no StatusSharer
		}
		w := newWatchPage(s, v.Task)
		init, ok := w.Init()().(watchInitMsg) // static: no clock besides
		if !ok {
			t.Fatal("Init reads nothing but the task")
		}
		w.Update(init)
		if w.res.len() != len(v.Results) {
			t.Fatalf("shares %v: %d rows, want %d", shares, w.res.len(), len(v.Results))
		}
		for _, r := range v.Results {
			i, ok := w.res.find(r.Host, r.ProcKey)
			if !ok || r.Status == nil {
				t.Fatalf("shares %v: %s %s: row %v, status %v", shares, r.Host, r.ProcKey, ok, r.Status)
			}
			got := w.res.result(i).Status
			if same := got == r.Status; same != shares || *got != *r.Status {
				t.Fatalf("shares %v: the row's status %+v (the engine's: %v), want %+v", shares, got, same, r.Status)
			}
		}
	}
}

// TestWatchEndReleasesMemory: the end of a watch's live results gives the
// process's unused memory back (Options.ReleaseMemory, which the embedded
// console sets) once, for a task of releaseMin rows or more; not for a
// smaller one, and not without ReleaseMemory.
func TestWatchEndReleasesMemory(t *testing.T) {
	e, _ := simBackendEngine(t, quietSim(3, "web"), config.Default().Engine)
	for _, tc := range []struct {
		rows    int
		release bool
		want    int
	}{{releaseMin, true, 1}, {releaseMin - 1, true, 0}, {releaseMin, false, 0}} {
		s := benchShared(t, 120, 40)
		s.be = guard(e)
		calls := 0
		if tc.release {
			s.release = func() { calls++ }
		}
		task := model.Task{ID: "GSETASK:20261121100000:10", Op: model.OpStatus, Targets: tc.rows, Status: model.TaskRunning}
		w := newWatchPage(s, task)
		rs := make([]model.Result, tc.rows)
		for i := range rs {
			rs[i] = model.Result{TaskID: task.ID, Host: model.Host{IP: fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)}, ProcKey: "web:nginx",
				Op: task.Op, State: model.StateSuccess}
		}
		ch := make(chan model.Result)
		w.Update(watchBatchMsg{id: w.id, results: rs, ch: ch})
		cmd := w.Update(watchBatchMsg{id: w.id, ch: ch, closed: true})
		var run func(tea.Cmd)
		run = func(c tea.Cmd) {
			if c == nil {
				return
			}
			if b, ok := c().(tea.BatchMsg); ok {
				for _, c := range b {
					run(c)
				}
			}
		}
		run(cmd)
		if calls != tc.want {
			t.Errorf("%d rows, ReleaseMemory set %v: called %d times, want %d", tc.rows, tc.release, calls, tc.want)
		}
	}
}
