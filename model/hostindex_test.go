package model

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
)

func TestHostIndex(t *testing.T) {
	var hosts []Host
	for i := range 100 {
		hosts = append(hosts, Host{IP: fmt.Sprintf("10.0.0.%d", i), CloudID: i % 2})
	}
	hosts = append(hosts, Host{IP: "10.0.0.5", CloudID: 1}) // a duplicate: the first position counts
	d := ProcessDef{Process: Process{Meta: Meta{Namespace: "web", Name: "nginx"}}, Hosts: hosts, Rev: 3}
	var x HostIndex
	pos := x.Positions(d)
	if pos.Len() != 100 {
		t.Fatalf("%d hosts indexed, want 100", pos.Len())
	}
	for i, h := range hosts[:100] {
		if j, ok := pos.Find(h); !ok || j != i {
			t.Fatalf("%v at %d (%v), want %d", h, j, ok, i)
		}
	}
	if i, ok := pos.Find(Host{IP: "10.0.0.5", CloudID: 1}); !ok || i != 5 {
		t.Fatalf("10.0.0.5 at %d (%v), want 5", i, ok)
	}
	if _, ok := pos.Find(Host{IP: "10.0.0.5", CloudID: 0}); ok {
		t.Fatal("another cloud's host found")
	}
	// Cached for the revision; a new revision is indexed again.
	d2 := d
	d2.Hosts = hosts[:80]
	if p := x.Positions(d2); p.Len() != 80 {
		t.Fatalf("same revision, shorter list: %d hosts, want 80 (the length is part of the key)", p.Len())
	}
	d3 := d
	d3.Rev = 4
	d3.Hosts = hosts[50:]
	if _, ok := x.Positions(d3).Find(Host{IP: "10.0.0.1", CloudID: 1}); ok {
		t.Fatal("revision 4 answered from revision 3's index")
	}
	// Without a revision (inline definitions) nothing is cached.
	d4 := d
	d4.Rev = 0
	d4.Hosts = hosts[:70]
	if p := x.Positions(d4); p.Len() != 70 {
		t.Fatalf("inline definition: %d hosts, want 70", p.Len())
	}
}

// TestHostIndexDistinct: whether a definition lists a host twice is known
// per revision without its positions being made and kept (a fan-out asks
// only that; the positions of 84,000 hosts were 6-7 MB); positions asked
// for after are made then, and agree.
func TestHostIndexDistinct(t *testing.T) {
	var hosts []Host
	for i := range 100 {
		hosts = append(hosts, Host{IP: fmt.Sprintf("10.0.0.%d", i), CloudID: i % 2})
	}
	d := ProcessDef{Process: Process{Meta: Meta{Namespace: "web", Name: "nginx"}}, Hosts: hosts, Rev: 3}
	dup := ProcessDef{Process: Process{Meta: Meta{Namespace: "web", Name: "php"}}, Hosts: append(slices.Clone(hosts), hosts[7]), Rev: 5}
	var x HostIndex
	if !x.Distinct(d) || x.Distinct(dup) {
		t.Fatalf("distinct: %v (want true), with a host twice: %v (want false)", x.Distinct(d), x.Distinct(dup))
	}
	for _, k := range []string{d.Process.Key(), dup.Process.Key()} {
		if p := x.m[k]; p.pos != nil {
			t.Errorf("%s: positions of %d hosts kept for Distinct alone", k, p.pos.Len())
		}
	}
	if pos := x.Positions(dup); pos.Len() != 100 || at(pos, hosts[7]) != 7 {
		t.Fatalf("positions after Distinct: %d hosts, host 7 at %d", pos.Len(), at(pos, hosts[7]))
	}
	if x.Distinct(dup) || !x.Distinct(d) {
		t.Fatal("Distinct changed its answer once positions were made")
	}
	// A new revision is found again.
	d2 := d
	d2.Rev = 4
	d2.Hosts = append(slices.Clone(hosts), hosts[0])
	if x.Distinct(d2) {
		t.Fatal("revision 4 (a host twice) answered from revision 3")
	}
	// Positions first, then Distinct from them.
	var y HostIndex
	if y.Positions(dup).Len() != 100 || y.Distinct(dup) {
		t.Fatal("Distinct after Positions: a host twice not seen")
	}
}

