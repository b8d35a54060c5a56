package model

import (
	"fmt"
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
