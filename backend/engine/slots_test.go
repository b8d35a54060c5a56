package engine

import (
	"fmt"
	"testing"
	"time"

	"gseproc/model"
)

// TestSlotsNoBiggerThanTheTargetsLeft: the room taken for results handed
// to the writer is never more than the targets not final yet, so a task
// of one target takes one result's room and a finished run holds none.
func TestSlotsNoBiggerThanTheTargetsLeft(t *testing.T) {
	for _, n := range []int{1, 3, resultBlock, resultBlock + 1, 3*resultBlock + 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			targets := make([]model.Target, n)
			for i := range targets {
				targets[i] = model.Target{Host: model.Host{IP: fmt.Sprintf("10.0.%d.%d", i/256, i%256)}, ProcKey: "ns:p"}
			}
			r := newRun(model.Task{ID: "T"}, targets, map[string]model.Process{}, nil)
			taken := 0
			for i := range n {
				r.mu.Lock()
				res := r.result(i)
				res.State = model.StateSuccess
				res, _ = r.finishLocked(i, res, time.Now())
				if len(r.slots) == 0 {
					taken += min(resultBlock, n-i)
				}
				p := r.slotLocked()
				*p = res
				r.mu.Unlock()
				if p.Seq != int64(i+1) {
					t.Fatalf("result %d handed over with Seq %d", i, p.Seq)
				}
			}
			if len(r.slots) != 0 {
				t.Errorf("a finished run of %d targets holds room for %d results", n, len(r.slots))
			}
			if taken != n {
				t.Errorf("room for %d results taken for %d targets", taken, n)
			}
		})
	}
}
