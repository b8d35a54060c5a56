package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/server"
	"gseproc/model"
)

// collectBatches gathers WatchBatches' results, each batch neither empty
// nor over 256 results.
func collectBatches(t *testing.T, ch <-chan []model.Result) []model.Result {
	t.Helper()
	var out []model.Result
	timeout := time.After(30 * time.Second)
	for {
		select {
		case rs, ok := <-ch:
			if !ok {
				return out
			}
			if len(rs) == 0 || len(rs) > 256 {
				t.Fatalf("a batch of %d results", len(rs))
			}
			out = append(out, rs...)
		case <-timeout:
			t.Fatalf("watch did not complete in 30s (%d results)", len(out))
		}
	}
}

// TestWatchBatches: the batches hold what Watch sends, in order, each
// result once: from the start, from the middle, and over a stream the
// server cuts every 50 events; an unknown task is refused as by Watch.
func TestWatchBatches(t *testing.T) {
	for _, cut := range []int{0, 50} {
		var opts []server.Option
		if cut > 0 {
			opts = append(opts, server.WithStreamCut(cut))
		}
		c, _, _ := serve(t, 600, opts...)
		ctx := context.Background()
		task, err := c.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "gse"}})
		if err != nil {
			t.Fatal(err)
		}
		if task.Targets <= 256 {
			t.Fatalf("only %d targets; want more than a batch", task.Targets)
		}
		ch, err := c.WatchBatches(ctx, task.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := collectBatches(t, ch)
		checkSeqs(t, got, 0, task.Targets)
		wch, err := c.Watch(ctx, task.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := collect(t, wch)
		for i := range want {
			if got[i].Host != want[i].Host || got[i].ProcKey != want[i].ProcKey || got[i].State != want[i].State {
				t.Fatalf("cut %d: result %d: batches %+v, Watch %+v", cut, i, got[i], want[i])
			}
		}
		ch, err = c.WatchBatches(ctx, task.ID, 2)
		if err != nil {
			t.Fatal(err)
		}
		checkSeqs(t, collectBatches(t, ch), 2, task.Targets-2)
		if _, err := c.WatchBatches(ctx, "GSETASK:20200101000000:999999", 0); cut == 0 && !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("unknown task: %v, want ErrNotFound", err)
		}
	}
}

// TestWatchBatchesEndsWithCtx: a watch whose ctx ends closes its channel.
func TestWatchBatchesEndsWithCtx(t *testing.T) {
	c, _, _ := serve(t, 50)
	task, err := c.Operate(context.Background(), backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "gse"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := c.WatchBatches(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("the channel did not close after ctx ended")
		}
	}
}
