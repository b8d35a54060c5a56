package engine

import (
	"testing"

	"gseproc/model"
)

// TestStatusShard: a host's known statuses are found by process key, a
// put replaces the status of its process on its host only, and hosts
// differing by cloud alone are two hosts.
func TestStatusShard(t *testing.T) {
	var x lastStatuses
	x.init()
	h1, h2 := model.Host{IP: "10.0.0.1"}, model.Host{IP: "10.0.0.1", CloudID: 1}
	a1, b1, a2 := &model.ProcStatus{ProcKey: "ns:a", PID: 1}, &model.ProcStatus{ProcKey: "ns:b", PID: 2}, &model.ProcStatus{ProcKey: "ns:a", PID: 3}
	put := func(h model.Host, st *model.ProcStatus, said uint64) {
		sh := x.shard(h)
		sh.mu.Lock()
		sh.put(h, knownStatus{st: st, stored: statusPrint{said: said}})
		sh.mu.Unlock()
	}
	get := func(h model.Host, key string) (knownStatus, bool) {
		sh := x.shard(h)
		sh.mu.RLock()
		defer sh.mu.RUnlock()
		return sh.get(h, key)
	}
	put(h1, a1, 1)
	put(h1, b1, 2)
	put(h2, a2, 3)
	put(h1, &model.ProcStatus{ProcKey: "ns:a", PID: 4}, 5) // replaces h1's ns:a
	for _, c := range []struct {
		h    model.Host
		key  string
		pid  int
		said uint64
		ok   bool
	}{
		{h1, "ns:a", 4, 5, true},
		{h1, "ns:b", 2, 2, true},
		{h2, "ns:a", 3, 3, true},
		{h2, "ns:b", 0, 0, false},
		{model.Host{IP: "10.0.0.2"}, "ns:a", 0, 0, false},
	} {
		k, ok := get(c.h, c.key)
		if ok != c.ok || ok && (k.st.PID != c.pid || k.stored.said != c.said) {
			t.Errorf("%s %s: %+v %v, want pid %d print %d %v", c.h, c.key, k, ok, c.pid, c.said, c.ok)
		}
	}
	if sh := x.shard(h1); len(sh.m[h1]) != 2 {
		t.Errorf("host %s keeps %d statuses, want 2", h1, len(sh.m[h1]))
	}
}
