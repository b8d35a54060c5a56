package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"gseproc/backend/engine"
	"gseproc/model"
)

var (
	_ engine.Store          = (*Memory)(nil)
	_ engine.SharedRegistry = (*Memory)(nil)
	_ engine.StatusKeeper   = (*Memory)(nil)
)

func def(ns, name string, hosts ...model.Host) model.ProcessDef {
	p := model.Process{Meta: model.Meta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}}}
	return model.ProcessDef{Process: p, Hosts: hosts}
}

func host(i int) model.Host { return model.Host{IP: fmt.Sprintf("10.0.0.%d", i)} }

func TestProcessesCopyAndConflict(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	d := def("ns", "a", host(1))
	if err := m.PutProcess(ctx, d); err != nil {
		t.Fatal(err)
	}
	d.Process.Meta.Labels["app"] = "changed" // caller's map must not leak into the store
	d.Hosts[0] = host(9)
	got, _ := m.Processes(ctx)
	if len(got) != 1 || got[0].Process.Meta.Labels["app"] != "a" || got[0].Hosts[0] != host(1) || got[0].Rev == 0 {
		t.Fatalf("stored %+v", got)
	}
	stale := got[0]
	stale.Rev++
	if err := m.PutProcess(ctx, stale); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("stale rev: err %v, want ErrConflict", err)
	}
	if err := m.PutProcess(ctx, got[0]); err != nil {
		t.Fatalf("current rev: %v", err)
	}
	if err := m.DeleteProcess(ctx, "ns:a"); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteProcess(ctx, "ns:a"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// TestSharedProcesses: the lent registry reads as Processes does, is lent
// again while nothing changes, and a later write or delete leaves a slice
// already lent unchanged.
func TestSharedProcesses(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	for _, d := range []model.ProcessDef{def("web", "nginx", host(1), host(2)), def("db", "mysql", host(3))} {
		if err := m.PutProcess(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	lent, _ := m.SharedProcesses(ctx)
	copied, _ := m.Processes(ctx)
	if !reflect.DeepEqual(lent, copied) {
		t.Fatalf("shared %+v, copied %+v", lent, copied)
	}
	if again, _ := m.SharedProcesses(ctx); &again[0] != &lent[0] {
		t.Fatal("lent anew while nothing changed")
	}
	before := slices.Clone(lent)
	before[1].Hosts = slices.Clone(lent[1].Hosts)
	web := copied[1]
	web.Hosts = web.Hosts[:1]
	web.Process.Meta.Labels["app"] = "changed"
	if err := m.PutProcess(ctx, web); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteProcess(ctx, "db:mysql"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(lent, before) {
		t.Fatalf("a lent registry changed under its reader: %+v, was %+v", lent, before)
	}
	now, _ := m.SharedProcesses(ctx)
	if len(now) != 1 || now[0].Process.Key() != "web:nginx" || len(now[0].Hosts) != 1 || now[0].Process.Meta.Labels["app"] != "changed" {
		t.Fatalf("after update and delete: %+v", now)
	}
}

func TestNextSeqUniqueAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	a := NewMemory()
	seen := map[uint64]bool{}
	for range 1000 {
		s, _ := a.NextSeq(ctx)
		seen[s] = true
	}
	time.Sleep(2 * time.Millisecond)
	b := NewMemory() // a "restart"
	s, _ := b.NextSeq(ctx)
	if seen[s] {
		t.Fatalf("seq %d repeats after restart", s)
	}
	if len(seen) != 1000 {
		t.Fatalf("%d distinct of 1000", len(seen))
	}
}

func TestTasksEvictOnlyFinished(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(WithKeepTasks(3))
	for i := range 5 {
		st := model.TaskDone
		if i == 0 {
			st = model.TaskRunning // the oldest is unfinished: it must survive
		}
		tk := model.Task{ID: fmt.Sprintf("t%d", i), Status: st}
		if err := m.PutTask(ctx, tk, []model.Target{{Host: host(1), ProcKey: "ns:a"}}); err != nil {
			t.Fatal(err)
		}
	}
	ts, _ := m.Tasks(ctx, 0)
	var ids []string
	for _, tk := range ts {
		ids = append(ids, tk.ID)
	}
	if fmt.Sprint(ids) != "[t4 t3 t0]" {
		t.Fatalf("kept %v, want [t4 t3 t0]", ids)
	}
	if _, _, err := m.Task(ctx, "t1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("evicted task: %v", err)
	}
	if ts, _ := m.Tasks(ctx, 1); len(ts) != 1 || ts[0].ID != "t4" {
		t.Fatalf("limit 1: %+v", ts)
	}
}

func TestResults(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	tg := []model.Target{{Host: host(1), ProcKey: "ns:a"}, {Host: host(2), ProcKey: "ns:a"}}
	if err := m.PutTask(ctx, model.Task{ID: "t"}, append(tg, tg[0])); err == nil {
		t.Fatal("duplicate target accepted")
	}
	if err := m.PutTask(ctx, model.Task{ID: "t"}, tg); err != nil {
		t.Fatal(err)
	}
	if err := m.PutTask(ctx, model.Task{ID: "t"}, tg); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("second put: %v", err)
	}
	if err := m.PutResult(ctx, model.Result{TaskID: "t", Host: host(3), ProcKey: "ns:a"}); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("result for a non-target: %v", err)
	}
	if err := m.PutResult(ctx, model.Result{TaskID: "t", Host: host(2), ProcKey: "ns:a", State: model.StateSuccess, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	rs, _ := m.Results(ctx, "t")
	if len(rs) != 1 || rs[0].Host != host(2) || rs[0].Seq != 1 {
		t.Fatalf("results %+v", rs)
	}
}

func TestEventRing(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(WithKeepEvents(4))
	for i := range 10 {
		_ = m.AppendEvent(ctx, model.Event{Message: fmt.Sprint(i)})
	}
	tests := []struct {
		limit int
		want  string
	}{{0, "[6 7 8 9]"}, {2, "[8 9]"}, {10, "[6 7 8 9]"}}
	for _, tc := range tests {
		evs, _ := m.Events(ctx, tc.limit)
		var got []string
		for _, e := range evs {
			got = append(got, e.Message)
		}
		if fmt.Sprint(got) != tc.want {
			t.Errorf("Events(%d) = %v, want %s", tc.limit, got, tc.want)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(WithKeepTasks(10))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				id := fmt.Sprintf("t%d-%d", g, i)
				tg := []model.Target{{Host: host(g), ProcKey: "ns:a"}}
				// A running task is never evicted, so each call on it succeeds.
				if err := m.PutTask(ctx, model.Task{ID: id, Status: model.TaskRunning}, tg); err != nil {
					t.Errorf("put %s: %v", id, err)
					return
				}
				if err := m.PutResult(ctx, model.Result{TaskID: id, Host: host(g), ProcKey: "ns:a", State: model.StateSuccess}); err != nil {
					t.Errorf("result of %s: %v", id, err)
					return
				}
				if err := m.UpdateTask(ctx, model.Task{ID: id, Status: model.TaskDone}); err != nil {
					t.Errorf("update %s: %v", id, err)
					return
				}
				if err := m.PutProcStatus(ctx, host(g), model.ProcStatus{ProcKey: "ns:a", State: model.ProcRunning}); err != nil {
					t.Errorf("status: %v", err)
					return
				}
				if err := m.AppendEvent(ctx, model.Event{}); err != nil {
					t.Errorf("event: %v", err)
					return
				}
				if ts, err := m.Tasks(ctx, 5); err != nil || len(ts) == 0 || len(ts) > 5 {
					t.Errorf("tasks: %d, %v", len(ts), err)
					return
				}
				if _, err := m.ProcStatuses(ctx); err != nil {
					t.Errorf("statuses: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	ts, _ := m.Tasks(ctx, 0)
	if len(ts) > 10 {
		t.Fatalf("%d tasks kept, bound is 10", len(ts))
	}
}

func TestResultBudget(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(WithKeepResults(5))
	put := func(id string, n int) {
		var tg []model.Target
		for i := range n {
			tg = append(tg, model.Target{Host: host(i), ProcKey: "ns:a"})
		}
		if err := m.PutTask(ctx, model.Task{ID: id, Status: model.TaskRunning}, tg); err != nil {
			t.Fatal(err)
		}
		for _, x := range tg {
			_ = m.PutResult(ctx, model.Result{TaskID: id, Host: x.Host, ProcKey: x.ProcKey, State: model.StateSuccess})
		}
		_ = m.UpdateTask(ctx, model.Task{ID: id, Status: model.TaskDone})
	}
	put("a", 2)
	put("b", 2)
	put("c", 3) // 7 results > 5: a goes, b+c = 5 stay
	ids := func() string {
		ts, _ := m.Tasks(ctx, 0)
		var out []string
		for _, tk := range ts {
			out = append(out, tk.ID)
		}
		return fmt.Sprint(out)
	}
	if got := ids(); got != "[c b]" {
		t.Fatalf("kept %s, want [c b]", got)
	}
	put("d", 9) // alone over the budget: the newest task always stays
	if got := ids(); got != "[d]" {
		t.Fatalf("kept %s, want [d]", got)
	}
}

// TestAuditRing: the memory trail keeps the newest entries up to its
// bound, newest first, with increasing sequence numbers and filters.
func TestAuditRing(t *testing.T) {
	m := NewMemory(WithKeepAudit(5))
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 8 {
		ns := []string{"web"}
		if i%2 == 1 {
			ns = []string{"db"}
		}
		seq, err := m.AppendAudit(ctx, model.AuditEntry{Time: t0.Add(time.Duration(i) * time.Second), Namespaces: ns, Action: model.AuditOperate})
		if err != nil || seq != uint64(i+1) {
			t.Fatalf("append %d: seq %d, %v", i, seq, err)
		}
	}
	all, _ := m.Audit(ctx, model.AuditQuery{})
	if len(all) != 5 || all[0].Seq != 8 || all[4].Seq != 4 {
		t.Fatalf("ring: %+v", all)
	}
	db, _ := m.Audit(ctx, model.AuditQuery{Namespace: "db", Limit: 2})
	if len(db) != 2 || db[0].Seq != 8 || db[1].Seq != 6 {
		t.Fatalf("db, limit 2: %+v", db)
	}
	since, _ := m.Audit(ctx, model.AuditQuery{Since: t0.Add(6 * time.Second)})
	if len(since) != 2 || since[1].Seq != 7 {
		t.Fatalf("since: %+v", since)
	}
	before, _ := m.Audit(ctx, model.AuditQuery{Before: 6})
	if len(before) != 2 || before[0].Seq != 5 {
		t.Fatalf("before 6: %+v", before)
	}
}

// TestTasksEvictByAge: with a max age, a finished task that ended longer
// ago goes at the next put, whatever the count; a recent or unfinished
// one stays.
func TestTasksEvictByAge(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(WithMaxAge(time.Hour))
	now := time.Now()
	for i, tk := range []model.Task{
		{ID: "old", Status: model.TaskDone, Finished: now.Add(-2 * time.Hour)},
		{ID: "recent", Status: model.TaskFailed, Finished: now.Add(-time.Minute)},
		{ID: "running", Status: model.TaskRunning},
		{ID: "new", Status: model.TaskDone, Finished: now},
	} {
		if err := m.PutTask(ctx, tk, []model.Target{{Host: host(i + 1), ProcKey: "ns:a"}}); err != nil {
			t.Fatal(err)
		}
	}
	ts, _ := m.Tasks(ctx, 0)
	var ids []string
	for _, tk := range ts {
		ids = append(ids, tk.ID)
	}
	if fmt.Sprint(ids) != "[new running recent]" {
		t.Fatalf("kept %v, want [new running recent]", ids)
	}
}

// TestProcStatusesKept: the last status of each process on a host is
// kept, replaced by the next of the same process; PutProcStatus keeps a
// copy (the caller's later change does not show), KeepProcStatus the
// status handed (the engine's own, never changed: not a second copy);
// ProcStatuses lists each host's sorted by key, as copies.
func TestProcStatusesKept(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	st := model.ProcStatus{ProcKey: "ns:b", PID: 1}
	if err := m.PutProcStatus(ctx, host(1), st); err != nil {
		t.Fatal(err)
	}
	st.PID = 99 // the caller's: not the store's
	kept := &model.ProcStatus{ProcKey: "ns:a", PID: 2}
	if err := m.KeepProcStatus(ctx, host(1), kept); err != nil {
		t.Fatal(err)
	}
	if err := m.PutProcStatus(ctx, host(2), model.ProcStatus{ProcKey: "ns:a", PID: 3}); err != nil {
		t.Fatal(err)
	}
	if err := m.PutProcStatus(ctx, host(2), model.ProcStatus{ProcKey: "ns:a", PID: 4}); err != nil {
		t.Fatal(err)
	}
	if err := m.KeepProcStatus(ctx, host(2), &model.ProcStatus{}); err == nil {
		t.Fatal("a status without a proc key was kept")
	}
	if got := m.statuses[host(1)]; len(got) != 2 || got[1] != kept {
		t.Fatalf("host 1 keeps %v, want the status handed (%p) second", got, kept)
	}
	all, err := m.ProcStatuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[model.Host][]model.ProcStatus{
		host(1): {{ProcKey: "ns:a", PID: 2}, {ProcKey: "ns:b", PID: 1}},
		host(2): {{ProcKey: "ns:a", PID: 4}},
	}
	if !reflect.DeepEqual(all, want) {
		t.Fatalf("statuses %+v, want %+v", all, want)
	}
	all[host(1)][0].PID = 7 // a copy: the store's stays
	if kept.PID != 2 {
		t.Fatal("ProcStatuses lent the kept status")
	}
}

// TestResultsWhole: each result comes back as it was put, though the
// store keeps what its task's results share once (target, op, state,
// value key, the definition's identity): every field, its times as they
// were (monotonic reading included), its status the one put, an agent id
// other than its target's; a result put again replaces the first; the
// same host and process key with another agent id or cloud are other
// targets.
func TestResultsWhole(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	var tg []model.Target
	for i := range 300 { // enough for the index to probe past collisions
		tg = append(tg, model.Target{Host: host(i % 100), ProcKey: fmt.Sprintf("ns:p%d", i/100), AgentID: fmt.Sprint("agent-", i)})
	}
	tg = append(tg, model.Target{Host: model.Host{IP: host(1).IP, CloudID: 1}, ProcKey: "ns:p0"})
	if err := m.PutTask(ctx, model.Task{ID: "t"}, tg); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	proc := model.ResultProc{ProcName: "p", SetupPath: "/opt/p", FuncID: "f", InstanceID: "i"}
	want := make([]model.Result, len(tg))
	for i, x := range tg {
		r := model.Result{TaskID: "t", Seq: int64(i + 1), Host: x.Host, ProcKey: x.ProcKey, ValueKey: "v", AgentID: x.AgentID,
			Op: model.OpStatus, State: model.StateSuccess, Proc: proc, Hosted: i%2 == 0,
			Status: &model.ProcStatus{ProcKey: x.ProcKey, PID: i}, Started: now, Finished: now.Add(time.Duration(i))}
		switch i % 7 {
		case 1:
			r.State, r.Code, r.Message = model.StateFailed, 829, fmt.Sprint("stopped already ", i)
		case 2:
			r.AgentID = "" // named by cloud:ip
		case 3:
			r.Op, r.ValueKey, r.Proc = model.OpStop, "", model.ResultProc{}
		case 4:
			r.Status, r.Started, r.Finished = nil, time.Time{}, time.Time{}
		}
		want[i] = r
	}
	for i := len(want) - 1; i >= 0; i-- { // put out of order, and some twice
		if i%5 == 0 {
			first := want[i]
			first.State, first.Seq, first.AgentID = model.StateRunning, 0, "other"
			if err := m.PutResult(ctx, first); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.PutResult(ctx, want[i]); err != nil {
			t.Fatal(err)
		}
	}
	got, err := m.Results(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) || got[i].Status != want[i].Status || got[i].Started != want[i].Started {
			t.Fatalf("result %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if m.nResults != len(want) {
		t.Fatalf("%d results counted, want %d (a result put again counted twice)", m.nResults, len(want))
	}
}

// TestResultsEveryField: a result whose every field is set (by reflection,
// so that a field added to model.Result is set too) is read back whole:
// the memory store keeps results as compact rows (taskrec.go), and a
// field its rows forget would be dropped without a word.
func TestResultsEveryField(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	tg := model.Target{Host: host(1), ProcKey: "ns:p", AgentID: "agent-1"}
	if err := m.PutTask(ctx, model.Task{ID: "t"}, []model.Target{tg}); err != nil {
		t.Fatal(err)
	}
	var r model.Result
	fill(t, reflect.ValueOf(&r).Elem(), "Result")
	r.TaskID, r.Host, r.ProcKey = "t", tg.Host, tg.ProcKey
	if err := m.PutResult(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := m.Results(ctx, "t")
	if err != nil || len(got) != 1 {
		t.Fatalf("%d results, %v", len(got), err)
	}
	if !reflect.DeepEqual(got[0], r) {
		t.Fatalf("read back\n got %+v\nwant %+v", got[0], r)
	}
}

// fill sets every field of v (at path) to a value other than its zero.
func fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 11, 29, 1, 2, 3, 4, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x-" + path)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), path+"*")
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				fill(t, v.Field(i), path+"."+f.Name)
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0), path+"[0]")
	case reflect.Map:
		mv := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, path+"key")
		fill(t, e, path+"value")
		mv.SetMapIndex(k, e)
		v.Set(mv)
	default:
		t.Fatalf("%s: a %s field this test cannot fill: teach fill", path, v.Kind())
	}
}

// TestPutTaskCopiesKeepTaskKeeps: PutTask keeps a copy of the targets (the
// caller may change its slice after), KeepTask the targets themselves (the
// engine's run's, which nobody changes: engine.TaskKeeper).
func TestPutTaskCopiesKeepTaskKeeps(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	put := []model.Target{{Host: host(1), ProcKey: "ns:a"}}
	kept := []model.Target{{Host: host(2), ProcKey: "ns:a"}}
	if err := m.PutTask(ctx, model.Task{ID: "put"}, put); err != nil {
		t.Fatal(err)
	}
	if err := m.KeepTask(ctx, model.Task{ID: "kept"}, kept); err != nil {
		t.Fatal(err)
	}
	put[0].ProcKey = "ns:changed"
	if _, tg, err := m.Task(ctx, "put"); err != nil || tg[0].ProcKey != "ns:a" {
		t.Fatalf("PutTask's targets %+v (%v): changed with the caller's slice", tg, err)
	}
	if m.tasks["kept"].targets[0] != kept[0] || &m.tasks["kept"].targets[0] != &kept[0] {
		t.Fatal("KeepTask keeps a copy of the targets, not them")
	}
	if err := m.KeepTask(ctx, model.Task{ID: "dup"}, append(kept, kept[0])); err == nil {
		t.Fatal("KeepTask took a target given twice")
	}
}
