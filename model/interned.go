package model

// Interned numbers the distinct values it is given, from 0 in the order
// first seen, and keeps each once (Values, by number): a table of what
// many rows share (a task's result shapes), each row keeping a number
// instead of its own copy. The zero Interned is empty and ready.
type Interned[K comparable] struct {
	Values []K // by number
	ids    map[K]uint32
}

// ID is k's number, k kept if it is new. Rows tend to come in runs of one
// value, so the last value is compared first, without the map.
func (t *Interned[K]) ID(k K) uint32 {
	if n := len(t.Values); n > 0 && t.Values[n-1] == k {
		return uint32(n - 1)
	}
	if i, ok := t.ids[k]; ok {
		return i
	}
	if t.ids == nil {
		t.ids = map[K]uint32{}
	}
	i := uint32(len(t.Values))
	t.ids[k] = i
	t.Values = append(t.Values, k)
	return i
}
