package model

import (
	"fmt"
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
	if len(pos) != 100 {
		t.Fatalf("%d hosts indexed, want 100", len(pos))
	}
	if i, ok := pos[Host{IP: "10.0.0.5", CloudID: 1}]; !ok || i != 5 {
		t.Fatalf("10.0.0.5 at %d (%v), want 5", i, ok)
	}
	if _, ok := pos[Host{IP: "10.0.0.5", CloudID: 0}]; ok {
		t.Fatal("another cloud's host found")
	}
	// Cached for the revision; a new revision is indexed again.
	d2 := d
	d2.Hosts = hosts[:80]
	if p := x.Positions(d2); len(p) != 80 {
		t.Fatalf("same revision, shorter list: %d hosts, want 80 (the length is part of the key)", len(p))
	}
	d3 := d
	d3.Rev = 4
	d3.Hosts = hosts[50:]
	if _, ok := x.Positions(d3)[Host{IP: "10.0.0.1", CloudID: 1}]; ok {
		t.Fatal("revision 4 answered from revision 3's index")
	}
	// Without a revision (inline definitions) nothing is cached.
	d4 := d
	d4.Rev = 0
	d4.Hosts = hosts[:70]
	if p := x.Positions(d4); len(p) != 70 {
		t.Fatalf("inline definition: %d hosts, want 70", len(p))
	}
}
