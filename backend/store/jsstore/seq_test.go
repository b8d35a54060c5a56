package jsstore

import (
	"sync"
	"testing"
	"time"
)

// TestNextSeqReservesAhead: numbers from two stores on the same buckets,
// taken concurrently, never repeat; once half a block is handed out, the
// next block is reserved without a caller asking (the seq key is written
// again), and the numbers go on from it; a store closed while reserving
// one ahead closes (Close waits for the reservation).
func TestNextSeqReservesAhead(t *testing.T) {
	emb := startNATS(t, natsCfg(t, t.TempDir()))
	a, b := open(t, emb, Options{}), open(t, emb, Options{})
	ctx := tctx(t)
	rev := func() uint64 {
		t.Helper()
		e, err := a.on().seq.Get(ctx, "seq")
		if err != nil {
			t.Fatal(err)
		}
		return e.Revision()
	}

	first, err := a.NextSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r0 := rev()
	for range seqBlock / 2 {
		if _, err := a.NextSeq(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Half the block handed out: the next one is reserved ahead.
	for deadline := time.Now().Add(time.Minute); rev() == r0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no block reserved ahead after %d numbers of a block of %d", seqBlock/2+1, seqBlock)
		}
	}
	if first != r0*seqBlock {
		t.Fatalf("first number %d, want %d (revision %d times the block)", first, r0*seqBlock, r0)
	}

	// Concurrent callers on both stores: every number once.
	const perCaller = 3 * seqBlock
	var mu sync.Mutex
	seen := map[uint64]bool{first: true}
	var wg sync.WaitGroup
	for _, s := range []*Store{a, a, b, b} {
		wg.Go(func() {
			for range perCaller {
				n, err := s.NextSeq(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[n] {
					t.Errorf("number %d handed out twice", n)
				}
				seen[n] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if want := 4*perCaller + 1; len(seen) != want && !t.Failed() {
		t.Fatalf("%d numbers, want %d", len(seen), want)
	}

	// Closed with a reservation due or in flight: Close returns (it
	// waits for the reservation's goroutine), and no number is handed out
	// after.
	c := open(t, emb, Options{})
	for range seqBlock/2 + 1 {
		if _, err := c.NextSeq(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NextSeq(ctx); err == nil {
		t.Fatal("a closed store handed out a number")
	}
}
