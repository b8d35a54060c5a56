package engine

import (
	"slices"
	"sync"

	"gseproc/model"
)

// hostLayout is the matching definitions on each host of an inventory, as
// a full listing (eachHost) walks them: hosts numbered by their first
// place in the inventory, and the (host, definition) pairs laid out flat
// by host, in definition order: two arrays instead of a slice per host
// (100,000 of them for a listing).
type hostLayout struct {
	first []int32 // host p's definitions: defAt[first[p]:first[p+1]]
	defAt []int32 // indexes into the registry the layout was made from
	used  int     // hosts with a definition
	// pos is each host's first place in the inventory, nil when every
	// host is listed once (then host k's first place is k).
	pos map[model.Host]int32
}

// layOut lays out the definitions defs[match] over inv.
func layOut(inv []model.HostInfo, defs []model.ProcessDef, match []int32) *hostLayout {
	pos := make(map[model.Host]int32, len(inv))
	for i := len(inv) - 1; i >= 0; i-- {
		pos[inv[i].Host] = int32(i)
	}
	type pair struct{ host, def int32 }
	most := 0 // pairs at most: the matching definitions' hosts
	for _, i := range match {
		most += len(defs[i].Hosts)
	}
	pairs := make([]pair, 0, most)
	first := make([]int32, len(inv)+1)
	for _, i := range match {
		for _, h := range defs[i].Hosts {
			if p, ok := pos[h]; ok {
				pairs = append(pairs, pair{p, i})
				first[p+1]++
			}
		}
	}
	for p := 1; p < len(first); p++ {
		first[p] += first[p-1]
	}
	defAt := make([]int32, len(pairs))
	next := slices.Clone(first[:len(inv)])
	for _, pr := range pairs {
		defAt[next[pr.host]] = pr.def
		next[pr.host]++
	}
	l := &hostLayout{first: first, defAt: defAt}
	for p := range len(inv) {
		if first[p+1] > first[p] {
			l.used++
		}
	}
	if len(pos) != len(inv) {
		l.pos = pos
	}
	return l
}

// defs returns the definitions (indexes into the registry) on the host at
// place k of the inventory.
func (l *hostLayout) defs(k int, h model.Host) []int32 {
	p := int32(k)
	if l.pos != nil {
		p = l.pos[h]
	}
	return l.defAt[l.first[p]:l.first[p+1]]
}

// hostLayouts keeps the last few layouts made, each with what it was made
// from, for the next listing of the same hosts and definitions: making
// one (a map of 100,000 hosts, a lookup per deployment) was a third of
// the engine's time listing 100,000 hosts, each time a list opened.
type hostLayouts struct {
	mu   sync.Mutex
	kept []*keptLayout // newest last
}

// keptLayouts is how many layouts hostLayouts keeps (a few lists open).
const keptLayouts = 4

// keptLayout is a layout and what it was made from: the inventory's hosts
// in order and, for each matching definition, its place in the registry,
// key, revision and number of hosts (a stored definition's revision
// changes with any change to it, as model.HostIndex relies on too).
type keptLayout struct {
	hosts []model.Host
	defs  []layoutDef
	l     *hostLayout
}

type layoutDef struct {
	at    int32
	key   string
	rev   uint64
	hosts int
}

// layoutKey is what defs[match] are, for keptLayout; ok is false when a
// definition has no revision (not stored: its hosts may change unseen).
func layoutKey(defs []model.ProcessDef, keys []string, match []int32) (out []layoutDef, ok bool) {
	out = make([]layoutDef, len(match))
	for j, i := range match {
		d := &defs[i]
		if d.Rev == 0 {
			return nil, false
		}
		out[j] = layoutDef{at: i, key: keys[i], rev: d.Rev, hosts: len(d.Hosts)}
	}
	return out, true
}

// get returns the layout of defs[match] over inv: a kept one made from the
// same hosts and definitions, or a new one (kept when it can be).
func (c *hostLayouts) get(inv []model.HostInfo, defs []model.ProcessDef, keys []string, match []int32) *hostLayout {
	key, ok := layoutKey(defs, keys, match)
	if !ok {
		return layOut(inv, defs, match)
	}
	var hosts []model.Host // the kept hosts inv lists, if any
	c.mu.Lock()
	for i := len(c.kept) - 1; i >= 0; i-- {
		k := c.kept[i]
		if !sameHosts(k.hosts, inv) {
			continue
		}
		if slices.Equal(k.defs, key) {
			c.mu.Unlock()
			return k.l
		}
		hosts = k.hosts
	}
	c.mu.Unlock()
	l := layOut(inv, defs, match)
	if hosts == nil {
		// Else the layouts of one inventory share its hosts (2.4 MB
		// for 100,000): a list per namespace, for one.
		hosts = make([]model.Host, len(inv))
		for i := range inv {
			hosts[i] = inv[i].Host
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.kept) >= keptLayouts {
		c.kept = slices.Delete(c.kept, 0, len(c.kept)-keptLayouts+1)
	}
	c.kept = append(c.kept, &keptLayout{hosts: hosts, defs: key, l: l})
	return l
}

// sameHosts reports whether inv lists hosts, in that order.
func sameHosts(hosts []model.Host, inv []model.HostInfo) bool {
	if len(hosts) != len(inv) {
		return false
	}
	for i := range inv {
		if inv[i].Host != hosts[i] {
			return false
		}
	}
	return true
}
