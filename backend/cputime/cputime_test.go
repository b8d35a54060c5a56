//go:build !windows

package cputime

import (
	"testing"
	"time"
)

// TestSelfGrows: a busy loop of the process shows in its CPU time.
func TestSelfGrows(t *testing.T) {
	before := Self()
	if before <= 0 {
		t.Fatalf("CPU time %s before any work; want some (the test's start)", before)
	}
	x := 0
	for Self()-before < 10*time.Millisecond {
		for i := range 1 << 16 {
			x += i
		}
	}
	_ = x
}
