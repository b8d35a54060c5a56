package engine_test

import (
	"context"
	"reflect"
	"testing"

	"gseproc/backend"
	"gseproc/backend/engine"
	"gseproc/model"
)

var _ backend.TaskSummarizer = (*engine.Engine)(nil)

// TestTaskSummary: TaskSummary is Task without its results, whether the
// engine holds the task's run or reads it from its store (another engine
// over the same store, as after a restart), so a console's watch reads
// its task without a copy of every result.
func TestTaskSummary(t *testing.T) {
	ctx := context.Background()
	f := newFake(6)
	e, st := start(t, f, testCfg())
	task, _ := operate(t, e, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns"}})
	check := func(e *engine.Engine, held string) {
		t.Helper()
		whole, err := e.Task(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := e.TaskSummary(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(whole.Results) != 9 || sum.Results != nil {
			t.Fatalf("%s: Task has %d results, TaskSummary %d; want 9 and none", held, len(whole.Results), len(sum.Results))
		}
		whole.Results = nil
		if !reflect.DeepEqual(sum, whole) {
			t.Fatalf("%s: TaskSummary\n%+v\nwant Task's\n%+v", held, sum, whole)
		}
	}
	check(e, "run held")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	other := engine.New(testCfg(), f, f, st)
	if err := other.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	check(other, "from the store")
	if _, err := other.TaskSummary(ctx, "no-such-task"); err == nil {
		t.Fatal("TaskSummary of no task: no error")
	}
}
