package jsstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"gseproc/model"
)

// TestListingDuringUpdates: a listing while keys are being rewritten sees
// every key (a KV watch's own "initial values done" marker can come early).
func TestListingDuringUpdates(t *testing.T) {
	s := open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{})
	ctx := context.Background()
	now := time.Now()
	var ids []string
	for i := range 5 {
		id := model.FormatTaskID(now, uint64(i+1))
		ids = append(ids, id)
		if err := s.PutTask(ctx, model.Task{ID: id, Status: model.TaskRunning, Created: now}, targets(2)); err != nil {
			t.Fatal(err)
		}
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = s.UpdateTask(ctx, model.Task{ID: ids[i%5], Status: model.TaskRunning, Created: now, Counts: model.Counts{Success: i}})
		}
	}()
	bad := 0
	for range 100 {
		ts, err := s.Tasks(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != 5 {
			bad++
		}
	}
	close(stop)
	<-stopped
	if bad > 0 {
		t.Fatalf("%d of 100 listings incomplete", bad)
	}
}

// BenchmarkResults10k lists the results of a task of 10,000 targets.
func BenchmarkResults10k(b *testing.B) {
	s := open(b, startNATS(b, natsCfg(b, b.TempDir())), Options{})
	ctx := context.Background()
	id := model.FormatTaskID(time.Now(), 1)
	tg := targets(10000)
	if err := s.PutTask(ctx, model.Task{ID: id}, tg); err != nil {
		b.Fatal(err)
	}
	for _, x := range tg {
		if err := s.PutResult(ctx, model.Result{TaskID: id, Host: x.Host, ProcKey: x.ProcKey, State: model.StateSuccess}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		rs, err := s.Results(ctx, id)
		if err != nil || len(rs) != len(tg) {
			b.Fatalf("%d results, %v", len(rs), err)
		}
	}
}

// TestRegistryIndexBoundsConsumers: Processes answers from the index kept
// by one watch, so concurrent calls (while definitions change) open no
// consumer of their own, and each call sees every write made before it.
func TestRegistryIndexBoundsConsumers(t *testing.T) {
	e := startNATS(t, natsCfg(t, t.TempDir()))
	s := open(t, e, Options{})
	ctx := tctx(t)
	nc, err := e.Connect("probe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutProcess(ctx, proc("web", "p0")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Processes(ctx); err != nil {
		t.Fatal(err)
	}
	ai, err := js.AccountInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := ai.Consumers

	var wg sync.WaitGroup
	stop := make(chan struct{})
	maxSeen := before
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if ai, err := js.AccountInfo(ctx); err == nil {
				maxSeen = max(maxSeen, ai.Consumers)
			}
		}
	})
	var readers sync.WaitGroup
	for w := range 20 {
		readers.Go(func() {
			for i := range 20 {
				// Each writer's own write is seen by its next read.
				name := fmt.Sprintf("w%d-%d", w, i)
				if w%4 == 0 {
					if err := s.PutProcess(ctx, proc("web", name)); err != nil {
						t.Error(err)
						return
					}
				}
				ps, err := s.Processes(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if w%4 == 0 && !slices.ContainsFunc(ps, func(d model.ProcessDef) bool { return d.Process.Meta.Name == name }) {
					t.Errorf("Processes after PutProcess %s: not listed", name)
				}
			}
		})
	}
	readers.Wait()
	close(stop)
	wg.Wait()
	if maxSeen > before {
		t.Fatalf("consumers rose from %d to %d under 400 concurrent Processes calls", before, maxSeen)
	}
	ps, err := s.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1+5*20 {
		t.Fatalf("%d definitions, want %d", len(ps), 1+5*20)
	}
	if err := s.DeleteProcess(ctx, "web:p0"); err != nil {
		t.Fatal(err)
	}
	if ps, _ := s.Processes(ctx); len(ps) != 5*20 {
		t.Fatalf("after delete: %d definitions, want %d", len(ps), 5*20)
	}
}
