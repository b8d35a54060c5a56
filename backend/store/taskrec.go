package store

import (
	"fmt"
	"hash/maphash"
	"math/bits"

	"gseproc/model"
)

// taskRec is a task as the memory store keeps it: its record, its targets
// and its results by target index (model.ResultTable, the compact form the
// engine's run keeps them in too). A task over 228,000 processes held 62
// MB of results and a 15 MB map of its targets (index); the table and
// index below hold 22 MB and 2 MB. Results gives each back whole, as it
// was put.
type taskRec struct {
	task    model.Task
	targets []model.Target
	index   pairIndex
	results model.ResultTable // by target index
	n       int               // results put
	roll    model.RollControl
}

// newTaskRec keeps t and its targets (not a copy), each named once.
func newTaskRec(t model.Task, targets []model.Target) (*taskRec, error) {
	rec := &taskRec{task: t, targets: targets}
	if j, dup := rec.index.build(rec.targets); dup {
		tg := targets[j]
		return nil, fmt.Errorf("put task %s: target %s %s given twice", t.ID, tg.Host, tg.ProcKey)
	}
	rec.results = model.MakeResultTable(len(targets))
	return rec, nil
}

// put keeps r as the result of its target (false: r's host and process
// are not a target); new is whether the target had no result yet.
func (rec *taskRec) put(r *model.Result) (isNew, ok bool) {
	i, ok := rec.index.find(rec.targets, r.Host, r.ProcKey)
	if !ok {
		return false, false
	}
	return rec.results.Set(i, &rec.targets[i], r), true
}

// result is target i's result (ok false: none put).
func (rec *taskRec) result(i int) (r model.Result, ok bool) {
	return rec.results.Get(i, &rec.targets[i])
}

// pairIndex finds a target by its host and process (model.Target.Pair):
// an open-addressed table of target indexes + 1 (0: empty), at most half
// full. A map keyed by the pair was 15 MB for 228,000 targets.
type pairIndex struct {
	seed  maphash.Seed
	slots []int32
}

func (x *pairIndex) hash(h model.Host, proc string) uint64 {
	var mh maphash.Hash
	mh.SetSeed(x.seed)
	mh.WriteString(h.IP)
	var c [8]byte
	for i := range c {
		c[i] = byte(uint64(h.CloudID) >> (8 * i))
	}
	mh.Write(c[:])
	mh.WriteString(proc)
	return mh.Sum64()
}

// build indexes targets; dup reports a pair given twice (the second at j).
func (x *pairIndex) build(targets []model.Target) (j int, dup bool) {
	x.seed = maphash.MakeSeed()
	size := 1 << bits.Len(uint(2*len(targets))) // a power of two, more than twice the targets
	x.slots = make([]int32, size)
	mask := uint64(size - 1)
	for j := range targets {
		tg := &targets[j]
		for s := x.hash(tg.Host, tg.ProcKey) & mask; ; s = (s + 1) & mask {
			k := x.slots[s]
			if k == 0 {
				x.slots[s] = int32(j + 1)
				break
			}
			if o := &targets[k-1]; o.Host == tg.Host && o.ProcKey == tg.ProcKey {
				return j, true
			}
		}
	}
	return 0, false
}

// find is the index of the target of (h, proc).
func (x *pairIndex) find(targets []model.Target, h model.Host, proc string) (int, bool) {
	if len(x.slots) == 0 {
		return 0, false
	}
	mask := uint64(len(x.slots) - 1)
	for s := x.hash(h, proc) & mask; ; s = (s + 1) & mask {
		k := x.slots[s]
		if k == 0 {
			return 0, false
		}
		if o := &targets[k-1]; o.Host == h && o.ProcKey == proc {
			return int(k - 1), true
		}
	}
}
