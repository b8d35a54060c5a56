package engine_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// TestManyOpsLeaveNothingRunning: ops one after the other leave no run
// and no goroutine behind them: what an engine keeps of a finished task
// is the bounded recentRuns (TestRecentRunsBounded), nothing per op that
// grows for as long as the server lives. Waits for the counts to come
// back, not for a time.
func TestManyOpsLeaveNothingRunning(t *testing.T) {
	f := newFake(300)
	e, _ := start(t, f, testCfg())
	req := backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns"}}
	operate(t, e, req) // the first: the last known statuses fill
	waitUntil(t, "the first op's run forgotten", 20*time.Second, func() bool { return e.Runs() == 0 })
	base, _ := goroutines()
	const ops = 40
	most := 0
	for i := range ops {
		task, res := operate(t, e, req)
		if len(res) != 450 {
			t.Fatalf("op %d (%s): %d results, want 450", i, task.ID, len(res))
		}
		waitUntil(t, "the run forgotten", 20*time.Second, func() bool { return e.Runs() == 0 })
		_, w := goroutines()
		most = max(most, w)
	}
	// The fan-out's workers wait a while for the next op's work before
	// they end (workerIdle): they are not counted, and there are never
	// more than a few ops' concurrency of them. Any other goroutine of an
	// op may still be on its way out (a watch's sender, a lease's
	// release): within the deadline all are.
	if limit := 4 * testCfg().Concurrency; most > limit {
		t.Errorf("%d fan-out workers after an op, over %d", most, limit)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, _ := goroutines()
		if n <= base {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines (not workers) after %d ops, %d after the first:\n%s", n, ops, base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// goroutines counts this process's goroutines: the engine's fan-out
// workers (idle or not), and the others.
func goroutines() (others, workers int) {
	buf := make([]byte, 4<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "engine.(*Engine).worker(") {
			workers++
		} else {
			others++
		}
	}
	return others, workers
}
