package jsstore

import (
	"context"
	"fmt"
	"reflect"
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
	a.own.mu.Lock()
	left := len(a.own.m)
	a.own.mu.Unlock()
	if left != 0 {
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
	a.own.mu.Lock()
	left := len(a.own.m)
	a.own.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d own statuses kept after both watches read them", left)
	}
}
