//go:build !windows

package cputime

import (
	"testing"
	"time"
)

// TestSelfGrows: a busy loop of the process shows in its CPU time. The
// loop is bounded by a generous wall time (a loaded machine runs it
// slowly, never for a minute without 10 ms of CPU), so a Self that does
// not grow fails instead of spinning until the test binary's timeout.
func TestSelfGrows(t *testing.T) {
	before := Self()
	if before <= 0 {
		t.Fatalf("CPU time %s before any work; want some (the test's start)", before)
	}
	x := 0
	for end := time.Now().Add(time.Minute); Self()-before < 10*time.Millisecond; {
		if time.Now().After(end) {
			t.Fatalf("CPU time grew %s over a minute of a busy loop; want 10 ms", Self()-before)
		}
		for i := range 1 << 16 {
			x += i
		}
	}
	_ = x
}
