package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"gseproc/backend"
	"gseproc/backend/engine"
	"gseproc/backend/store"
	"gseproc/model"
)

// failStatuses is a memory store whose status writes fail while fail is
// set.
type failStatuses struct {
	*store.Memory
	fail atomic.Bool
}

func (s *failStatuses) PutProcStatus(ctx context.Context, h model.Host, st model.ProcStatus) error {
	if s.fail.Load() {
		return errors.New("store down")
	}
	return s.Memory.PutProcStatus(ctx, h, st)
}

// TestStatusStoredAfterFailedWrite: a status whose write failed is written
// with the next report of it, though that report says the same (only a
// change, or one 5 minutes old, is stored otherwise).
func TestStatusStoredAfterFailedWrite(t *testing.T) {
	ctx := context.Background()
	st := &failStatuses{Memory: store.NewMemory()}
	p := proc("ns", "app", nil)
	h := hostN(0)
	if err := st.PutProcess(ctx, model.ProcessDef{Process: p, Hosts: []model.Host{h}}); err != nil {
		t.Fatal(err)
	}
	f := newFake(1)
	e := engine.New(testCfg(), f, f, st)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	status := backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns", Name: "app"}}
	st.fail.Store(true)
	operate(t, e, status) // complete: its status write was tried, and failed
	st.fail.Store(false)
	operate(t, e, status)
	all, err := st.Memory.ProcStatuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := all[h]; len(got) != 1 || got[0].PID != 42 {
		t.Fatalf("stored statuses of %s: %+v, want the one reported (pid 42)", h, got)
	}
}
