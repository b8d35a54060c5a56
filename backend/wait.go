package backend

import (
	"context"
	"sync/atomic"
	"time"
)

type storeWaitKey struct{}

// storeWait is a request's bound on the store (d from start), and the
// first outage one of its calls found.
type storeWait struct {
	d     time.Duration
	start time.Time
	down  atomic.Pointer[error]
}

// WithStoreWait returns ctx bounding how long the store waits out an
// outage (NATS unreachable, a JetStream leader election, a lost quorum)
// for the calls made with it, d from now: a store call that keeps failing
// until then (no responders, no stream leader) fails with
// model.ErrUnavailable instead of retrying, and so does one left
// unanswered then unless the store finds JetStream answering otherwise
// (a loaded machine's slow answer is not an outage: it is given the
// store's attempt time). Once one call made with ctx has failed so, the
// later ones fail at once with the same error (StoreDown): the bound is
// the request's, not each call's, so a request making several store
// calls is not kept a bound per call. The API server sets it on every
// request, so that its caller is answered 503 with the reason within the
// bound; the engine's own work (running a task, storing its results)
// keeps the store's longer patience, since an election takes seconds.
func WithStoreWait(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, storeWaitKey{}, &storeWait{d: d, start: time.Now()})
}

// StoreDeadline is when the bound WithStoreWait set on ctx ends (false
// when none).
func StoreDeadline(ctx context.Context) (time.Time, bool) {
	w, ok := ctx.Value(storeWaitKey{}).(*storeWait)
	if !ok || w.d <= 0 {
		return time.Time{}, false
	}
	return w.start.Add(w.d), true
}

// StoreWait is the bound WithStoreWait set on ctx (false when none).
func StoreWait(ctx context.Context) (time.Duration, bool) {
	w, ok := ctx.Value(storeWaitKey{}).(*storeWait)
	if !ok || w.d <= 0 {
		return 0, false
	}
	return w.d, true
}

// MarkStoreDown records err, the outage a store call made with ctx found
// (a model.ErrUnavailable), on ctx's WithStoreWait bound; the first one
// is kept. Without a bound it does nothing.
func MarkStoreDown(ctx context.Context, err error) {
	if w, ok := ctx.Value(storeWaitKey{}).(*storeWait); ok && err != nil {
		w.down.CompareAndSwap(nil, &err)
	}
}

// StoreDown is the outage an earlier call made with ctx found (nil when
// none, or without a bound): the store fails a later call with it at once.
func StoreDown(ctx context.Context) error {
	if w, ok := ctx.Value(storeWaitKey{}).(*storeWait); ok {
		if p := w.down.Load(); p != nil {
			return *p
		}
	}
	return nil
}
