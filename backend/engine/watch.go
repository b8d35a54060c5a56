package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"gseproc/model"
)

// watchBuffer is each watcher's channel capacity at most; a task of fewer
// targets gets one of its size (a watcher per small task, e.g. the metrics'
// one for every task, must not cost 256 results of memory each). A watcher
// that does not read only holds up its own goroutine, never the fan-out or
// other watchers.
const watchBuffer = 256

// watchChan is a watcher's channel for a task of n targets.
func watchChan(n int) chan model.Result {
	return make(chan model.Result, max(1, min(watchBuffer, n)))
}

// Watch streams a task's final results: first those with Seq > after, in Seq
// order, then new ones as they arrive; the channel closes when the task is
// complete and stored (every result with it), ctx ends or the engine closes.
func (e *Engine) Watch(ctx context.Context, id string, after int64) (<-chan model.Result, error) {
	r := e.heldRun(id)
	var out chan model.Result
	if r == nil {
		t, _, err := e.st.Task(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("watch: %w", err)
		}
		out = watchChan(t.Targets)
		if rw, ok := e.st.(ResultWatcher); ok && !t.Status.Final() {
			// Another engine runs it: follow its results as they are stored.
			wctx, src, end, err := e.watchStored(ctx, rw, id)
			if err != nil {
				return nil, fmt.Errorf("watch %s: %w", id, err)
			}
			if !e.track(func() {
				defer close(out)
				defer end()
				e.follow(wctx, src, after, nil, out)
			}) {
				end()
				return nil, errors.New("watch: engine is closed")
			}
			return out, nil
		}
		// Finished (or no way to follow it): everything is in the store.
		stored, err := e.st.Results(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("watch %s: results: %w", id, err)
		}
		var finals []model.Result
		for _, res := range stored {
			if res.State.Final() && res.Seq > after {
				finals = append(finals, res)
			}
		}
		sort.Slice(finals, func(i, j int) bool { return finals[i].Seq < finals[j].Seq })
		if !e.track(func() {
			defer close(out)
			e.send(ctx, out, finals)
		}) {
			return nil, errors.New("watch: engine is closed")
		}
		return out, nil
	}
	out = watchChan(len(r.targets))
	started := e.track(func() {
		defer close(out)
		r.mu.Lock()
		cursor := sort.Search(len(r.log), func(k int) bool { return r.loggedSeq(k) > after })
		r.mu.Unlock()
		var batch []model.Result
		for {
			// Copied under the lock (a result may be replaced later),
			// watchBuffer at a time: the fan-out waits meanwhile.
			r.mu.Lock()
			batch = batch[:0]
			for k := cursor; k < len(r.log) && len(batch) < watchBuffer; k++ {
				batch = append(batch, r.logged(k))
			}
			done, lost, wake := r.ended, r.lost, r.wakeLocked()
			r.mu.Unlock()
			if len(batch) > 0 {
				if !e.send(ctx, out, batch) {
					return
				}
				cursor += len(batch)
				continue
			}
			if done {
				return
			}
			if lost {
				e.followLost(ctx, id, after, r, out)
				return
			}
			select {
			case <-wake:
			case <-ctx.Done():
				return
			case <-e.ctx.Done():
				return
			}
		}
	})
	if !started {
		return nil, errors.New("watch: engine is closed")
	}
	return out, nil
}

// followLost goes on with a watch of run r, which another engine took
// over: from the store, skipping the targets already sent.
func (e *Engine) followLost(ctx context.Context, id string, after int64, r *run, out chan<- model.Result) {
	rw, ok := e.st.(ResultWatcher)
	if !ok {
		return
	}
	sent := map[model.Target]bool{}
	r.mu.Lock()
	for k := range r.log {
		if res := r.logged(k); res.Seq > after {
			sent[model.Target{Host: res.Host, ProcKey: res.ProcKey}] = true
		}
	}
	r.mu.Unlock()
	wctx, src, end, err := e.watchStored(ctx, rw, id)
	if err != nil {
		e.log.Warn("watch after takeover", "task", id, "err", err)
		return
	}
	defer end()
	e.follow(wctx, src, after, sent, out)
}

