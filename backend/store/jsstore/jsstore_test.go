package jsstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/transport/natsembed"
	"gseproc/model"
)

var _ engine.Store = (*Store)(nil)

func natsCfg(t testing.TB, dir string) config.NATSConfig {
	c := config.Default().NATS
	c.Listen = "127.0.0.1:-1"
	c.StoreDir = dir
	return c
}

func startNATS(t testing.TB, cfg config.NATSConfig) *natsembed.Embedded {
	t.Helper()
	e, err := natsembed.StartEmbedded(cfg, natsembed.EmbeddedOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	return e
}

func open(t testing.TB, e *natsembed.Embedded, opts Options) *Store {
	t.Helper()
	nc, err := e.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return openConn(t, nc, opts)
}

func openConn(t testing.TB, nc *nats.Conn, opts Options) *Store {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testPatience)
	defer cancel()
	s, err := New(ctx, js, configured(opts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// configured is opts with the fields a test left zero as the config's
// defaults (OptionsFromConfig of config.Default: the one place they live).
func configured(opts Options) Options {
	d := OptionsFromConfig(config.Default())
	d.Prefix, d.SweepEvery, d.Memory = opts.Prefix, opts.SweepEvery, opts.Memory
	if opts.Replicas != 0 {
		d.Replicas = opts.Replicas
	}
	if opts.MaxEvents != 0 {
		d.MaxEvents = opts.MaxEvents
	}
	if opts.MaxAge != 0 {
		d.MaxAge = opts.MaxAge
	}
	if opts.MaxBytes != 0 {
		d.MaxBytes = opts.MaxBytes
	}
	if opts.KeepAudit != 0 {
		d.KeepAudit = opts.KeepAudit
	}
	return d
}

// TestOptionsRefusedUnset: the fields the config fills are not defaulted
// again: a zero one is refused, named with its config key.
func TestOptionsRefusedUnset(t *testing.T) {
	e := startNATS(t, natsCfg(t, t.TempDir()))
	nc, err := e.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), js, Options{Memory: true})
	if err == nil {
		t.Fatal("zero options accepted")
	}
	for _, want := range []string{"Replicas", "[nats] replicas", "MaxEvents", "MaxAge", "[engine] result_max_age", "MaxBytes", "KeepAudit"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	o := OptionsFromConfig(config.Default())
	o.Memory = true
	s, err := New(context.Background(), js, o)
	if err != nil {
		t.Fatalf("the config's defaults refused: %v", err)
	}
	_ = s.Close()
}

// testPatience bounds a test's store calls (tctx) and a store's opening:
// wide, as a pass returns early anyway. 20 s was missed at load 30-40
// with the race detector (TestAudit's 2,150 appends and a restart:
// "context deadline exceeded"; TestReadYourWritesAcrossStores opening its
// buckets: "bucket gseproc_groups: context deadline exceeded").
const testPatience = 2 * time.Minute

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testPatience)
	t.Cleanup(cancel)
	return ctx
}

func proc(ns, name string) model.ProcessDef {
	return model.ProcessDef{
		Process: model.Process{Meta: model.Meta{Namespace: ns, Name: name, Labels: map[string]string{"a": "b"}},
			Spec: model.Spec{Identity: model.Identity{ProcName: name, SetupPath: "/opt/" + name}}},
		Hosts: []model.Host{{IP: "10.0.0.1"}, {IP: "10.0.0.2", CloudID: 1}},
	}
}

func targets(n int) []model.Target {
	out := make([]model.Target, n)
	for i := range out {
		out[i] = model.Target{Host: model.Host{IP: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)}, ProcKey: "web:nginx"}
	}
	return out
}

