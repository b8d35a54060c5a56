package engine

import "time"

// Fan-out workers. A run sends its targets over at most cfg.Concurrency
// workers (execute, rollPool); their goroutines are the engine's and are
// used again: a worker through with its share of one run waits up to
// workerIdle for a share of another (of any run) before it ends, and
// ends when the engine closes. Started afresh for every op, the 2,048
// goroutines of a fan-out each grew its stack from the smallest, the
// dispatch and the NATS publish under it being deep (4% of the server's
// CPU in an op over 10,000 hosts, copystack, and 8% in the first op).
// A run's concurrency bound is unchanged: it hands out at most that many
// shares and waits for them.

// workerIdle is how long an idle worker waits for work before it ends.
const workerIdle = 30 * time.Second

// goWork runs fn on an idle worker, or on a new one. The caller is one of
// the engine's goroutines counted in e.wg (a run's execute), so the
// worker is counted before Close can be waiting with nothing counted.
func (e *Engine) goWork(fn func()) {
	select {
	case e.work <- fn:
		return
	default:
	}
	e.wg.Add(1)
	go e.worker(fn)
}

// worker runs fn, then the work handed to it, until it idles workerIdle
// or the engine closes.
func (e *Engine) worker(fn func()) {
	defer e.wg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		fn()
		fn = nil // not kept while idle
		idle.Reset(workerIdle)
		select {
		case fn = <-e.work:
		case <-idle.C:
			return
		case <-e.ctx.Done():
			return
		}
	}
}
