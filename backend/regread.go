package backend

import (
	"context"
	"sync/atomic"
)

type registryReadKey struct{}

// registryRead is the registry revision a request's first read waited
// for (0: no read yet).
type registryRead struct{ rev atomic.Uint64 }

// WithRegistryRead returns ctx under which the registry is made current
// once: the first read made with it waits, as every read does, until the
// store's index holds every definition written before the read began (a
// probe of the bucket); the later reads made with it answer from the
// index as of that revision or after, without a probe of their own. For a
// request that reads the registry more than once and writes none of it in
// between (operate_proc: the API checks the definition and its hosts,
// the engine resolves the targets): what was written before the request
// is read by each of its reads, with one probe's round trip, not one per
// read. A request that writes the registry between its reads must not use
// it: its later read would not wait for its own write.
func WithRegistryRead(ctx context.Context) context.Context {
	return context.WithValue(ctx, registryReadKey{}, &registryRead{})
}

// RegistryReadRev is the revision an earlier read made with ctx waited for
// (false: none, or ctx has no WithRegistryRead).
func RegistryReadRev(ctx context.Context) (uint64, bool) {
	r, ok := ctx.Value(registryReadKey{}).(*registryRead)
	if !ok {
		return 0, false
	}
	rev := r.rev.Load()
	return rev, rev > 0
}

// SetRegistryReadRev records rev, the revision a read made with ctx waited
// for, for its later reads; without WithRegistryRead it does nothing.
func SetRegistryReadRev(ctx context.Context, rev uint64) {
	if r, ok := ctx.Value(registryReadKey{}).(*registryRead); ok && rev > 0 {
		r.rev.CompareAndSwap(0, rev)
	}
}
