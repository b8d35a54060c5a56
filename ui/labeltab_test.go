package ui

import (
	"maps"
	"testing"
)

// TestLabelTabSetIDs: a host's labels given as ids into a listing's table
// (setIDs) make the set their map makes (set): in SortedLabels' order,
// two pairs of one key one label (the last, as in a map made of them), a
// pair the table holds twice one pair of the rows' table.
func TestLabelTabSetIDs(t *testing.T) {
	pairs := [][2]string{{"zone", "z1"}, {"os", "linux"}, {"rack", "r1"}, {"zone", "z2"}, {"os", "linux"}, {"a", "1"}, {"a=b", "0"}, {"a", ""}}
	for _, ids := range [][]uint32{nil, {0}, {0, 1, 2}, {2, 1, 0}, {0, 3}, {3, 0}, {1, 4}, {5, 6, 7}, {7, 6, 5, 0, 1, 2, 3, 4}, {6, 5}} {
		var ti, tm labelTab
		byIDs := ti.setIDs(pairs, ids)
		m := map[string]string{}
		for _, id := range ids {
			m[pairs[id][0]] = pairs[id][1]
		}
		byMap := tm.set(m)
		if byIDs.text() != byMap.text() || !maps.Equal(byIDs.toMap(), byMap.toMap()) || byIDs.len() != len(m) {
			t.Errorf("ids %v: %q, want %q", ids, byIDs.text(), byMap.text())
		}
	}
	// One table, many hosts: each distinct pair held once.
	var tab labelTab
	a := tab.setIDs(pairs, []uint32{1, 0})
	b := tab.setIDs(pairs, []uint32{4, 3, 2})
	if len(tab.pairs) != 4 || a.text() != "os=linux zone=z1" || b.text() != "os=linux rack=r1 zone=z2" {
		t.Fatalf("pairs %v; sets %q, %q", tab.pairs, a.text(), b.text())
	}
}

// One labelTab across two listings whose tables have the same length: the
// second listing's ids name its own table's pairs, not the first's (the
// lookup of the table being read was told apart by its length alone).
func TestLabelTabSetIDsNextListing(t *testing.T) {
	var tab labelTab
	first := [][2]string{{"zone", "z1"}, {"os", "linux"}}
	second := [][2]string{{"zone", "z9"}, {"os", "bsd"}}
	if got := tab.setIDs(first, []uint32{0, 1}).text(); got != "os=linux zone=z1" {
		t.Fatalf("first listing: %q", got)
	}
	if got := tab.setIDs(second, []uint32{0, 1}).text(); got != "os=bsd zone=z9" {
		t.Fatalf("second listing, a table of the same length: %q, want its own pairs", got)
	}
}
