package jsstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gseproc/model"
)

// TestReadYourWritesAcrossStores: on a 3-node cluster with 3 replicas,
// what a store on one node writes is read back at once by a store on
// another node, over and over: the definitions (the registry index
// waits for the leader's last sequence), the task (never not found, never
// an older status), its targets, its results and the task listing (never
// missing a write), whichever replica answers.
func TestReadYourWritesAcrossStores(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node NATS cluster")
	}
	nodes := cluster3(t)
	a := open(t, nodes[0], Options{Replicas: 3})
	b := open(t, nodes[1], Options{Replicas: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// On the store's code before reads went to the leader, about one
	// round in 15 read a stale task.
	const rounds = 60
	stale := 0
	deadline := time.Now().Add(2 * time.Minute)
	for i := range rounds {
		if time.Now().After(deadline) {
			t.Fatalf("%d rounds of %d within the deadline", i, rounds)
		}
		d := proc("web", "nginx")
		d.Process.Meta.Labels = model.Labels{"round": fmt.Sprint(i)}
		if err := a.PutProcess(ctx, d); err != nil {
			t.Fatal(err)
		}
		if ds, err := b.Processes(ctx); err != nil || len(ds) != 1 || ds[0].Process.Meta.Labels["round"] != fmt.Sprint(i) {
			t.Errorf("round %d: B's definitions %+v, not the one A just wrote: %v", i, ds, err)
			stale++
		}
		id := fmt.Sprintf("T%03d", i)
		tg := targets(3)
		if err := a.PutTask(ctx, model.Task{ID: id, Op: model.OpStatus, Targets: len(tg), Status: model.TaskPending, Created: time.Now()}, tg); err != nil {
			t.Fatal(err)
		}
		got, gtg, err := b.Task(ctx, id)
		if err != nil || got.ID != id || len(gtg) != len(tg) {
			t.Errorf("round %d: B reads task %s: %+v, %d targets, %v", i, id, got, len(gtg), err)
			stale++
			continue
		}
		if err := a.PutResult(ctx, model.Result{TaskID: id, Host: tg[0].Host, ProcKey: tg[0].ProcKey, State: model.StateSuccess}); err != nil {
			t.Fatal(err)
		}
		if rs, err := b.Results(ctx, id); err != nil || len(rs) != 1 {
			t.Errorf("round %d: B reads %d results of %s, want 1: %v", i, len(rs), id, err)
			stale++
		}
		if err := a.UpdateTask(ctx, model.Task{ID: id, Op: model.OpStatus, Targets: len(tg), Status: model.TaskRunning, Created: got.Created}); err != nil {
			t.Fatal(err)
		}
		if got, _, err := b.Task(ctx, id); err != nil || got.Status != model.TaskRunning {
			t.Errorf("round %d: B reads task %s as %s after A stored it running: %v", i, id, got.Status, err)
			stale++
		}
		if ts, err := b.Tasks(ctx, 1); err != nil || len(ts) != 1 || ts[0].ID != id || ts[0].Status != model.TaskRunning {
			t.Errorf("round %d: B lists %+v, want %s running first: %v", i, ts, id, err)
			stale++
		}
		if stale > 10 {
			t.Fatalf("stopped after %d stale reads", stale)
		}
	}
}
