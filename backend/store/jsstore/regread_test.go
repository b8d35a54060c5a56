package jsstore

import (
	"context"
	"testing"
	"time"

	"gseproc/backend"
)

// TestRegistryReadProbesOnce: under backend.WithRegistryRead the first
// read waits for what was written before it (another store's write, read
// back at once), and a later read with the same context answers from the
// index without a probe of its own: it answers while NATS is down, when a
// read with a context of its own cannot.
func TestRegistryReadProbesOnce(t *testing.T) {
	e := startNATS(t, natsCfg(t, t.TempDir()))
	a := open(t, e, Options{})
	b := open(t, e, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.PutProcess(ctx, proc("web", "nginx")); err != nil {
		t.Fatal(err)
	}
	rctx := backend.WithRegistryRead(ctx)
	ds, err := b.SharedProcesses(rctx)
	if err != nil || len(ds) != 1 {
		t.Fatalf("first read: %d definitions, %v; want A's one", len(ds), err)
	}
	if rev, ok := backend.RegistryReadRev(rctx); !ok || rev < ds[0].Rev {
		t.Fatalf("the first read recorded revision %d (%v), want at least %d", rev, ok, ds[0].Rev)
	}
	e.Shutdown()
	if _, err := b.SharedProcesses(backend.WithStoreWait(ctx, 500*time.Millisecond)); err == nil {
		t.Fatal("a read of its own answered with NATS down: it made no probe")
	}
	ds, err = b.SharedProcesses(rctx)
	if err != nil || len(ds) != 1 {
		t.Fatalf("the request's second read, NATS down: %d definitions, %v; want the index's one", len(ds), err)
	}
}
