package jsstore

import (
	"context"
	"testing"
	"time"

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
