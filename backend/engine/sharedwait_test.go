package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"gseproc/model"
)

// TestSharedWaitBounds: a dispatch's shared deadline (waitFor) is never
// shorter than its budget from when it was asked for and at most waitStep
// longer; the run's cancel reaches it with its cause; a wait no longer
// handed out is let go only once no dispatch waits under it, and one
// still handed out is not let go when its last waiter leaves.
func TestSharedWaitBounds(t *testing.T) {
	sent, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	r := &run{sent: sent}
	const budget = time.Hour // never reached in the test: only cancels end a wait
	get := func(b time.Duration) *sharedWait {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.waitFor(b)
	}
	var held []*sharedWait
	for range 200 {
		asked := time.Now()
		w := get(budget)
		after := time.Now()
		dl, ok := w.ctx.Deadline()
		if !ok || dl.Before(asked.Add(budget)) || dl.After(after.Add(budget+waitStep)) {
			t.Fatalf("deadline %v after the dispatch asked: want within [budget, budget+%v]", dl.Sub(asked), waitStep)
		}
		held = append(held, w)
	}
	for _, w := range held {
		w.release()
	}

	// A wait handed out and waited under, replaced once waitStep has
	// passed (a lower bound: the sleep may be longer), is let go only
	// when its waiter leaves; the one handed out now stays when its own
	// last waiter leaves, for the next dispatch.
	first := get(budget)
	time.Sleep(2 * waitStep)
	second := get(budget)
	if second == first {
		t.Fatal("a wait handed out past its step")
	}
	if first.ctx.Err() != nil {
		t.Fatalf("a replaced wait let go while a dispatch waits under it: %v", first.ctx.Err())
	}
	first.release()
	if !errors.Is(first.ctx.Err(), context.Canceled) {
		t.Fatalf("a replaced wait with no waiter left: %v, want let go", first.ctx.Err())
	}
	second.release()
	if second.ctx.Err() != nil {
		t.Fatalf("a wait still handed out let go when its last waiter left: %v", second.ctx.Err())
	}

	// A cancel of the run (an operator's) reaches every wait with its cause.
	stop(model.ErrCancelled)
	if err := context.Cause(second.ctx); !errors.Is(err, model.ErrCancelled) {
		t.Fatalf("cause under a cancelled run: %v, want model.ErrCancelled", err)
	}
}
