package ui

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"gseproc/model"
)

// TestSortByHostKey: rows of plain IPv4 hosts in host order (the list's
// own, by IP, reversed or not) are ordered as a stable sort by
// model.HostOrder orders them, a host listed twice in row order; a host
// that is not plain leaves the rows to sortRows' general sort, which
// orders them the same way.
func TestSortByHostKey(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var rows []hostRow
	for i := range 3000 {
		h := model.Host{IP: fmt.Sprintf("10.%d.%d.%d", rnd.IntN(3), rnd.IntN(256), rnd.IntN(256)), CloudID: rnd.IntN(3)}
		rows = append(rows, hostRow{v: hostView{Host: h, AgentID: fmt.Sprint(i)}})
	}
	rows = append(rows, rows[7], rows[100]) // listed twice
	rows[7].v.AgentID, rows[len(rows)-2].v.AgentID = "first", "second"
	want := func(in []hostRow, desc bool) []string {
		s := slices.Clone(in)
		slices.SortStableFunc(s, func(a, b hostRow) int {
			c := a.v.Host.Order().Compare(b.v.Host.Order())
			if desc {
				return -c
			}
			return c
		})
		var out []string
		for _, r := range s {
			out = append(out, r.v.Host.AgentID()+"/"+r.v.AgentID)
		}
		return out
	}
	got := func(p *hostsPage) []string {
		var out []string
		for _, r := range p.rows {
			out = append(out, r.v.Host.AgentID()+"/"+r.v.AgentID)
		}
		return out
	}
	other := slices.Clone(rows)
	other = append(other, hostRow{v: hostView{Host: model.Host{IP: "fd00::1", CloudID: 1}, AgentID: "v6"}})
	for _, st := range []sortState{{col: -1}, {col: -1, desc: true}, {col: 1}, {col: 1, desc: true}} {
		for name, in := range map[string][]hostRow{"plain": rows, "with an IPv6 host": other} {
			p := &hostsPage{rows: slices.Clone(in), sort: st}
			p.sortRows()
			if g, w := got(p), want(in, st.desc); !slices.Equal(g, w) {
				t.Fatalf("%s, %+v: %v..., want %v...", name, st, g[:8], w[:8])
			}
		}
	}
	p := &hostsPage{rows: slices.Clone(other)}
	if p.sortByHostKey() || !slices.Equal(got(p), got(&hostsPage{rows: other})) {
		t.Fatal("a host that is not plain: rows changed by sortByHostKey")
	}
}
