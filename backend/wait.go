package backend

import (
	"context"
	"time"
)

type storeWaitKey struct{}

// WithStoreWait returns ctx bounding how long the store waits out an
// outage (NATS unreachable, a JetStream leader election, a lost quorum)
// for the calls made with it: a store call that keeps failing for d (no
// responders, no stream leader) fails with model.ErrUnavailable instead of
// retrying, and so does one left unanswered for one attempt's time (a
// loaded machine's slow answer is not an outage). The API server sets it
// on every request, so that its caller is answered 503 with the reason in
// seconds; the engine's own work (running a task, storing its results)
// keeps the store's longer patience, since an election takes seconds.
func WithStoreWait(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, storeWaitKey{}, d)
}

// StoreWait is the bound WithStoreWait set on ctx (false when none).
func StoreWait(ctx context.Context) (time.Duration, bool) {
	d, ok := ctx.Value(storeWaitKey{}).(time.Duration)
	return d, ok && d > 0
}
