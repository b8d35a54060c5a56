package jsstore

import (
	"cmp"
	"slices"
	"strings"

	"gseproc/model"
)

// targetPairs finds a task's targets by their pair (host and process): each
// target's pair and index in the task, sorted by pair. It is what a task's
// results are stored by (a result's key is its target's index) while the
// task runs. 48 bytes a target, the strings the targets' own; a map from
// model.Target to the index was about 130 (10-12 MB held by an op over
// 100,000 hosts for as long as it ran, heap profile of bench fleet).
type targetPairs []targetPair

type targetPair struct {
	ip, proc string
	cloud    int
	i        int32
}

func comparePair(a targetPair, cloud int, ip, proc string) int {
	if c := cmp.Compare(a.cloud, cloud); c != 0 {
		return c
	}
	if c := strings.Compare(a.ip, ip); c != 0 {
		return c
	}
	return strings.Compare(a.proc, proc)
}

// newTargetPairs indexes targets; dup is the index of a target whose pair
// an earlier one has (-1: none). Of two with one pair, find returns the
// later, as the map did.
func newTargetPairs(targets []model.Target) (x targetPairs, dup int) {
	x = make(targetPairs, len(targets))
	for i, tg := range targets {
		x[i] = targetPair{ip: tg.Host.IP, proc: tg.ProcKey, cloud: tg.Host.CloudID, i: int32(i)}
	}
	// Stable: targets of one pair stay in their order, the later after.
	slices.SortStableFunc(x, func(a, b targetPair) int { return comparePair(a, b.cloud, b.ip, b.proc) })
	dup = -1
	out := x[:0]
	for k, p := range x {
		if k > 0 && comparePair(x[k-1], p.cloud, p.ip, p.proc) == 0 {
			if dup < 0 || int(p.i) < dup {
				dup = int(p.i)
			}
			out[len(out)-1] = p // the later one
			continue
		}
		out = append(out, p)
	}
	return slices.Clip(out), dup
}

// find is the index of the target of host h and process proc.
func (x targetPairs) find(h model.Host, proc string) (int, bool) {
	k, ok := slices.BinarySearchFunc(x, h, func(p targetPair, h model.Host) int { return comparePair(p, h.CloudID, h.IP, proc) })
	if !ok {
		return 0, false
	}
	return int(x[k].i), true
}
