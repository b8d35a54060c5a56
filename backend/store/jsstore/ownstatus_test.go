package jsstore

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"gseproc/backend/engine"
	"gseproc/model"
)

// TestStatusWatchOwnWrites: the status watch of a store sends every
// status stored, its own and another store's, in the order they were
// stored and as they were written; its own are handed on as written (not
// decoded again), and none is kept once the watch read it or ended.
func TestStatusWatchOwnWrites(t *testing.T) {
	e := startNATS(t, natsCfg(t, t.TempDir()))
	a, b := open(t, e, Options{}), open(t, e, Options{})
	ctx, cancel := context.WithCancel(tctx(t))
	defer cancel()
	ch, err := a.WatchProcStatuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	status := func(i int) engine.HostStatus {
		return engine.HostStatus{Host: model.Host{IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)},
			Status: model.ProcStatus{ProcKey: "web:nginx", ProcName: "nginx", State: model.ProcRunning, PID: 100 + i,
				StartTime: start, ReportTime: int64(i), Cmdline: fmt.Sprintf("nginx -g 'daemon off;' #%d", i), CPU: 0.5}}
	}
	var want []engine.HostStatus
	var mine []bool // want[i] written by a
	for round := range 3 {
		var own, other []engine.HostStatus
		for i := range 300 {
			own = append(own, status(round*1000+i))
			other = append(other, status(round*1000+500+i))
		}
		if err := a.PutProcStatuses(ctx, own); err != nil {
			t.Fatal(err)
		}
		if err := b.PutProcStatuses(ctx, other); err != nil {
			t.Fatal(err)
		}
		want = append(append(want, own...), other...)
		for range own {
			mine = append(mine, true)
		}
		for range other {
			mine = append(mine, false)
		}
	}
	for i, w := range want {
		select {
		case got := <-ch:
			if !reflect.DeepEqual(got.Host, w.Host) || !got.Status.StartTime.Equal(w.Status.StartTime) {
				t.Fatalf("status %d: got %+v, want %+v", i, got, w)
			}
			// a's own, handed on as written: its texts are the very ones
			// written (a decoded one's are new); b's are decoded.
			if same := unsafe.StringData(got.Status.Cmdline) == unsafe.StringData(w.Status.Cmdline); same != mine[i] {
				t.Fatalf("status %d (a's: %v): handed on as written: %v", i, mine[i], same)
			}
			got.Status.StartTime, w.Status.StartTime = time.Time{}, time.Time{}
			if got.Status != w.Status {
				t.Fatalf("status %d: got %+v, want %+v", i, got.Status, w.Status)
			}
		case <-time.After(testPatience):
			t.Fatalf("status %d of %d not watched", i, len(want))
		}
	}
	if left := ownLeft(a); left != 0 {
		t.Fatalf("%d own statuses kept after the watch read them", left)
	}
	cancel()
	for range ch {
	}
	for deadline := time.Now().Add(testPatience); ; time.Sleep(10 * time.Millisecond) {
		a.own.mu.Lock()
		gone := a.own.watchers == 0 && a.own.m == nil
		a.own.mu.Unlock()
		if gone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the own statuses kept after the watch ended")
		}
	}
	// With no watch, a write keeps nothing for one.
	if err := a.PutProcStatuses(tctx(t), []engine.HostStatus{status(9999)}); err != nil {
		t.Fatal(err)
	}
	a.own.mu.Lock()
	defer a.own.mu.Unlock()
	if a.own.m != nil {
		t.Fatal("a status kept for a watch while none runs")
	}
}

// TestStatusWatchOwnWritesTwoWatches: with two status watches on one
// store, each sends every status the store wrote, in order and as
// written: the one that reads a status first takes the kept one, the
// other decodes it (a kept status is handed to one watch only).
func TestStatusWatchOwnWritesTwoWatches(t *testing.T) {
	e := startNATS(t, natsCfg(t, t.TempDir()))
	a := open(t, e, Options{})
	ctx, cancel := context.WithCancel(tctx(t))
	defer cancel()
	var chs []<-chan engine.HostStatus
	for range 2 {
		ch, err := a.WatchProcStatuses(ctx)
		if err != nil {
			t.Fatal(err)
		}
		chs = append(chs, ch)
	}
	var want []engine.HostStatus
	for i := range 200 {
		want = append(want, engine.HostStatus{Host: model.Host{IP: fmt.Sprintf("10.1.0.%d", i+1)},
			Status: model.ProcStatus{ProcKey: "web:nginx", ProcName: "nginx", State: model.ProcRunning, PID: 100 + i,
				ReportTime: int64(i), Cmdline: fmt.Sprintf("nginx #%d", i)}})
	}
	if err := a.PutProcStatuses(ctx, want); err != nil {
		t.Fatal(err)
	}
	for w, ch := range chs {
		for i, x := range want {
			select {
			case got := <-ch:
				if got.Host != x.Host || got.Status != x.Status {
					t.Fatalf("watch %d, status %d: got %+v, want %+v", w, i, got, x)
				}
			case <-time.After(testPatience):
				t.Fatalf("watch %d: status %d of %d not watched", w, i, len(want))
			}
		}
	}
	if left := ownLeft(a); left != 0 {
		t.Fatalf("%d own statuses kept after both watches read them", left)
	}
}

