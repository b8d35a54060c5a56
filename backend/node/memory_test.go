package node

import (
	"context"
	"io"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"testing"

	"gseproc/backend/config"
)

func TestMemoryLimitFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name  string
		on    bool
		held  uint64
		limit int64
		nowOn bool
	}{
		{"start, small heap: the target applies", false, 40 * mib, MemoryTarget, true},
		{"on, under the upper bound: stays on", true, 150 * mib, MemoryTarget, true},
		{"on, at the upper bound: stays on", true, memoryOff, MemoryTarget, true},
		{"on, over the upper bound: lifted", true, memoryOff + 1, noLimit, false},
		{"off, between the bounds: stays off", false, 150 * mib, noLimit, false},
		{"off, at the lower bound: stays off", false, memoryOn, noLimit, false},
		{"off, under the lower bound: applies again", false, memoryOn - 1, MemoryTarget, true},
		{"off, a large heap (100,000 hosts): stays off", false, 400 * mib, noLimit, false},
	} {
		limit, nowOn := memoryLimitFor(c.on, c.held)
		if limit != c.limit || nowOn != c.nowOn {
			t.Errorf("%s: memoryLimitFor(%v, %d) = %d, %v; want %d, %v", c.name, c.on, c.held, limit, nowOn, c.limit, c.nowOn)
		}
	}
	if memoryOn >= memoryOff || memoryOff >= MemoryTarget {
		t.Errorf("bounds out of order: on %d, off %d, target %d", memoryOn, memoryOff, MemoryTarget)
	}
}

// TestCeilingLimitFor: once MemoryTarget is lifted, the ceiling applies
// while the held memory leaves the collector room under it, is lifted
// near it (a limit just above the live heap would collect without
// pause), and applies again once the held memory is back well under it;
// a ceiling of 0 is none.
func TestCeilingLimitFor(t *testing.T) {
	const mib = 1 << 20
	const ceiling = 460 * mib
	off, back := uint64(ceiling)/ceilingDiv*ceilingOff, uint64(ceiling)/ceilingDiv*ceilingOn
	for _, c := range []struct {
		name    string
		on      bool
		held    uint64
		ceiling int64
		limit   int64
		nowOn   bool
	}{
		{"target just lifted: the ceiling applies", false, memoryOff + 1, ceiling, ceiling, true},
		{"on, an op's peak with room (350 MiB held): stays on", true, 350 * mib, ceiling, ceiling, true},
		{"on, at the upper bound: stays on", true, off, ceiling, ceiling, true},
		{"on, over the upper bound: lifted", true, off + 1, ceiling, noLimit, false},
		{"off, between the bounds: stays off", false, (off + back) / 2, ceiling, noLimit, false},
		{"off, at the lower bound: stays off", false, back, ceiling, noLimit, false},
		{"off, under the lower bound: applies again", false, back - 1, ceiling, ceiling, true},
		{"off, a heap past the ceiling: stays off", false, 600 * mib, ceiling, noLimit, false},
		{"no ceiling", false, 200 * mib, 0, noLimit, false},
		{"no ceiling, said on", true, 200 * mib, 0, noLimit, false},
	} {
		limit, nowOn := ceilingLimitFor(c.on, c.held, c.ceiling)
		if limit != c.limit || nowOn != c.nowOn {
			t.Errorf("%s: ceilingLimitFor(%v, %d, %d) = %d, %v; want %d, %v", c.name, c.on, c.held, c.ceiling, limit, nowOn, c.limit, c.nowOn)
		}
	}
	if ceilingOn >= ceilingOff || ceilingOff >= ceilingDiv {
		t.Errorf("bounds out of order: on %d/%d, off %d/%d", ceilingOn, ceilingDiv, ceilingOff, ceilingDiv)
	}
	// The default ceiling, and the smallest the config takes, apply as
	// soon as the target is lifted.
	if d := config.Default().Server.MemoryCeiling; uint64(d)/ceilingDiv*ceilingOn <= memoryOff || d <= MemoryTarget {
		t.Errorf("default ceiling %d: want it on from where MemoryTarget is lifted (%d)", d, memoryOff)
	}
	if c := int64(config.MinMemoryCeiling); uint64(c)/ceilingDiv*ceilingOn <= memoryOff || c <= MemoryTarget {
		t.Errorf("smallest ceiling %d: want it on from where MemoryTarget is lifted (%d)", c, memoryOff)
	}
	// It is the smallest Validate takes.
	cfg := config.Default()
	cfg.Server.MemoryCeiling = config.MinMemoryCeiling
	if err := cfg.Validate(); err != nil {
		t.Errorf("memory_ceiling %d (config.MinMemoryCeiling) refused: %v", cfg.Server.MemoryCeiling, err)
	}
	cfg.Server.MemoryCeiling--
	if cfg.Validate() == nil {
		t.Errorf("memory_ceiling %d (below config.MinMemoryCeiling) taken", cfg.Server.MemoryCeiling)
	}
}

