package backend

import (
	"context"
	"sync/atomic"
	"time"
)

type storeWaitKey struct{}

// storeWait is a request's bound on the store, and the first outage one
// of its calls found.
type storeWait struct {
	d    time.Duration
	down atomic.Pointer[error]
}

// WithStoreWait returns ctx bounding how long the store waits out an
// outage (NATS unreachable, a JetStream leader election, a lost quorum)
// for the calls made with it: a store call that keeps failing for d (no
// responders, no stream leader) fails with model.ErrUnavailable instead of
// retrying, and so does one left unanswered for one attempt's time (a
// loaded machine's slow answer is not an outage). Once one call made with
// ctx has failed so, the later ones fail at once with the same error
// (StoreDown): the bound is the request's, not each call's, so a request
// making several store calls is not kept one attempt per call. The API
// server sets it on every request, so that its caller is answered 503
// with the reason in seconds; the engine's own work (running a task,
// storing its results) keeps the store's longer patience, since an
// election takes seconds.
func WithStoreWait(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, storeWaitKey{}, &storeWait{d: d})
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
