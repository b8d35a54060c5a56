package node

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestPaceSimGC: a sim process paces its collector by SimGCPercent until
// restored, and leaves it alone when the environment sets GOGC.
func TestPaceSimGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	if _, set := os.LookupEnv("GOGC"); !set {
		restore := PaceSimGC()
		if got := debug.SetGCPercent(SimGCPercent); got != SimGCPercent {
			t.Errorf("GC percent %d, want %d", got, SimGCPercent)
		}
		restore()
		if got := debug.SetGCPercent(100); got != 100 {
			t.Errorf("GC percent %d once restored, want 100 again", got)
		}
	}
	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	PaceSimGC()()
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("GC percent %d with GOGC=150 set, want it left alone", got)
	}
}
