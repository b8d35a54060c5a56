//go:build linux

package agent

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gseproc/model"
)

// TestForkGateBounds: however many launches want to fork at once, no more
// than the gate's limit are in at a time, and every one gets in.
func TestForkGateBounds(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{1, 3} {
		g := newForkGate(func() int { return limit })
		var in, most, done atomic.Int32
		var wg sync.WaitGroup
		for range 40 {
			wg.Go(func() {
				g.enter()
				n := in.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Millisecond)
				in.Add(-1)
				g.leave()
				done.Add(1)
			})
		}
		wg.Wait()
		if done.Load() != 40 {
			t.Fatalf("limit %d: %d of 40 got in", limit, done.Load())
		}
		if m := most.Load(); m > int32(limit) || m < 1 {
			t.Fatalf("limit %d: %d in at once", limit, m)
		}
		if g.peak > limit {
			t.Fatalf("limit %d: the gate counted %d at once", limit, g.peak)
		}
	}
}

// TestLaunchesPassTheForkGate: launches at once from many goroutines never
// fork more than GOMAXPROCS-1 (at least 1) at a time, and all start.
func TestLaunchesPassTheForkGate(t *testing.T) {
	p := model.Process{Meta: model.Meta{Namespace: "gate", Name: "p"},
		Spec: model.Spec{Identity: model.Identity{ProcName: "p", SetupPath: t.TempDir()}}}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			c, err := launch(p, "exit 0", nil, nil)
			if err != nil {
				errs <- err
				return
			}
			c.poll(time.Minute)
			c.close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	forks.mu.Lock()
	peak, limit, n := forks.peak, forks.limit(), forks.n
	forks.mu.Unlock()
	if peak < 1 || peak > limit || n != 0 {
		t.Fatalf("forks: peak %d with limit %d, %d still in", peak, limit, n)
	}
}
