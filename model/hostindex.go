package model

import "sync"

// HostIndex finds hosts in definitions' host lists without walking them:
// for each definition (by key) it keeps, for its revision, the position
// of every host (bare) in its list, built on first use. A check of a few
// hosts against a definition deployed on 100,000 costs a few lookups.
// Definitions without a revision (inline, not stored) or with short lists
// are not cached. Safe for concurrent use.
type HostIndex struct {
	mu sync.Mutex
	m  map[string]hostPositions
}

type hostPositions struct {
	rev uint64
	n   int
	pos map[Host]int
}

// hostIndexMin is the shortest host list worth an index; hostIndexMax
// bounds the definitions indexed (beyond it the index starts over).
const (
	hostIndexMin = 64
	hostIndexMax = 4096
)

// Positions returns each bare host of d.Hosts with its first position.
// The map is shared: do not modify it.
func (x *HostIndex) Positions(d ProcessDef) map[Host]int {
	if d.Rev == 0 || len(d.Hosts) < hostIndexMin {
		return positions(d.Hosts)
	}
	key := d.Process.Key()
	x.mu.Lock()
	p, ok := x.m[key]
	x.mu.Unlock()
	if ok && p.rev == d.Rev && p.n == len(d.Hosts) {
		return p.pos
	}
	p = hostPositions{rev: d.Rev, n: len(d.Hosts), pos: positions(d.Hosts)}
	x.mu.Lock()
	if x.m == nil || len(x.m) >= hostIndexMax {
		x.m = map[string]hostPositions{}
	}
	x.m[key] = p
	x.mu.Unlock()
	return p.pos
}

// Distinct reports whether d.Hosts lists no host twice, as its cached
// positions say (built on first use, as Positions does). False for a
// definition that is not cached (no revision, a short list): the caller
// checks for itself.
func (x *HostIndex) Distinct(d ProcessDef) bool {
	if d.Rev == 0 || len(d.Hosts) < hostIndexMin {
		return false
	}
	return len(x.Positions(d)) == len(d.Hosts)
}

func positions(hs []Host) map[Host]int {
	pos := make(map[Host]int, len(hs))
	for i, h := range hs {
		if _, dup := pos[h]; !dup {
			pos[h] = i
		}
	}
	return pos
}
