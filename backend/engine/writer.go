package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"gseproc/model"
)

// The writer stores results and last known statuses for every task of the
// engine, in batches: whatever queued while the previous batch was being
// stored goes in the next one (at most writeBatchMax, the oldest first), through the store's BatchStore when it has
// one (pipelined), else one write at a time. A fan-out worker hands its
// result over and goes on to the next host instead of waiting for the
// store; a write's run is marked done once it is stored (or failed, logged), so a
// task is stored complete only after every result of it (finishTask
// waits run.puts). Results are stored in the order queued.
//
// Last known statuses a store writes (any store but a StatusKeeper, which
// keeps them in memory) are held apart while a run is in flight: they are
// what the engine has seen of its hosts, kept current in memory at once
// (lastStatuses, what every read of this engine is answered from), and
// stored behind the runs instead of taking the CPU and the store's
// bandwidth from them. They are stored as soon as no run is in flight,
// or when the oldest has waited statusHold, or when statusHoldMax wait
// (statusesDue). The first op over a fleet of 100,000 hosts learns ~84,000
// new statuses: stored during the op, they were one JetStream message
// each, ~1.5 s of the server's CPU per op on a 2-core machine and the
// difference between its wall time and the next op's.

// writeQueueMax bounds the writes waiting: beyond it producers wait.
const writeQueueMax = 1 << 15

// writeBatchMax bounds the writes stored as one batch. What a batch costs
// in memory while it is stored is several times what it costs queued: a
// copy of each status, each status's and result's JSON, the result packs
// and JetStream's copy of every message published and not yet stored. An
// op over 100,000 hosts whose statuses were all new (the first over the
// fleet) stored batches of the whole queue, 32,768 writes taking 1.4 to
// 2.3 s each: at its peak the server held ~50 MB for the batch. Beyond a
// few thousand a bigger batch does not store faster: its publishes are
// pipelined pubWindow at a time, and its fixed cost is a fence read per
// task and two waits for the last acknowledgements.
const writeBatchMax = 4096

// write is a result or a last known status (of host) to store, and the
// run's WaitGroup to mark done once stored (nil: none; a WaitGroup, not a
// method value, which was an allocation per result). The status is the
// one recordStatus keeps, by address (no one changes it after), not a
// copy: one copy was 224 bytes a status, ~19 MB an op over 100,000 hosts
// whose statuses were all new, held until the batch was stored.
type write struct {
	res    *model.Result
	blk    *slotBlock // the block res is in, given back once stored (nil: none)
	fence  uint64     // res's run's token (Fencer)
	status *model.ProcStatus
	host   model.Host // status's
	puts   *sync.WaitGroup
}

type writer struct {
	mu     sync.Mutex
	cond   *sync.Cond // signalled when the queue shrinks or closes
	q      []write
	closed bool
	wake   chan struct{} // cap 1: something was queued
	// held is the statuses held behind the runs in flight (hold: the
	// store writes them), in the order queued; heldSince is when the
	// oldest of them was queued (zero: none held).
	hold      bool
	held      []write
	heldSince time.Time
	// batch is the array each batch is taken into, the writeLoop's own
	// (reused: see take).
	batch []write
	// busy is how many writes the last take handed to writeLoop: being
	// stored until its next take (Backlog counts them).
	busy int
}

// The statuses held behind the runs in flight (statusesDue): stored once
// the oldest has waited statusHold, or once statusHoldMax are held, even
// with runs in flight; producers wait for room beyond heldMax.
const (
	statusHold    = 5 * time.Second
	statusHoldMax = 1 << 17
	heldMax       = 2 * statusHoldMax
)

// statusesDue decides whether the n statuses held, the oldest queued at
// since, are stored now, running runs being in flight: if not, after is
// when to decide again (0: when something changes). It is the whole rule
// of the statuses' hold; the writer does what it says.
func statusesDue(n int, since, now time.Time, running int) (due bool, after time.Duration) {
	switch {
	case n == 0:
		return false, 0
	case running == 0, n >= statusHoldMax:
		return true, 0
	}
	if waited := now.Sub(since); waited < statusHold {
		return false, statusHold - waited
	}
	return true, 0
}

func (x *writer) init(hold bool) {
	x.cond = sync.NewCond(&x.mu)
	x.wake = make(chan struct{}, 1)
	x.hold = hold
}

// poke wakes writeLoop to look at the queue again.
func (x *writer) poke() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// enqueue queues w for the writer; when the engine is closing, w is not
// stored and its run is marked done at once.
func (e *Engine) enqueue(w write) {
	x := &e.writes
	held := x.hold && w.status != nil
	x.mu.Lock()
	for !x.closed && (held && len(x.held) >= heldMax || !held && len(x.q) >= writeQueueMax) {
		x.cond.Wait()
	}
	if x.closed {
		x.mu.Unlock()
		if w.puts != nil {
			w.puts.Done()
		}
		return
	}
	if held {
		if len(x.held) == 0 {
			x.heldSince = e.now()
		}
		x.held = append(x.held, w)
	} else {
		x.q = append(x.q, w)
	}
	x.mu.Unlock()
	x.poke()
}

