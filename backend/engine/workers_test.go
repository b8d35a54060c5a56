package engine_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// fanOutWorkers counts the engine's fan-out workers (any engine's: the
// package's tests run one at a time, each engine closed after its test)
// and how many of them wait idle for a share.
func fanOutWorkers() (all, idle int) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "gseproc/backend/engine.(*Engine).worker(") {
			continue
		}
		all++
		if strings.Contains(g, " [select") {
			idle++
		}
	}
	return all, idle
}

// TestFanOutWorkersReusedAndEnded: a fan-out's workers are used again by
// the next run (three runs at concurrency 8 leave 8 workers, not 24), and
// Close ends every one of them: none is left behind.
func TestFanOutWorkersReusedAndEnded(t *testing.T) {
	// A worker is counted until its goroutine returns, a moment after
	// Close does: waited for, well within workerIdle (30 s), after which
	// an idle worker ends without Close.
	noWorkers := func(what string) {
		t.Helper()
		waitUntil(t, what, 10*time.Second, func() bool { all, _ := fanOutWorkers(); return all == 0 })
	}
	noWorkers("no worker before the engine starts (an engine left open by an earlier test?)")
	f := newFake(200)
	cfg := testCfg()
	cfg.Concurrency = 8
	e, _ := start(t, f, cfg)
	for i := range 3 {
		if _, res := operate(t, e, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns", Name: "app"}}); len(res) != 200 {
			t.Fatalf("run %d: %d results", i, len(res))
		}
		// Every worker through with its share waits for the next
		// (workerIdle, far longer than this wait), so the next run finds
		// them all.
		var all, idle int
		waitUntil(t, "the workers idle", 30*time.Second, func() bool {
			all, idle = fanOutWorkers()
			return all > 0 && idle == all
		})
		if all > cfg.Concurrency {
			t.Fatalf("after run %d: %d workers, want at most the concurrency %d (used again)", i, all, cfg.Concurrency)
		}
	}
	// Closing ends the idle workers at once, not when they have idled
	// workerIdle (which Close would then wait for).
	closed := make(chan error, 1)
	go func() { closed <- e.Close() }()
	noWorkers("no worker left once the engine closes")
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}