func TestRegistry(t *testing.T) {
	s := open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{})
	ctx := tctx(t)
	// Keys with characters KV keys do not allow.
	for _, d := range []model.ProcessDef{proc("web", "nginx"), proc("biz_3", "/usr/local/x/sbin/agent.bin"), proc("db", "mysql 8")} {
		if err := s.PutProcess(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := s.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || ps[0].Process.Key() != "biz_3:/usr/local/x/sbin/agent.bin" || ps[2].Process.Key() != "web:nginx" {
		t.Fatalf("processes %v", ps)
	}
	web := ps[2]
	if web.Rev == 0 || len(web.Hosts) != 2 || web.Process.Meta.Labels["a"] != "b" {
		t.Fatalf("stored %+v", web)
	}
	// Optimistic update: the read revision works once, then conflicts.
	web.Hosts = web.Hosts[:1]
	if err := s.PutProcess(ctx, web); err != nil {
		t.Fatalf("update with the read revision: %v", err)
	}
	if err := s.PutProcess(ctx, web); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("update with a stale revision: %v, want ErrConflict", err)
	}
	if err := s.DeleteProcess(ctx, "db:mysql 8"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteProcess(ctx, "db:mysql 8"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("delete twice: %v, want ErrNotFound", err)
	}
	ps, _ = s.Processes(ctx)
	if len(ps) != 2 || len(ps[1].Hosts) != 1 {
		t.Fatalf("after update and delete: %+v", ps)
	}
}

// TestSharedProcesses: the lent registry reads as Processes does, and a
// later write to the registry leaves a slice already lent unchanged.
func TestSharedProcesses(t *testing.T) {
	s := open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{})
	ctx := tctx(t)
	for _, d := range []model.ProcessDef{proc("web", "nginx"), proc("db", "mysql")} {
		if err := s.PutProcess(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	lent, err := s.SharedProcesses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	copied, _ := s.Processes(ctx)
	if !reflect.DeepEqual(lent, copied) {
		t.Fatalf("shared %+v, copied %+v", lent, copied)
	}
	before := slices.Clone(lent)
	web := copied[1]
	web.Hosts = web.Hosts[:1]
	if err := s.PutProcess(ctx, web); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteProcess(ctx, "db:mysql"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(lent, before) {
		t.Fatalf("a lent registry changed under its reader: %+v, was %+v", lent, before)
	}
	now, _ := s.SharedProcesses(ctx)
	if len(now) != 1 || now[0].Process.Key() != "web:nginx" || len(now[0].Hosts) != 1 {
		t.Fatalf("after update and delete: %+v", now)
	}
}

func TestStatuses(t *testing.T) {
	s := open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{})
	ctx := tctx(t)
	a, b := model.Host{IP: "10.0.0.1"}, model.Host{IP: "fe80::1", CloudID: 2}
	for _, x := range []struct {
		h  model.Host
		st model.ProcStatus
	}{
		{a, model.ProcStatus{ProcKey: "web:z", PID: 1}},
		{a, model.ProcStatus{ProcKey: "web:a", PID: 2}},
		{b, model.ProcStatus{ProcKey: "web:a", PID: 3}},
		{a, model.ProcStatus{ProcKey: "web:z", PID: 4}}, // replaces the first
	} {
		if err := s.PutProcStatus(ctx, x.h, x.st); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutProcStatus(ctx, a, model.ProcStatus{}); err == nil {
		t.Fatal("empty proc key accepted")
	}
	m, err := s.ProcStatuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || len(m[a]) != 2 || m[a][0].ProcKey != "web:a" || m[a][1].PID != 4 || m[b][0].PID != 3 {
		t.Fatalf("statuses %+v", m)
	}
}

func TestTasksAndResults(t *testing.T) {
	s := open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{})
	ctx := tctx(t)
	now := time.Now().UTC().Truncate(time.Second)
	var ids []string
	tgs := targets(4500) // three target chunks
	for i := range 3 {
		seq, err := s.NextSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tk := model.Task{ID: model.FormatTaskID(now, seq), Op: model.OpStart, Targets: len(tgs), Status: model.TaskRunning, Created: now.Add(time.Duration(i) * time.Second)}
		if err := s.PutTask(ctx, tk, tgs); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tk.ID)
	}
	if err := s.PutTask(ctx, model.Task{ID: ids[0]}, nil); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("same id twice: %v", err)
	}
	if err := s.PutTask(ctx, model.Task{ID: "GSETASK:20260101000000:999"}, []model.Target{tgs[0], tgs[0]}); err == nil {
		t.Fatal("duplicate target accepted")
	}
	list, err := s.Tasks(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != ids[2] || list[1].ID != ids[1] {
		t.Fatalf("Tasks(2) = %v, want newest first %v", list, ids[1:])
	}
	tk, got, err := s.Task(ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if tk.ID != ids[1] || len(got) != len(tgs) || got[4499] != tgs[4499] || got[2000] != tgs[2000] {
		t.Fatalf("Task: %+v with %d targets", tk, len(got))
	}
	if _, _, err := s.Task(ctx, "GSETASK:20000101000000:1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("unknown task: %v", err)
	}

	tk.Status, tk.Finished, tk.Counts = model.TaskDone, now, model.Counts{Success: 2}
	if err := s.UpdateTask(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateTask(ctx, model.Task{ID: "GSETASK:20000101000000:1"}); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("update unknown: %v", err)
	}
	if tk2, _, _ := s.Task(ctx, ids[1]); tk2.Status != model.TaskDone || tk2.Counts.Success != 2 {
		t.Fatalf("after update: %+v", tk2)
	}
	// The record alone (engine.TaskRecordReader) is Task's task.
	if rec, err := s.TaskRecord(ctx, ids[1]); err != nil || rec.ID != ids[1] || rec.Status != model.TaskDone || rec.Counts.Success != 2 || rec.Targets != len(tgs) {
		t.Fatalf("TaskRecord after update: %+v, %v", rec, err)
	}
	if _, err := s.TaskRecord(ctx, "GSETASK:20000101000000:1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("TaskRecord of an unknown task: %v", err)
	}

	// Results: put out of order, replaced as they progress, read in target order.
	for _, i := range []int{3000, 5, 0} {
		r := model.Result{TaskID: ids[1], Host: tgs[i].Host, ProcKey: tgs[i].ProcKey}
		if err := s.PutResult(ctx, r); err != nil {
			t.Fatal(err)
		}
		r.State, r.Code, r.Seq = model.StateSuccess, 0, int64(i+1)
		if err := s.PutResult(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutResult(ctx, model.Result{TaskID: ids[1], Host: model.Host{IP: "1.2.3.4"}, ProcKey: "x:y"}); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("result for a non-target: %v", err)
	}
	if err := s.PutResult(ctx, model.Result{TaskID: "GSETASK:20000101000000:1"}); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("result for an unknown task: %v", err)
	}
	rs, err := s.Results(ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || rs[0].Host != tgs[0].Host || rs[1].Host != tgs[5].Host || rs[2].Seq != 3001 || rs[2].State != model.StateSuccess {
		t.Fatalf("results %+v", rs)
	}
	if rs, _ := s.Results(ctx, ids[0]); len(rs) != 0 {
		t.Fatalf("other task's results leak: %v", rs)
	}
	if _, err := s.Results(ctx, "GSETASK:20000101000000:1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("results of unknown task: %v", err)
	}
}

// TestRetentionByAge: finished tasks are deleted, with their targets and
// results, once they ended more than MaxAge ago; unfinished ones never;
// a task stays readable until then.
func TestRetentionByAge(t *testing.T) {
	s := open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{MaxAge: time.Hour, SweepEvery: time.Hour})
	ctx := tctx(t)
	now := time.Now()
	put := func(seq uint64, st model.TaskStatus, finished time.Time) string {
		id := model.FormatTaskID(now, seq)
		tg := targets(2)
		if err := s.PutTask(ctx, model.Task{ID: id, Status: model.TaskRunning, Created: now.Add(-3 * time.Hour)}, tg); err != nil {
			t.Fatal(err)
		}
		if err := s.PutResult(ctx, model.Result{TaskID: id, Host: tg[0].Host, ProcKey: tg[0].ProcKey}); err != nil {
			t.Fatal(err)
		}
		if err := s.UpdateTask(ctx, model.Task{ID: id, Status: st, Created: now.Add(-3 * time.Hour), Finished: finished}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	old := put(1, model.TaskDone, now.Add(-2*time.Hour))
	recent := put(2, model.TaskFailed, now.Add(-30*time.Minute))
	running := put(3, model.TaskRunning, time.Time{})

	n, err := s.sweep(ctx, now)
	if err != nil || n != 1 {
		t.Fatalf("sweep deleted %d (%v), want 1", n, err)
	}
	if _, _, err := s.Task(ctx, old); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("task ended 2h ago with max age 1h: %v, want ErrNotFound", err)
	}
	for _, id := range []string{recent, running} {
		if _, _, err := s.Task(ctx, id); err != nil {
			t.Fatalf("task %s within its retention: %v", id, err)
		}
		if rs, err := s.Results(ctx, id); err != nil || len(rs) != 1 {
			t.Fatalf("results of %s: %d, %v", id, len(rs), err)
		}
	}
	st, _ := s.on().js.Stream(ctx, "KV_gseproc_results")
	info, _ := st.Info(ctx)
	if info.State.Msgs != 2 {
		t.Fatalf("%d results left, want those of the 2 kept tasks", info.State.Msgs)
	}
	// Hours later the running task is still kept; the other goes.
	if n, err := s.sweep(ctx, now.Add(24*time.Hour)); err != nil || n != 1 {
		t.Fatalf("later sweep deleted %d (%v), want 1", n, err)
	}
	if _, _, err := s.Task(ctx, running); err != nil {
		t.Fatalf("unfinished task deleted: %v", err)
	}
}

// TestRetentionBySize: over MaxBytes, the oldest finished tasks go first
// until the buckets fit; and the sweep runs by itself every SweepEvery.
func TestRetentionBySize(t *testing.T) {
	s := open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{MaxBytes: 64 << 10, SweepEvery: 50 * time.Millisecond})
	ctx := tctx(t)
	now := time.Now()
	var ids []string
	for i := range 40 {
		id := model.FormatTaskID(now, uint64(i+1))
		ids = append(ids, id)
		tg := targets(20)
		if err := s.PutTask(ctx, model.Task{ID: id, Status: model.TaskDone, Created: now, Finished: now.Add(time.Duration(i) * time.Second)}, tg); err != nil {
			t.Fatal(err)
		}
		for _, x := range tg {
			if err := s.PutResult(ctx, model.Result{TaskID: id, Host: x.Host, ProcKey: x.ProcKey, Message: strings.Repeat("x", 100)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		size, err := s.size(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if size <= 64<<10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("buckets hold %d bytes, over the cap of %d, after 20s", size, 64<<10)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, _, err := s.Task(ctx, ids[0]); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("oldest task kept over the size cap: %v", err)
	}
	if _, _, err := s.Task(ctx, ids[len(ids)-1]); err != nil {
		t.Fatalf("newest task deleted: %v", err)
	}
}

func TestEvents(t *testing.T) {
	s := open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{MaxEvents: 5})
	ctx := tctx(t)
	if evs, err := s.Events(ctx, 10); err != nil || len(evs) != 0 {
		t.Fatalf("empty: %v %v", evs, err)
	}
	for i := range 8 {
		if err := s.AppendEvent(ctx, model.Event{Host: model.Host{IP: "10.0.0.1"}, Kind: model.EventRestartSuccess, Message: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		limit int
		want  string
	}{{0, "34567"}, {3, "567"}, {100, "34567"}, {1, "7"}}
	for _, tt := range tests {
		evs, err := s.Events(ctx, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, e := range evs {
			got += e.Message
		}
		if got != tt.want {
			t.Errorf("Events(%d) = %q, want %q (newest last)", tt.limit, got, tt.want)
		}
	}
}

// TestRestart: a NATS server restarted on the same store dir keeps everything.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := natsCfg(t, dir)
	e := startNATS(t, cfg)
	s := open(t, e, Options{})
	ctx := tctx(t)
	if err := s.PutProcess(ctx, proc("web", "nginx")); err != nil {
		t.Fatal(err)
	}
	seq, _ := s.NextSeq(ctx)
	id := model.FormatTaskID(time.Now(), seq)
	tg := targets(3)
	// Two hosts named by agent id: the naming is kept with the targets and
	// the results (it is not part of a target's identity).
	tg[1].AgentID, tg[2].AgentID = "0200000000000000000000000000000001", "0200000000000000000000000000000002"
	if err := s.PutTask(ctx, model.Task{ID: id, Status: model.TaskRunning}, tg); err != nil {
		t.Fatal(err)
	}
	if err := s.PutResult(ctx, model.Result{TaskID: id, Host: tg[1].Host, ProcKey: tg[1].ProcKey, AgentID: tg[1].AgentID, State: model.StateSuccess, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvent(ctx, model.Event{Kind: model.EventGiveUp}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutProcStatus(ctx, tg[0].Host, model.ProcStatus{ProcKey: "web:nginx"}); err != nil {
		t.Fatal(err)
	}
	e.Shutdown()

	s2 := open(t, startNATS(t, cfg), Options{})
	if ps, err := s2.Processes(ctx); err != nil || len(ps) != 1 {
		t.Fatalf("processes after restart: %v %v", ps, err)
	}
	if seq2, err := s2.NextSeq(ctx); err != nil || seq2 <= seq {
		t.Fatalf("NextSeq after restart = %d (%v), want > %d", seq2, err, seq)
	}
	if _, got, err := s2.Task(ctx, id); err != nil || len(got) != 3 || got[1] != tg[1] || got[0].AgentID != "" {
		t.Fatalf("task after restart: %v %v", got, err)
	}
	if rs, err := s2.Results(ctx, id); err != nil || len(rs) != 1 || rs[0].Host != tg[1].Host || rs[0].AgentID != tg[1].AgentID {
		t.Fatalf("results after restart: %v %v", rs, err)
	}
	if evs, err := s2.Events(ctx, 0); err != nil || len(evs) != 1 {
		t.Fatalf("events after restart: %v %v", evs, err)
	}
	if m, err := s2.ProcStatuses(ctx); err != nil || len(m) != 1 {
		t.Fatalf("statuses after restart: %v %v", m, err)
	}
	// The results of a task created before the restart can still be put
	// (the target index is read back from the store).
	if err := s2.PutResult(ctx, model.Result{TaskID: id, Host: tg[2].Host, ProcKey: tg[2].ProcKey, State: model.StateFailed}); err != nil {
		t.Fatal(err)
	}
}

// TestTwoInstances: two stores on one server share data, and NextSeq from
// both, concurrently, never repeats.
func TestTwoInstances(t *testing.T) {
	e := startNATS(t, natsCfg(t, t.TempDir()))
	a, b := open(t, e, Options{}), open(t, e, Options{})
	ctx := tctx(t)
	if err := a.PutProcess(ctx, proc("web", "nginx")); err != nil {
		t.Fatal(err)
	}
	id := model.FormatTaskID(time.Now(), 1)
	tg := targets(2)
	if err := a.PutTask(ctx, model.Task{ID: id}, tg); err != nil {
		t.Fatal(err)
	}
	if err := b.PutResult(ctx, model.Result{TaskID: id, Host: tg[1].Host, ProcKey: tg[1].ProcKey}); err != nil {
		t.Fatalf("b puts a result of a's task: %v", err)
	}
	if rs, _ := a.Results(ctx, id); len(rs) != 1 {
		t.Fatalf("a sees %d results of b", len(rs))
	}
	if ps, _ := b.Processes(ctx); len(ps) != 1 {
		t.Fatalf("b sees %d processes", len(ps))
	}

	const per = 100
	var mu sync.Mutex
	var seqs []uint64
	var wg sync.WaitGroup
	for _, s := range []*Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				n, err := s.NextSeq(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seqs = append(seqs, n)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for i := 1; i < len(seqs); i++ {
		if seqs[i] == seqs[i-1] {
			t.Fatalf("NextSeq returned %d twice", seqs[i])
		}
	}
	if len(seqs) != 4*per {
		t.Fatalf("%d seqs", len(seqs))
	}
}

func BenchmarkPutResult(b *testing.B) {
	e := startNATS(b, natsCfg(b, b.TempDir()))
	s := open(b, e, Options{})
	ctx := context.Background()
	const n = 10000
	tg := targets(n)
	var seq uint64
	b.Run("sequential", func(b *testing.B) {
		seq++
		id := model.FormatTaskID(time.Now(), seq)
		if err := s.PutTask(ctx, model.Task{ID: id}, tg); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := range b.N {
			t := tg[i%n]
			if err := s.PutResult(ctx, model.Result{TaskID: id, Host: t.Host, ProcKey: t.ProcKey, State: model.StateSuccess, Proc: model.ResultProc{ProcName: "p"}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("10k-targets-64-writers", func(b *testing.B) {
		for range b.N {
			seq++
			id := model.FormatTaskID(time.Now(), seq)
			if err := s.PutTask(ctx, model.Task{ID: id}, tg); err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			next := make(chan model.Target)
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for t := range next {
						if err := s.PutResult(ctx, model.Result{TaskID: id, Host: t.Host, ProcKey: t.ProcKey, State: model.StateSuccess, Proc: model.ResultProc{ProcName: "p"}}); err != nil {
							b.Error(err)
						}
					}
				}()
			}
			for _, t := range tg {
				next <- t
			}
			close(next)
			wg.Wait()
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/10k-results")
	})
}

// TestIndexCacheHoldsRunningTasks: a task's target index is cached from
// PutTask until the task is stored complete, so the cache's room goes to
// running tasks; a result put later still finds its target.
func TestIndexCacheHoldsRunningTasks(t *testing.T) {
	s := open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{Memory: true})
	ctx := tctx(t)
	tgs := targets(3)
	task := model.Task{ID: "GSETASK:20260101000000:1", Op: model.OpStatus, Targets: len(tgs), Status: model.TaskRunning}
	if err := s.PutTask(ctx, task, tgs); err != nil {
		t.Fatal(err)
	}
	cached := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.index[task.ID] != nil
	}
	if !cached() {
		t.Fatal("index of a new task not cached")
	}
	task.Status = model.TaskRunning
	if err := s.UpdateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	if !cached() {
		t.Fatal("index dropped while the task runs")
	}
	task.Status = model.TaskDone
	if err := s.UpdateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	if cached() {
		t.Fatal("index of a complete task still cached")
	}
	r := model.Result{TaskID: task.ID, Host: tgs[2].Host, ProcKey: tgs[2].ProcKey, State: model.StateSuccess, Seq: 1}
	if err := s.PutResult(ctx, r); err != nil {
		t.Fatal(err)
	}
	if rs, err := s.Results(ctx, task.ID); err != nil || len(rs) != 1 || rs[0].Host != tgs[2].Host {
		t.Fatalf("results %+v (%v)", rs, err)
	}
}

// TestIndexCacheBounds: the target index cache keeps every task of many
// running at once (more than the 64 it once held: an operate_proc load
// runs hundreds), drops others only past its bounds of tasks and targets,
// always keeps the task just added, and counts what it holds.
func TestIndexCacheBounds(t *testing.T) {
	s := &Store{index: map[string]*taskIndex{}}
	one := func(n int) *taskIndex {
		tgs := make([]model.Target, n)
		for i := range n {
			tgs[i] = model.Target{Host: model.Host{IP: fmt.Sprintf("10.0.%d.%d", i/256, i%256)}, ProcKey: "ns:p"}
		}
		pairs, _ := newTargetPairs(tgs)
		return &taskIndex{targets: pairs}
	}
	held := func() (n int) {
		for _, idx := range s.index {
			n += len(idx.targets)
		}
		return n
	}
	for i := range 500 {
		s.cacheIndex(fmt.Sprintf("T%d", i), one(2))
	}
	if len(s.index) != 500 || s.indexTargets != 1000 || held() != 1000 {
		t.Fatalf("500 running tasks: %d cached, %d targets counted, %d held", len(s.index), s.indexTargets, held())
	}
	s.cacheIndex("T7", one(3)) // again, larger: replaced, not counted twice
	if len(s.index) != 500 || s.indexTargets != 1001 || held() != 1001 {
		t.Fatalf("replaced: %d cached, %d counted, %d held", len(s.index), s.indexTargets, held())
	}
	for i := 500; i < indexMaxTasks+100; i++ {
		s.cacheIndex(fmt.Sprintf("T%d", i), one(1))
	}
	last := fmt.Sprintf("T%d", indexMaxTasks+99)
	if len(s.index) != indexMaxTasks || s.index[last] == nil || s.indexTargets != held() {
		t.Fatalf("past the task bound: %d cached (want %d), last kept %v, %d counted, %d held",
			len(s.index), indexMaxTasks, s.index[last] != nil, s.indexTargets, held())
	}
	big := one(indexMaxTargets - 10)
	s.cacheIndex("big", big)
	if s.index["big"] == nil || s.indexTargets > indexMaxTargets || s.indexTargets != held() {
		t.Fatalf("past the target bound: big kept %v, %d counted, %d held", s.index["big"] != nil, s.indexTargets, held())
	}
	s.cacheIndex("huge", one(indexMaxTargets+1))
	if len(s.index) != 1 || s.index["huge"] == nil || s.indexTargets != indexMaxTargets+1 {
		t.Fatalf("one task past the target bound alone: %d cached, %d counted", len(s.index), s.indexTargets)
	}
	s.dropIndex("huge")
	if len(s.index) != 0 || s.indexTargets != 0 {
		t.Fatalf("dropped: %d cached, %d counted", len(s.index), s.indexTargets)
	}
}

// TestHostileKeys: keys built from hostile input stay short, so NATS never
// closes the store's connection for "maximum control line exceeded"; a
// status for a host without a canonical identity is refused.
func TestHostileKeys(t *testing.T) {
	s := open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{})
	ctx := tctx(t)
	long := strings.Repeat("%z", 3000)
	if _, _, err := s.Task(ctx, "GSETASK:"+long); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("task with a 6000-byte id: %v, want not found", err)
	}
	if err := s.DeleteProcess(ctx, "ns:"+long); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("delete a 6000-byte key: %v, want not found", err)
	}
	if err := s.PutProcStatus(ctx, model.Host{IP: "fe80::1%" + long}, model.ProcStatus{ProcKey: "web:a"}); err == nil {
		t.Fatal("status for a zoned host accepted")
	}
	if got := enc(long); len(got) > maxToken {
		t.Fatalf("enc: %d bytes", len(got))
	}
	if enc(long) == enc(long+"x") {
		t.Fatal("enc: two long inputs share a key")
	}
	// The connection is still usable.
	if err := s.PutProcStatus(ctx, model.Host{IP: "10.0.0.1"}, model.ProcStatus{ProcKey: "web:a"}); err != nil {
		t.Fatal(err)
	}
	m, err := s.ProcStatuses(ctx)
	if err != nil || len(m) != 1 {
		t.Fatalf("statuses %v, %v", m, err)
	}
}

// BenchmarkPutResults stores the results of a task of 10,000 targets in
// one batch (the engine's writer), against BenchmarkPutResult's one by one.
func BenchmarkPutResults(b *testing.B) {
	e := startNATS(b, natsCfg(b, b.TempDir()))
	s := open(b, e, Options{})
	ctx := context.Background()
	const n = 10000
	tg := targets(n)
	for i := range b.N {
		id := model.FormatTaskID(time.Now(), uint64(i+1))
		if err := s.PutTask(ctx, model.Task{ID: id}, tg); err != nil {
			b.Fatal(err)
		}
		rs := make([]model.Result, n)
		for j, t := range tg {
			rs[j] = model.Result{TaskID: id, Host: t.Host, ProcKey: t.ProcKey, State: model.StateSuccess, Proc: model.ResultProc{ProcName: "p"}}
		}
		if err := s.PutResults(ctx, rs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/10k-results")
}

// TestNextSeqBlocksNeverOverlap: two stores on the same buckets (two
// servers) each hand out numbers from blocks they reserved; over more
// than a block each, interleaved, no number repeats and each store's
// numbers increase; a store opened later starts above all of them.
func TestNextSeqBlocksNeverOverlap(t *testing.T) {
	e := startNATS(t, natsCfg(t, t.TempDir()))
	a, b := open(t, e, Options{}), open(t, e, Options{})
	ctx := tctx(t)
	seen := map[uint64]bool{}
	last := map[*Store]uint64{}
	var top uint64
	for i := range 3 * seqBlock {
		s := a
		if i%3 == 0 {
			s = b
		}
		n, err := s.NextSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seen[n] {
			t.Fatalf("call %d: %d handed out twice", i, n)
		}
		if n <= last[s] {
			t.Fatalf("call %d: %d after %d from the same store", i, n, last[s])
		}
		seen[n], last[s], top = true, n, max(top, n)
	}
	if n, err := open(t, e, Options{}).NextSeq(ctx); err != nil || n <= top {
		t.Fatalf("a later store's first number %d (%v), want above %d", n, err, top)
	}
}

// BenchmarkPutProcStatuses stores 10,000 statuses never stored before in
// one batch, as the writer stores those of the first op over a fleet,
// while a status watch reads them back, as the engine's does: the
// embedded NATS server's work is counted with the store's (its CPU and
// allocations are this process's).
func BenchmarkPutProcStatuses(b *testing.B) {
	e := startNATS(b, natsCfg(b, b.TempDir()))
	s := open(b, e, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := s.WatchProcStatuses(ctx)
	if err != nil {
		b.Fatal(err)
	}
	const n = 10000
	start := time.Date(2026, 11, 29, 3, 0, 0, 123456789, time.UTC)
	b.ReportAllocs()
	for i := range b.N {
		sts := make([]engine.HostStatus, n)
		for j := range sts {
			sts[j] = engine.HostStatus{Host: model.Host{IP: fmt.Sprintf("10.%d.%d.%d", i%250, j/250, j%250)},
				Status: model.ProcStatus{ProcKey: "gse:bkmonitorbeat", ProcName: "bkmonitorbeat", State: model.ProcRunning,
					PID: 1000 + j, Hosted: true, StartTime: start, RegisterTime: 1_764_000_000, ReportTime: 1_764_385_200,
					CPU: 1.25, Mem: 0.5, MemRSS: 40 << 20, Version: "3.6.1", Cmdline: "/usr/local/gse/plugins/bin/bkmonitorbeat -c bkmonitorbeat.conf", Threads: 12}}
		}
		if err := s.PutProcStatuses(ctx, sts); err != nil {
			b.Fatal(err)
		}
		for range n { // every one read back by the watch
			<-ch
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/10k-statuses")
}
