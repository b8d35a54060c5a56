//go:build linux

package agent

import (
	"runtime"
	"sync"
)

// forks bounds the launches forking at once, one per process as the
// scheduler's Ps are. Go forks with vfork: the forking thread keeps its P
// (a raw system call, signals blocked) until the child has exec'd, and a
// child on a loaded machine waits for a CPU before it can: tens of
// milliseconds, hundreds at worst. In a crash storm, launches at once held
// every P of a 2-core machine that way, and nothing else of the agent ran
// meanwhile: a status op waited seconds to be scheduled, and a garbage
// collection's stop-the-world waited for the forks (a trace of the
// crash-storm benchmark at load 22: 50 s of P time held in 1,135 forks
// within 34 s, a status op's 20 s of scheduling wait). At most
// GOMAXPROCS-1 forks run at once (one on one P), so one P is always left
// for the rest: ops, status, the supervisor's own bookkeeping.
var forks = newForkGate(func() int { return max(1, runtime.GOMAXPROCS(0)-1) })

// forkGate lets at most limit() holders in at once; limit is read at each
// entry (GOMAXPROCS may change while the process runs).
type forkGate struct {
	limit func() int
	mu    sync.Mutex
	freed *sync.Cond
	n     int // holders now
	peak  int // the most at once, for tests
}

func newForkGate(limit func() int) *forkGate {
	g := &forkGate{limit: limit}
	g.freed = sync.NewCond(&g.mu)
	return g
}

// enter waits for a place; leave gives it back.
func (g *forkGate) enter() {
	g.mu.Lock()
	for g.n >= g.limit() {
		g.freed.Wait()
	}
	g.n++
	g.peak = max(g.peak, g.n)
	g.mu.Unlock()
}

func (g *forkGate) leave() {
	g.mu.Lock()
	g.n--
	g.mu.Unlock()
	g.freed.Signal()
}
