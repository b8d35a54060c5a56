package backend

import (
	"context"
	"sync/atomic"

	"gseproc/model"
)

// ResultHook is told the final results of the task an Operate makes,
// instead of a watch of it: the API server counts each host's outcome in
// its metrics, and a watch per call (two goroutines and a channel for a
// one-host status query) was a share of every call's CPU. A backend that
// takes the hook (the embedded engine; a remote backend does not) calls
// Take once, for the task the Operate made, and then fn for every final
// result it logs, in the order a watch from the start would deliver them,
// until the task is stored complete. fn runs while the task's state is
// locked: it must be quick and must not call the backend.
type ResultHook struct {
	fn    func(model.Result)
	taken atomic.Bool
}

// NewResultHook returns a hook calling fn.
func NewResultHook(fn func(model.Result)) *ResultHook { return &ResultHook{fn: fn} }

// Take returns the hook's function the first time it is called, nil
// after: one task takes it.
func (h *ResultHook) Take() func(model.Result) {
	if h == nil || !h.taken.CompareAndSwap(false, true) {
		return nil
	}
	return h.fn
}

// Taken says whether a backend took the hook: when not, the caller learns
// the results another way (a watch).
func (h *ResultHook) Taken() bool { return h != nil && h.taken.Load() }

type resultHookKey struct{}

// WithResultHook returns ctx carrying h for the Operate made with it.
func WithResultHook(ctx context.Context, h *ResultHook) context.Context {
	return context.WithValue(ctx, resultHookKey{}, h)
}

// ResultHookOf is the hook ctx carries (nil when none).
func ResultHookOf(ctx context.Context) *ResultHook {
	h, _ := ctx.Value(resultHookKey{}).(*ResultHook)
	return h
}