// TestStatusWatchSkipsOwnRun: a write of many statuses while one status
// watch runs is not read back through the watch's consumer: the watch
// hands the statuses on itself, as written and in stream order, and a
// status another store writes in between is read as before.
func TestStatusWatchSkipsOwnRun(t *testing.T) {
	e := startNATS(t, natsCfg(t, t.TempDir()))
	a, b := open(t, e, Options{}), open(t, e, Options{})
	ctx, cancel := context.WithCancel(tctx(t))
	defer cancel()
	ch, err := a.WatchProcStatuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sw := a.swatch.one()
	if sw == nil {
		t.Fatal("no status watch registered")
	}
	status := func(i int) engine.HostStatus {
		return engine.HostStatus{Host: model.Host{IP: fmt.Sprintf("10.2.%d.%d", i/250, i%250+1)},
			Status: model.ProcStatus{ProcKey: "web:nginx", ProcName: "nginx", State: model.ProcRunning, PID: 100 + i,
				ReportTime: int64(i), Cmdline: fmt.Sprintf("nginx #%d", i)}}
	}
	batch := func(from, n int) []engine.HostStatus {
		var l []engine.HostStatus
		for i := range n {
			l = append(l, status(from+i))
		}
		return l
	}
	expect := func(what string, want []engine.HostStatus, asWritten bool) {
		t.Helper()
		for i, w := range want {
			select {
			case got := <-ch:
				if got.Host != w.Host || got.Status != w.Status {
					t.Fatalf("%s: status %d: got %+v, want %+v", what, i, got, w)
				}
				if same := unsafe.StringData(got.Status.Cmdline) == unsafe.StringData(w.Status.Cmdline); same != asWritten {
					t.Fatalf("%s: status %d handed on as written: %v, want %v", what, i, same, asWritten)
				}
			case <-time.After(testPatience):
				t.Fatalf("%s: status %d of %d not watched", what, i, len(want))
			}
		}
	}
	own := batch(0, 1000)
	if err := a.PutProcStatuses(ctx, own); err != nil {
		t.Fatal(err)
	}
	expect("a's first write", own, true)
	if r, h := sw.read.Load(), sw.handed.Load(); r != 0 || h != 1000 {
		t.Fatalf("a's write of 1000: %d read through the consumer, %d handed on; want 0 and 1000", r, h)
	}
	other := batch(2000, 10)
	if err := b.PutProcStatuses(ctx, other); err != nil {
		t.Fatal(err)
	}
	expect("b's write", other, false)
	if r := sw.read.Load(); r != 10 {
		t.Fatalf("b's write of 10: %d read through the consumer, want 10", r)
	}
	own = batch(3000, 500)
	if err := a.PutProcStatuses(ctx, own); err != nil {
		t.Fatal(err)
	}
	expect("a's second write", own, true)
	if r, h := sw.read.Load(), sw.handed.Load(); r != 10 || h != 1500 {
		t.Fatalf("after a's second write: %d read, %d handed on; want 10 and 1500", r, h)
	}
	// A small write is read back as before.
	small := batch(4000, ownSkipMin-1)
	if err := a.PutProcStatuses(ctx, small); err != nil {
		t.Fatal(err)
	}
	expect("a's small write", small, true)
	if r := sw.read.Load(); r != 10+ownSkipMin-1 {
		t.Fatalf("a's small write: %d read in all, want %d", r, 10+ownSkipMin-1)
	}
	if left := ownLeft(a); left != 0 {
		t.Fatalf("%d own statuses kept after the watch handed them on", left)
	}
}

// TestQueueOwnRun: of a write's statuses, those stored at the sequences
// right after the watch's last read are handed on, in stream order; the
// first sequence that is not the write's (another's message, one not
// stored) ends the run.
func TestQueueOwnRun(t *testing.T) {
	s := &Store{}
	for _, c := range []struct {
		name  string
		high  uint64
		seqs  []uint64
		want  []int // indexes of the statuses handed on, in order
		after uint64
	}{
		{"all follow", 10, []uint64{11, 12, 13}, []int{0, 1, 2}, 13},
		{"stored out of order", 10, []uint64{12, 11, 13}, []int{1, 0, 2}, 13},
		{"another's message first", 10, []uint64{12, 13, 14}, nil, 10},
		{"another's message between", 10, []uint64{11, 12, 14, 15}, []int{0, 1}, 12},
		{"one not stored", 10, []uint64{11, 0, 12}, []int{0, 2}, 12},
		{"one not stored, a gap", 10, []uint64{11, 0, 13}, []int{0}, 11},
		{"already read", 20, []uint64{11, 12}, nil, 20},
		{"none stored", 10, []uint64{0, 0}, nil, 10},
		{"nothing", 10, nil, nil, 10},
	} {
		run := ownRun{seqs: c.seqs}
		for i := range c.seqs {
			hs := engine.HostStatus{Host: model.Host{IP: fmt.Sprintf("10.0.0.%d", i+1)}}
			run.msgs = append(run.msgs, pubMsg{status: &hs})
			run.keys = append(run.keys, fmt.Sprint(i))
		}
		q, high := s.queueOwnRun(nil, run, c.high)
		var got []int
		for _, hs := range q {
			var i int
			_, _ = fmt.Sscanf(hs.Host.IP, "10.0.0.%d", &i)
			got = append(got, i-1)
		}
		if !reflect.DeepEqual(got, c.want) || high != c.after {
			t.Errorf("%s: handed on %v, last %d; want %v, %d", c.name, got, high, c.want, c.after)
		}
	}
}