// TestGCPercentFor: the GC percent is the process's own while the limit
// applies, bigHeapGOGC once it is lifted, never above the process's own
// and never turning a collector that was off on.
func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		name string
		on   bool
		base int
		want int
	}{
		{"limit applies: the process's percent", true, 100, 100},
		{"limit lifted: the big heap's percent", false, 100, bigHeapGOGC},
		{"limit lifted, the process's percent lower: kept", false, 20, 20},
		{"limit lifted, the process's percent at it: kept", false, bigHeapGOGC, bigHeapGOGC},
		{"limit lifted, a higher percent: the big heap's", false, 400, bigHeapGOGC},
		{"collector off (GOGC=off): stays off", false, -1, -1},
		{"collector off, limit applies: stays off", true, -1, -1},
	} {
		if got := gcPercentFor(c.on, c.base); got != c.want {
			t.Errorf("%s: gcPercentFor(%v, %d) = %d, want %d", c.name, c.on, c.base, got, c.want)
		}
	}
	if bigHeapGOGC <= 0 || bigHeapGOGC >= 100 {
		t.Errorf("bigHeapGOGC %d: want a percent under Go's default 100", bigHeapGOGC)
	}
}

// TestHeldMemory: the held memory is the live heap plus the runtime's
// memory apart from the heap; read from this process, it is at least the
// live heap and no more than the runtime's total memory.
func TestHeldMemory(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name              string
		live, total, heap uint64
		want              uint64
	}{
		{"stacks and metadata count", 100 * mib, 300 * mib, 270 * mib, 130 * mib},
		{"a heap alone", 100 * mib, 250 * mib, 250 * mib, 100 * mib},
		{"figures not of one instant: the live heap", 100 * mib, 250 * mib, 260 * mib, 100 * mib},
	} {
		if got := heldMemory(c.live, c.total, c.heap); got != c.want {
			t.Errorf("%s: heldMemory(%d, %d, %d) = %d, want %d", c.name, c.live, c.total, c.heap, got, c.want)
		}
	}
	held, ok := newHeldSamples().read()
	if !ok {
		t.Fatal("this runtime lacks a metric the pacer reads")
	}
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	if live, total := s[0].Value.Uint64(), s[1].Value.Uint64(); held < live || held > total {
		t.Errorf("held %d with a live heap of %d and %d in all", held, live, total)
	}
}

// TestPaceMemoryRestores: the pacer sets the target at once on a test's
// small heap and puts the previous limit back when stopped.
func TestPaceMemoryRestores(t *testing.T) {
	if v, set := lookupGOMEMLIMIT(); set {
		t.Skipf("GOMEMLIMIT=%s set: the pacer leaves it", v)
	}
	prev := debug.SetMemoryLimit(-1)
	if prev != noLimit {
		t.Skipf("a memory limit (%d) is set in this process: the pacer leaves it", prev)
	}
	prevPct := debug.SetGCPercent(100)
	debug.SetGCPercent(prevPct)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	stop := PaceMemory(context.Background(), log)
	got := debug.SetMemoryLimit(-1)
	// A second server in the process (tests) leaves the first one's
	// pacing alone, and its stop does not put a limit back after it.
	stop2 := PaceMemory(context.Background(), log)
	stop()
	stop2()
	if after := debug.SetMemoryLimit(-1); after != prev {
		t.Errorf("after stop the limit is %d, want the previous %d", after, prev)
	}
	afterPct := debug.SetGCPercent(prevPct)
	if afterPct != prevPct {
		t.Errorf("after stop the GC percent is %d, want the previous %d", afterPct, prevPct)
	}
	if got != MemoryTarget {
		t.Errorf("while pacing a small heap the limit is %d, want %d", got, MemoryTarget)
	}
}