// writeRoomAsync is how much room the writer's queue must have for an
// answer handed on by the reply subscription to be recorded on it
// (received): one answer queues two writes (its status and result), and
// other producers queue meanwhile; the rest of a batch's worth keeps the
// subscription from waiting on a queue filled between the look and the
// writes.
const writeRoomAsync = writeBatchMax

// writesNearFull reports whether the writer's queue has less room than
// writeRoomAsync (its writes might wait).
func (e *Engine) writesNearFull() bool {
	x := &e.writes
	x.mu.Lock()
	defer x.mu.Unlock()
	return !x.closed && (len(x.q) > writeQueueMax-writeRoomAsync || len(x.held) > heldMax-writeRoomAsync)
}

// take is the next batch: the oldest writes queued, at most
// writeBatchMax, and, when statusesDue says so (at now, running runs in
// flight), the oldest statuses held, at most writeBatchMax more; both
// copied into x.batch, which it overwrites (the batch before must be
// stored); what is left moves to the front of its array. after is when to
// look at the held statuses again (0: when something is queued). Neither
// array is made again for every batch: taken as a slice of the queue,
// each batch left the queue a shorter array that appends soon made again,
// copying what it held (~44 MB of allocations for the first op over
// 100,000 hosts, ~14 MB for the next). x.mu is held; only writeLoop takes.
func (x *writer) take(now time.Time, running int) (batch []write, after time.Duration) {
	if x.batch == nil {
		x.batch = make([]write, 0, 2*writeBatchMax)
	}
	batch = x.batch[:0]
	batch, x.q = takeFront(batch, x.q)
	due, after := statusesDue(len(x.held), x.heldSince, now, running)
	if due {
		// What is left of the held is as old as what was taken: it
		// stays due (heldSince unchanged) until none is held.
		batch, x.held = takeFront(batch, x.held)
		if len(x.held) == 0 {
			x.heldSince = time.Time{}
		}
	}
	x.busy = len(batch)
	if len(batch) == 0 {
		return nil, after
	}
	return batch, after
}

// takeFront appends the first writeBatchMax of from (or all) to batch,
// moves the rest of from to the front of its array and returns both.
func takeFront(batch, from []write) ([]write, []write) {
	n := min(len(from), writeBatchMax)
	if n == 0 {
		return batch, from
	}
	batch = append(batch, from[:n]...)
	rest := copy(from, from[n:])
	// What moved or was taken is let go from its old place: the queue's
	// array keeps no write alive past its store.
	clear(from[rest:])
	return batch, from[:rest]
}

// backlog is how many writes wait to be stored or are being stored.
func (x *writer) backlog() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.q) + len(x.held) + x.busy
}

// writeLoop stores the queued writes until the engine closes; then it
// stores what is still queued (for up to finalFlush) and refuses more.
func (e *Engine) writeLoop() {
	defer e.wg.Done()
	x := &e.writes
	// A batch being stored when the engine closes is given finalFlush
	// to finish, like what is still queued: cut at once, the results in
	// it were lost, and a graceful restart sent their targets again.
	wctx, wcancel := context.WithCancel(context.WithoutCancel(e.ctx))
	defer wcancel()
	stop := context.AfterFunc(e.ctx, func() { time.AfterFunc(finalFlush, wcancel) })
	defer stop()
	hold := time.NewTimer(time.Hour)
	hold.Stop()
	defer hold.Stop()
	for {
		x.mu.Lock()
		batch, after := x.take(e.now(), e.runningRuns())
		x.cond.Broadcast()
		x.mu.Unlock()
		if len(batch) > 0 {
			e.writeBatch(wctx, batch)
			// Its entries are let go: the batch's array, taken into
			// again, keeps no stored write alive meanwhile.
			clear(batch)
			continue
		}
		var held <-chan time.Time
		if after > 0 {
			hold.Reset(after)
			held = hold.C
		}
		select {
		case <-x.wake:
		case <-held:
		case <-e.ctx.Done():
			x.mu.Lock()
			x.closed = true
			rest := append(x.q, x.held...)
			x.q, x.held = nil, nil
			x.cond.Broadcast()
			x.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), finalFlush)
			e.writeBatch(ctx, rest)
			cancel()
			return
		}
		hold.Stop()
	}
}

// finalFlush bounds the storing of what was queued when the engine closed.
const finalFlush = 5 * time.Second

