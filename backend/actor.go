package backend

import (
	"context"

	"gseproc/model"
)

type actorKey struct{}

// WithActor returns ctx carrying who makes the calls made with it. The
// engine records every change and operation in its audit trail under the
// actor of the call's context; the API server sets it from the
// authenticated app and user, the CLI, the console and the SSH server
// from their operator.
func WithActor(ctx context.Context, a model.Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the actor ctx carries (zero when none).
func ActorFrom(ctx context.Context) model.Actor {
	a, _ := ctx.Value(actorKey{}).(model.Actor)
	return a
}

// Headers of the native API carrying the caller's operator and channel
// (the app and user come from the authenticated credentials). The server
// checks them (model.CheckActorField) and records them as claimed by the
// authenticated app.
const (
	OperatorHeader = "X-Gseproc-Operator"
	ViaHeader      = "X-Gseproc-Via"
)

// NotReadyHeader is set (to the server's state, e.g. "no_quorum") on a 503
// a server answers because it is not ready: the request was refused before
// anything was done, so a client may send it to another server, a change
// included. Another 503 (a store call timed out) may follow work done.
const NotReadyHeader = "X-Gseproc-Not-Ready"