// ownLeft is how many statuses s keeps for its status watch to read.
func ownLeft(s *Store) int {
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	return len(s.own.m)
}

// blockedWatchers counts the goroutines of nats.go key watchers blocked
// handing an entry on (their channel full and unread).
func blockedWatchers() int {
	buf := make([]byte, 16<<20)
	n := runtime.Stack(buf, true)
	blocked := 0
	for _, g := range bytes.Split(buf[:n], []byte("\n\n")) {
		if bytes.Contains(g, []byte("[chan send")) && bytes.Contains(g, []byte("WatchFiltered.func")) {
			blocked++
		}
	}
	return blocked
}

// TestStatusWatchPauseFreesWatcher: a write that pauses the status watch
// while its watcher is blocked handing an entry on (the watch's reader
// slow, the watcher's channel full) frees that watcher: stopped and left
// unread, its goroutine and subscription stayed for good, once a pause.
func TestStatusWatchPauseFreesWatcher(t *testing.T) {
	e := startNATS(t, natsCfg(t, t.TempDir()))
	a, b := open(t, e, Options{}), open(t, e, Options{})
	ctx, cancel := context.WithCancel(tctx(t))
	defer cancel()
	before := blockedWatchers()
	ch, err := a.WatchProcStatuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	status := func(i int) engine.HostStatus {
		return engine.HostStatus{Host: model.Host{IP: fmt.Sprintf("10.3.%d.%d", i/250, i%250+1)},
			Status: model.ProcStatus{ProcKey: "web:nginx", ProcName: "nginx", State: model.ProcRunning, PID: 100 + i, ReportTime: int64(i)}}
	}
	var other, own []engine.HostStatus
	for i := range 600 { // past the watch's channel, queue head and the watcher's 256
		other = append(other, status(i))
	}
	for i := range ownSkipMin + 44 {
		own = append(own, status(10000+i))
	}
	if err := b.PutProcStatuses(ctx, other); err != nil {
		t.Fatal(err)
	}
	// Nothing read: the watcher ends up blocked handing an entry on.
	waitCond(t, "the watcher blocked on its full channel", time.Minute, func() bool { return blockedWatchers() > before })
	if err := a.PutProcStatuses(ctx, own); err != nil { // pauses the watch
		t.Fatal(err)
	}
	for i := range len(other) + len(own) {
		select {
		case <-ch:
		case <-time.After(time.Minute):
			t.Fatalf("status %d of %d not watched", i, len(other)+len(own))
		}
	}
	waitCond(t, "no watcher left blocked", time.Minute, func() bool { return blockedWatchers() <= before })
}

// TestStatusWatchStopGivesUp: a write whose pause the watch takes but
// does not answer (it is deleting its consumer, a JetStream request) goes
// on unpaused once its context ends, and the watch, when it answers, is
// handed an empty run (it reads on through a new consumer), not left
// waiting for a run no write will send.
func TestStatusWatchStopGivesUp(t *testing.T) {
	sw := &statusWatch{pause: make(chan chan chan ownRun), done: make(chan struct{})}
	defer close(sw.done)
	took, release := make(chan struct{}), make(chan struct{})
	handed := make(chan ownRun, 1)
	go func() { // the watch, slow to answer
		ask := <-sw.pause
		close(took)
		<-release
		run := make(chan ownRun, 1)
		ask <- run
		handed <- <-run
	}()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan bool, 1)
	go func() {
		resume, ok := sw.stop(ctx)
		stopped <- ok || resume != nil
	}()
	select {
	case <-took:
	case <-time.After(time.Minute):
		t.Fatal("the pause was not asked")
	}
	cancel()
	select {
	case paused := <-stopped:
		if paused {
			t.Fatal("the write was paused by a watch that did not answer")
		}
	case <-time.After(time.Minute):
		t.Fatal("the write still waits for a watch that does not answer, its context ended")
	}
	close(release)
	select {
	case r := <-handed:
		if len(r.msgs) != 0 || len(r.seqs) != 0 {
			t.Fatalf("the watch was handed %d statuses of a write that went on unpaused", len(r.msgs))
		}
	case <-time.After(time.Minute):
		t.Fatal("the watch, answering late, was handed no run")
	}
}
