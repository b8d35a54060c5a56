package model

import (
	"hash/maphash"
	"math/bits"
	"sync"
)

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
	pos      *HostPositions // nil until Positions
}

// hostIndexMin is the shortest host list worth an index; hostIndexMax
// bounds the definitions indexed (beyond it the index starts over).
const (
	hostIndexMin = 64
	hostIndexMax = 4096
)

// Positions returns each bare host of d.Hosts with its first position,
// shared (read-only).
func (x *HostIndex) Positions(d ProcessDef) *HostPositions {
	if d.Rev == 0 || len(d.Hosts) < hostIndexMin {
		return positions(d.Hosts)
	}
	key := d.Process.Key()
	if p, ok := x.cached(key, d); ok && p.pos != nil {
		return p.pos
	}
	pos := positions(d.Hosts)
	x.keep(key, hostPositions{rev: d.Rev, n: len(d.Hosts), distinct: pos.Len() == len(d.Hosts), pos: pos})
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
	// A table of positions made for the answer: a set of the hosts (a
	// map[Host]struct{}) was 62 bytes a host, 5.2 MB for the 84,000 of
	// the fleet's op (BenchmarkHostPositions/set; the table 12.5 B),
	// made on the first op over each revision (BenchmarkResolve/first).
	distinct := positions(d.Hosts).Len() == len(d.Hosts)
	x.keep(key, hostPositions{rev: d.Rev, n: len(d.Hosts), distinct: distinct})
	return distinct
}

// HostPositions finds a host's first position in a host list: an
// open-addressed table of positions + 1 (0: empty) over the list, which it
// shares, at most half full. A map of the positions was 12 MB kept for a
// definition deployed on 100,000 hosts (the console's first page of a host
// list asks for them); the table is 1 MB.
type HostPositions struct {
	hosts []Host
	seed  maphash.Seed
	slots []uint32
	n     int // distinct hosts
}

func positions(hs []Host) *HostPositions {
	p := &HostPositions{hosts: hs, seed: maphash.MakeSeed()}
	size := 1 << bits.Len(uint(2*len(hs))) // a power of two, more than twice the hosts
	p.slots = make([]uint32, size)
	mask := uint64(size - 1)
	for i, h := range hs {
		for s := p.hash(h) & mask; ; s = (s + 1) & mask {
			k := p.slots[s]
			if k == 0 {
				p.slots[s] = uint32(i + 1)
				p.n++
				break
			}
			if hs[k-1] == h {
				break // listed before: the first position counts
			}
		}
	}
	return p
}

func (p *HostPositions) hash(h Host) uint64 { return maphash.Comparable(p.seed, h) }

// Find is h's first position in the list (ok false: not in it).
func (p *HostPositions) Find(h Host) (i int, ok bool) {
	mask := uint64(len(p.slots) - 1)
	for s := p.hash(h) & mask; ; s = (s + 1) & mask {
		k := p.slots[s]
		if k == 0 {
			return 0, false
		}
		if p.hosts[k-1] == h {
			return int(k - 1), true
		}
	}
}

// Len is the number of distinct hosts in the list.
func (p *HostPositions) Len() int { return p.n }
