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

// hostPositions is what is known of a definition's host list at a
// revision: whether it lists no host twice, and the positions once asked
// for. A fan-out over a definition asks only the first (resolve), and the
// positions of its 84,000 hosts were 6-7 MB held for it (heap profile of
// bench fleet at 100,000 hosts): they are made only for a caller that
// finds hosts in the list.
type hostPositions struct {
	rev      uint64
	n        int
	distinct bool
	pos      map[Host]int // nil until Positions
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
	if p, ok := x.cached(key, d); ok && p.pos != nil {
		return p.pos
	}
	pos := positions(d.Hosts)
	x.keep(key, hostPositions{rev: d.Rev, n: len(d.Hosts), distinct: len(pos) == len(d.Hosts), pos: pos})
	return pos
}

// cached is what is kept of d (under key), if it is of d's revision.
func (x *HostIndex) cached(key string, d ProcessDef) (hostPositions, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	p, ok := x.m[key]
	return p, ok && p.rev == d.Rev && p.n == len(d.Hosts)
}

// keep keeps p under key.
func (x *HostIndex) keep(key string, p hostPositions) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil || len(x.m) >= hostIndexMax {
		x.m = map[string]hostPositions{}
	}
	x.m[key] = p
}

// Distinct reports whether d.Hosts lists no host twice, found once per
// revision and kept (without the positions, which Positions makes when
// asked). False for a definition that is not cached (no revision, a short
// list): the caller checks for itself.
func (x *HostIndex) Distinct(d ProcessDef) bool {
	if d.Rev == 0 || len(d.Hosts) < hostIndexMin {
		return false
	}
	key := d.Process.Key()
	if p, ok := x.cached(key, d); ok {
		return p.distinct
	}
	seen := make(map[Host]struct{}, len(d.Hosts))
	for _, h := range d.Hosts {
		seen[h] = struct{}{}
	}
	distinct := len(seen) == len(d.Hosts)
	x.keep(key, hostPositions{rev: d.Rev, n: len(d.Hosts), distinct: distinct})
	return distinct
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
