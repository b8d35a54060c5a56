package jsstore

import (
	"fmt"
	"testing"

	"gseproc/model"
)

// TestTargetPairs: every target is found at its index by its pair (host
// and process; the agent id the request named it by does not count),
// whatever the order; a pair not among them is not found; a pair given
// twice is the later one's, and dup names the first target whose pair an
// earlier one had.
func TestTargetPairs(t *testing.T) {
	tg := func(cloud int, ip, proc, agent string) model.Target {
		return model.Target{Host: model.Host{CloudID: cloud, IP: ip}, ProcKey: proc, AgentID: agent}
	}
	for _, c := range []struct {
		name    string
		targets []model.Target
		dup     int
		find    []model.Target // each with its wanted index in want
		want    []int          // -1: not found
	}{
		{"none", nil, -1, []model.Target{tg(0, "10.0.0.1", "ns:a", "")}, []int{-1}},
		{"one", []model.Target{tg(0, "10.0.0.1", "ns:a", "A")}, -1,
			[]model.Target{tg(0, "10.0.0.1", "ns:a", ""), tg(0, "10.0.0.1", "ns:b", ""), tg(1, "10.0.0.1", "ns:a", ""), tg(0, "10.0.0.2", "ns:a", "")},
			[]int{0, -1, -1, -1}},
		{"by cloud, ip then process", []model.Target{
			tg(2, "10.0.0.1", "ns:a", ""), tg(0, "10.0.0.9", "ns:b", ""), tg(0, "10.0.0.9", "ns:a", ""),
			tg(1, "10.0.0.1", "ns:a", ""), tg(0, "10.0.0.10", "ns:a", ""),
		}, -1,
			[]model.Target{tg(0, "10.0.0.9", "ns:a", ""), tg(0, "10.0.0.9", "ns:b", ""), tg(0, "10.0.0.10", "ns:a", ""),
				tg(1, "10.0.0.1", "ns:a", ""), tg(2, "10.0.0.1", "ns:a", ""), tg(3, "10.0.0.1", "ns:a", ""), tg(0, "10.0.0.9", "ns:c", "")},
			[]int{2, 1, 4, 3, 0, -1, -1}},
		{"twice", []model.Target{
			tg(0, "10.0.0.1", "ns:a", ""), tg(0, "10.0.0.2", "ns:a", ""), tg(0, "10.0.0.3", "ns:a", ""),
			tg(0, "10.0.0.2", "ns:a", "B"), tg(0, "10.0.0.1", "ns:a", "A"),
		}, 3,
			[]model.Target{tg(0, "10.0.0.1", "ns:a", ""), tg(0, "10.0.0.2", "ns:a", ""), tg(0, "10.0.0.3", "ns:a", "")},
			[]int{4, 3, 2}},
	} {
		x, dup := newTargetPairs(c.targets)
		if dup != c.dup {
			t.Errorf("%s: dup = %d, want %d", c.name, dup, c.dup)
		}
		for k, f := range c.find {
			i, ok := x.find(f.Host, f.ProcKey)
			if want := c.want[k]; (want < 0) == ok || (ok && i != want) {
				t.Errorf("%s: find(%v, %s) = %d, %v; want %d", c.name, f.Host, f.ProcKey, i, ok, want)
			}
		}
	}
	// Many: each found at its own index.
	var many []model.Target
	for i := range 3000 {
		many = append(many, tg(i%3, fmt.Sprintf("10.%d.%d.%d", i%7, i/256%256, i%256), fmt.Sprintf("ns:p%d", i%5), ""))
	}
	x, dup := newTargetPairs(many)
	if dup != -1 || len(x) != len(many) {
		t.Fatalf("3000 distinct: dup %d, %d pairs", dup, len(x))
	}
	for i, g := range many {
		if k, ok := x.find(g.Host, g.ProcKey); !ok || k != i {
			t.Fatalf("target %d (%v %s): found %d, %v", i, g.Host, g.ProcKey, k, ok)
		}
	}
}
