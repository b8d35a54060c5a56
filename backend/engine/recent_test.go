package engine

import (
	"fmt"
	"testing"

	"gseproc/model"
)

// TestRecentRunsBounded: the completed runs an engine keeps in memory
// (recentRuns) are bounded by their targets and their number whatever
// the runs that end, so a server that runs ops for months holds no more
// of them than the bounds. This is what grew over the first runs of a
// long bench fleet (10 runs over 10,000 hosts: live heap 27 -> 48 MB, up
// to 50 MB at run 17 and no more, the bound of 150,000 targets). Each
// step's kept runs are counted again from the runs themselves.
func TestRecentRunsBounded(t *testing.T) {
	shared := make([]model.Target, recentMaxTargets+1) // only their number counts
	mk := func(id string, n int) *run {
		return &run{task: model.Task{ID: id}, targets: shared[:n]}
	}
	check := func(t *testing.T, x *recentRuns, step string) {
		t.Helper()
		held := 0
		for _, id := range x.order {
			r := x.byID[id]
			if r == nil {
				t.Fatalf("%s: %s in the order but not kept", step, id)
			}
			held += len(r.targets)
		}
		if len(x.byID) != len(x.order) || held != x.targets {
			t.Fatalf("%s: %d runs kept, %d in the order; %d targets held, counted %d", step, len(x.byID), len(x.order), held, x.targets)
		}
		if x.targets > recentMaxTargets || len(x.order) > recentMaxRuns {
			t.Fatalf("%s: %d targets in %d runs kept, over the bounds (%d targets, %d runs)", step, x.targets, len(x.order), recentMaxTargets, recentMaxRuns)
		}
	}
	for _, c := range []struct {
		name string
		runs int
		size func(i int) int
	}{
		{"10,000 hosts' op, 100 times", 100, func(int) int { return 8426 }},
		{"100,000 hosts' op, 10 times", 10, func(int) int { return 83892 }},
		{"one target, past the run bound", recentMaxRuns + 500, func(int) int { return 1 }},
		{"sizes mixed", 600, func(i int) int { return []int{1, 7, 3000, 100000, 42, 149999, recentMaxTargets}[i%7] }},
		{"bigger than the bound: not kept", 3, func(int) int { return recentMaxTargets + 1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var x recentRuns
			for i := range c.runs {
				n := c.size(i)
				id := fmt.Sprintf("T%d", i)
				x.reserve(n, recentMaxRuns) // its launch
				check(t, &x, id+" launched")
				x.add(mk(id, n)) // its end
				check(t, &x, id+" ended")
				if kept := x.get(id) != nil; kept != (n <= recentMaxTargets) {
					t.Fatalf("%s of %d targets: kept %v", id, n, kept)
				}
			}
		})
	}
}
