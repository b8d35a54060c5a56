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

// TestSlotBlockFreeOnlyOnceEveryResultGivenBack: a block of result room
// is emptied and free again only once each of its results is given back
// (stored by the writer, or never handed out), never while one is still
// to be stored.
func TestSlotBlockFreeOnlyOnceEveryResultGivenBack(t *testing.T) {
	for _, tc := range []struct {
		name          string
		stored, never int // results given back as stored, and never handed out
	}{
		{"all stored", resultBlock, 0},
		{"some never handed out", 5, resultBlock - 5},
		{"none handed out", 0, resultBlock},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p slotBlocks
			b := p.get()
			for i := range b.rs {
				b.rs[i].TaskID = "T"
			}
			p.put(b, tc.never)
			for i := range tc.stored {
				if b.rs[0].TaskID != "T" || b.rs[resultBlock-1].TaskID != "T" {
					t.Fatalf("block emptied with %d of its results still to give back", tc.stored-i)
				}
				p.put(b, 1)
			}
			if b.left.Load() != 0 {
				t.Fatalf("%d results not given back", b.left.Load())
			}
			for i := range b.rs {
				if b.rs[i] != (model.Result{}) {
					t.Fatalf("free block still holds result %d", i)
				}
			}
		})
	}
}
