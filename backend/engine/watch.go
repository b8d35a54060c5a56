package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"gseproc/model"
)

// watchBuffer is each watcher's channel capacity. A watcher that does not
// read only holds up its own goroutine, never the fan-out or other watchers.
const watchBuffer = 256

// Watch streams a task's final results: first those with Seq > after, in Seq
// order, then new ones as they arrive; the channel closes when the task is
// complete, ctx ends or the engine closes.
func (e *Engine) Watch(ctx context.Context, id string, after int64) (<-chan model.Result, error) {
	e.mu.RLock()
	r := e.runs[id]
	e.mu.RUnlock()
	out := make(chan model.Result, watchBuffer)
	if r == nil {
		// Finished (or unknown): everything is in the store.
		if _, _, err := e.st.Task(ctx, id); err != nil {
			return nil, fmt.Errorf("watch: %w", err)
		}
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
	started := e.track(func() {
		defer close(out)
		r.mu.Lock()
		cursor := sort.Search(len(r.log), func(i int) bool { return r.log[i].Seq > after })
		r.mu.Unlock()
		for {
			r.mu.Lock()
			batch := r.log[cursor:len(r.log):len(r.log)]
			done, wake := r.done, r.notify
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