// writeBatch stores ws: statuses (the last of each host and process)
// first, then results; then marks every run done. With a Fencer, results are
// stored per task with their run's token, and a run whose results are
// refused (another engine fenced the task) is abandoned.
func (e *Engine) writeBatch(ctx context.Context, ws []write) {
	type key struct {
		h    model.Host
		proc string
	}
	// The statuses are counted first, as the results below: a batch of
	// the 84,000 statuses a first op over 100,000 hosts stores, grown by
	// appending, was made about twice over (~90 MB of the server's
	// allocations over three ops, heap profile of bench fleet --profile).
	nsts := 0
	for _, w := range ws {
		if w.status != nil {
			nsts++
		}
	}
	// The last of each host and process, in the order first queued.
	var sts []write
	var at map[key]int
	if nsts > 0 {
		sts, at = make([]write, 0, nsts), make(map[key]int, nsts)
	}
	// A BatchStore is handed the batch's results together (a copy of
	// each); another store is handed each in turn, from its write, with
	// no copy of the whole batch first (a batch of an op over 100,000
	// hosts held tens of MB of copies at the embedded engine's peak).
	bs, batched := e.st.(BatchStore)
	var rs []model.Result
	type fenced struct {
		fence uint64
		rs    []*model.Result
	}
	byTask := map[string]*fenced{}
	var tasks []string // of byTask, in order
	if e.fencer != nil {
		// Each task's results are counted first: its slice is made once
		// at its size (a batch of 10,000 results grown by appending
		// copied them all about twice more).
		n := map[string]int{}
		for _, w := range ws {
			if w.res != nil {
				n[w.res.TaskID]++
			}
		}
		for id, k := range n {
			byTask[id] = &fenced{rs: make([]*model.Result, 0, k)}
		}
	}
	for _, w := range ws {
		if w.status != nil {
			k := key{w.host, w.status.ProcKey}
			if i, ok := at[k]; ok {
				sts[i] = w
			} else {
				at[k] = len(sts)
				sts = append(sts, w)
			}
		}
		switch {
		case w.res != nil && e.fencer != nil:
			f := byTask[w.res.TaskID]
			if len(f.rs) == 0 {
				f.fence = w.fence
				tasks = append(tasks, w.res.TaskID)
			}
			f.rs = append(f.rs, w.res)
		case w.res != nil && batched:
			rs = append(rs, *w.res)
		}
	}
	if ks, ok := e.st.(StatusKeeper); ok {
		for _, s := range sts {
			if err := ks.KeepProcStatus(ctx, s.host, s.status); err != nil {
				e.log.Warn("store status", "host", s.host.String(), "proc", s.status.ProcKey, "err", err)
				e.statusNotStored(HostStatus{Host: s.host, Status: *s.status})
			}
		}
		sts = nil
	}
	if batched {
		if len(sts) > 0 {
			hs := make([]HostStatus, len(sts))
			for i, s := range sts {
				hs[i] = HostStatus{Host: s.host, Status: *s.status}
			}
			if err := bs.PutProcStatuses(ctx, hs); err != nil {
				e.log.Warn("store statuses", "n", len(hs), "err", err)
				for _, s := range hs {
					e.statusNotStored(s)
				}
			}
		}
		if len(rs) > 0 {
			if err := bs.PutResults(ctx, rs); err != nil {
				e.log.Warn("store results", "n", len(rs), "err", err)
			}
		}
	} else {
		for _, s := range sts {
			if err := e.st.PutProcStatus(ctx, s.host, *s.status); err != nil {
				e.log.Warn("store status", "host", s.host.String(), "proc", s.status.ProcKey, "err", err)
				e.statusNotStored(HostStatus{Host: s.host, Status: *s.status})
			}
		}
		for _, w := range ws {
			if r := w.res; r != nil && e.fencer == nil {
				if err := e.st.PutResult(ctx, *r); err != nil {
					e.log.Warn("store result", "task", r.TaskID, "host", r.Host.String(), "err", err)
				}
			}
		}
	}
	if len(tasks) > 0 {
		// Every task's results at once: its fence read and its results
		// published together with the other tasks' (one task each after
		// the other was two round trips per task, the writer's pace).
		sets := make([]FencedResults, len(tasks))
		for i, id := range tasks {
			f := byTask[id]
			sets[i] = FencedResults{TaskID: id, Fence: f.fence, Results: f.rs}
		}
		for i, err := range e.fencer.PutResultsFencedMany(ctx, sets) {
			id := tasks[i]
			switch {
			case errors.Is(err, model.ErrConflict):
				e.mu.RLock()
				r := e.runs[id]
				e.mu.RUnlock()
				if r != nil {
					e.abandon(r, err)
				}
			case err != nil:
				e.log.Warn("store results", "task", id, "n", len(sets[i].Results), "err", err)
			}
		}
	}
	for _, w := range ws {
		if w.puts != nil {
			w.puts.Done()
		}
		// Stored (or failed, logged): nothing reads the result again.
		e.blocks.put(w.blk, 1)
	}
}