// watchStored opens rw's watch of task id's stored results, under a
// context that ends with ctx or the engine. end stops the watch and
// drains src, so the store's goroutine ends: call it once done.
func (e *Engine) watchStored(ctx context.Context, rw ResultWatcher, id string) (wctx context.Context, src <-chan model.Result, end func(), err error) {
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.ctx, cancel)
	src, err = rw.WatchResults(wctx, id)
	if err != nil {
		stop()
		cancel()
		return nil, nil, nil, err
	}
	return wctx, src, func() {
		stop()
		cancel()
		for range src {
		}
	}, nil
}

// gapGrace is how long follow holds results back waiting for a missing
// Seq: results are stored concurrently, so a later Seq may land first. A
// Seq that never lands (its engine died before storing it; the target is
// dispatched again under a new Seq) is skipped after it.
const gapGrace = 2 * time.Second

// follow sends the final results src delivers with Seq > after, each
// target once (sent: targets already sent), in Seq order: a result whose
// predecessor has not arrived is held until it does, or for gapGrace.
func (e *Engine) follow(ctx context.Context, src <-chan model.Result, after int64, sent map[model.Target]bool, out chan<- model.Result) {
	if sent == nil {
		sent = map[model.Target]bool{}
	}
	expect := after + 1
	held := map[int64]model.Result{}
	gap := time.NewTimer(time.Hour)
	gap.Stop()
	defer gap.Stop()
	var gapFor int64 = -1 // the expect value the gap timer runs for
	flush := func() bool {
		for {
			res, ok := held[expect]
			if !ok {
				break
			}
			delete(held, expect)
			if !e.send(ctx, out, []model.Result{res}) {
				return false
			}
			expect++
		}
		if len(held) > 0 && gapFor != expect {
			gap.Reset(gapGrace)
			gapFor = expect
		}
		return true
	}
	for {
		select {
		case res, ok := <-src:
			if !ok {
				// Complete: whatever is held goes out in Seq order.
				rest := make([]model.Result, 0, len(held))
				for _, r := range held {
					rest = append(rest, r)
				}
				sort.Slice(rest, func(i, j int) bool { return rest[i].Seq < rest[j].Seq })
				e.send(ctx, out, rest)
				return
			}
			if !res.State.Final() || res.Seq <= after {
				continue
			}
			tg := model.Target{Host: res.Host, ProcKey: res.ProcKey}
			if sent[tg] {
				continue
			}
			sent[tg] = true
			if res.Seq < expect { // its gap was given up on: late, but once
				if !e.send(ctx, out, []model.Result{res}) {
					return
				}
				continue
			}
			held[res.Seq] = res
			if !flush() {
				return
			}
		case <-gap.C:
			gapFor = -1
			if len(held) == 0 {
				continue
			}
			expect = math.MaxInt64
			for s := range held {
				expect = min(expect, s)
			}
			if !flush() {
				return
			}
		case <-ctx.Done():
			return
		case <-e.ctx.Done():
			return
		}
	}
}

// track runs fn on a goroutine that Close waits for, unless Close has begun
// (then it reports false and fn does not run). Adding to the WaitGroup under
// e.mu after checking e.ctx keeps Add from racing with Close's Wait.
func (e *Engine) track(fn func()) bool {
	e.mu.Lock()
	if e.ctx.Err() != nil {
		e.mu.Unlock()
		return false
	}
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		fn()
	}()
	return true
}

// send delivers results in order; it reports false when ctx or the engine ended.
func (e *Engine) send(ctx context.Context, out chan<- model.Result, rs []model.Result) bool {
	for _, res := range rs {
		select {
		case out <- res:
		case <-ctx.Done():
			return false
		case <-e.ctx.Done():
			return false
		}
	}
	return true
}
