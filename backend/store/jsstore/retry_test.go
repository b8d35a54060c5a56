package jsstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// noPeers is JetStream's refusal to place replicas on too few peers, as
// a cluster's leader answers while the other nodes are still joining
// (seen once in TestNATSClusterFailover on a loaded machine: the server
// failed to start).
var noPeers error = &jetstream.APIError{Code: 400, ErrorCode: jsErrCodeClusterNoPeers, Description: "no suitable peers for placement"}

// TestRetryWaitsForPeers: opening the store waits out a cluster that knows
// too few peers for a while, and gives up, saying why, when it stays so.
func TestRetryWaitsForPeers(t *testing.T) {
	ctx := context.Background()
	calls := 0
	err := retryPlacing(ctx, time.Minute, func(context.Context) error {
		if calls++; calls <= 3 {
			return noPeers
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Fatalf("after 3 refusals for too few peers: %v after %d calls, want success after 4", err, calls)
	}

	calls = 0
	err = retryPlacing(ctx, 0, func(context.Context) error { calls++; return noPeers })
	if !errors.Is(err, noPeers) || calls != 1 {
		t.Fatalf("too few peers for good: %v after %d calls, want the refusal after 1", err, calls)
	}

	calls = 0
	bad := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeBadRequest, Description: "bad request"}
	if err := retryPlacing(ctx, time.Minute, func(context.Context) error { calls++; return bad }); !errors.Is(err, bad) || calls != 1 {
		t.Fatalf("a bad request: %v after %d calls, want it at once", err, calls)
	}

	cctx, cancel := context.WithCancel(ctx)
	calls = 0
	err = retryPlacing(cctx, time.Minute, func(context.Context) error {
		if calls++; calls == 2 {
			cancel()
		}
		return noPeers
	})
	if !errors.Is(err, noPeers) || calls != 2 {
		t.Fatalf("context ended while waiting for peers: %v after %d calls, want the refusal after 2", err, calls)
	}
}