// at is h's position in p, as a map's index gave it (0: none).
func at(p *HostPositions, h Host) int {
	i, _ := p.Find(h)
	return i
}

// HostPositions answers as a map of each host to its first position
// would, for lists with and without repeated hosts, a host in two clouds,
// and hosts not listed.
func TestHostPositions(t *testing.T) {
	many := make([]Host, 5000)
	for i := range many {
		many[i] = Host{IP: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), CloudID: i % 3}
	}
	for _, tc := range []struct {
		name  string
		hosts []Host
	}{
		{"none", nil},
		{"one", []Host{{IP: "10.0.0.1"}}},
		{"a host twice", []Host{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}, {IP: "10.0.0.1"}}},
		{"one address, two clouds", []Host{{IP: "10.0.0.1"}, {IP: "10.0.0.1", CloudID: 1}}},
		{"many", many},
		{"many, every host twice", append(slices.Clone(many), many...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := map[Host]int{}
			for i, h := range tc.hosts {
				if _, ok := want[h]; !ok {
					want[h] = i
				}
			}
			p := positions(tc.hosts)
			if p.Len() != len(want) {
				t.Fatalf("Len %d, want %d", p.Len(), len(want))
			}
			for h, i := range want {
				if got, ok := p.Find(h); !ok || got != i {
					t.Fatalf("Find(%v) = %d, %v; want %d", h, got, ok, i)
				}
			}
			for _, h := range []Host{{IP: "10.0.0.9"}, {IP: "10.0.0.1", CloudID: 7}, {IP: "192.168.0.1"}, {}} {
				if _, listed := want[h]; listed {
					continue
				}
				if got, ok := p.Find(h); ok {
					t.Fatalf("Find(%v) = %d: not listed", h, got)
				}
			}
		})
	}
}

// BenchmarkHostPositions is the heap kept for the positions of a
// definition's 84,000 hosts (the fleet's op target at 100,000 hosts), and
// the time to make them: "map" is the map of each host to its position
// HostIndex kept before, "set" the set of the hosts Distinct made before,
// "table" HostPositions.
func BenchmarkHostPositions(b *testing.B) {
	hosts := make([]Host, 84_000)
	for i := range hosts {
		hosts[i] = Host{IP: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)}
	}
	measure := func(b *testing.B, make func() any) {
		var keep any
		var live uint64
		for b.Loop() {
			b.StopTimer()
			keep = nil
			before := heapLive()
			b.StartTimer()
			keep = make()
			b.StopTimer()
			live = heapLive() - before
			b.StartTimer()
		}
		runtime.KeepAlive(keep)
		b.ReportMetric(float64(live)/float64(len(hosts)), "B/host")
	}
	b.Run("map", func(b *testing.B) {
		measure(b, func() any {
			pos := make(map[Host]int, len(hosts))
			for i, h := range hosts {
				if _, dup := pos[h]; !dup {
					pos[h] = i
				}
			}
			return pos
		})
	})
	b.Run("set", func(b *testing.B) {
		measure(b, func() any {
			seen := make(map[Host]struct{}, len(hosts))
			for _, h := range hosts {
				seen[h] = struct{}{}
			}
			return seen
		})
	})
	b.Run("table", func(b *testing.B) {
		measure(b, func() any { return positions(hosts) })
	})
	b.Run("find", func(b *testing.B) {
		p := positions(hosts)
		i := 0
		for b.Loop() {
			if _, ok := p.Find(hosts[i]); !ok {
				b.Fatal("not found")
			}
			i = (i + 7919) % len(hosts)
		}
	})
}

// heapLive is the live heap after a collection.
func heapLive() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
