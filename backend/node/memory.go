package node

import (
	"context"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"gseproc/backend/config"
)

// The server's memory pacing. Under sustained requests (2,000 to 3,000
// operate_proc calls a second) the server's live heap is about 150 MB,
// most of it the embedded JetStream's block buffers (4 MB per stream
// being written, held while written and kept a while after), the last
// tasks kept in memory and the requests in flight; with the Go default
// (GOGC 100) the heap grows to twice that before each collection, and
// the RSS was 315-322 MB. While the live heap is well under MemoryTarget,
// a soft memory limit of MemoryTarget makes the collector run before the
// heap doubles (RSS about 250 MB under the same load); the collector runs
// more often only when the heap nears the target. When the live heap
// itself nears it (an operation over 100,000 hosts holds some 400 MB),
// the limit is lifted (a limit under the live heap would collect without
// pause) and the collector is paced by a GC percent of bigHeapGOGC
// instead: the heap may grow half its live size before a collection, not
// all of it. A percent keeps its room above the live heap whatever the
// heap does, so it cannot thrash as a fixed limit does. Past the target a
// second, higher limit applies with it, the ceiling ([server]
// memory_ceiling, 460 MiB by default): the collector runs before the heap
// passes it, so that an op over 100,000 hosts does not take the RSS to
// 1.5 times its peak live heap (560-585 MB); it is lifted in turn when
// the held memory nears it (ceilingLimitFor), and the percent alone paces
// a larger heap. Its price is collections, each marking the whole live
// heap: cheap while that heap is well under the ceiling.

// MemoryTarget is the soft memory limit the server keeps while the memory
// it holds (heldMemory) is under memoryOn.
const MemoryTarget = 224 << 20

// The held memory under which the limit applies (memoryOn) and over which
// it is lifted (memoryOff): apart, so that a figure near one bound does not
// switch it at every collection. Held memory, not the live heap alone: the
// limit counts all the runtime's memory (goroutine stacks, GC metadata,
// the runtime's other uses, some tens of MB under load), so a live heap of
// 168 MiB with 30 MB of those would leave the collector ~26 MB of room and
// run it without pause, the very thrashing the lift is there to avoid.
const (
	memoryOn  = MemoryTarget * 5 / 8 // 140 MiB
	memoryOff = MemoryTarget * 3 / 4 // 168 MiB
)

// noLimit is the Go runtime's "no memory limit".
const noLimit = math.MaxInt64

// bigHeapGOGC is the GC percent while the limit is lifted. With Go's
// default (100) the RSS of a server holding a large live heap is about
// twice that heap. One op over 100,000 simulated hosts (bench fleet, 4
// rounds back to back, load 3-6): RSS after each op 793-887 MB at 100,
// 627-731 MB at 50; the op's server CPU (2nd and 3rd runs) 4.18 s on
// average against 4.45 s (+7%, the same against the sim's CPU, which does
// the same work in both); wall time no worse. After the 100,000 agents'
// start-up: 535-560 MB against 432-455 MB. At 25 (GOGC in the
// environment) the RSS was 514-611 MB but the op's CPU +29%.
const bigHeapGOGC = 50

// ceilingLimitFor is the memory limit for held bytes once MemoryTarget
// is lifted, given the ceiling (<= 0: none) and whether it applied (on):
// the ceiling while held is under ceilingOff of it, noLimit past that (a
// limit just above the live heap would collect without pause: the
// thrashing the lift avoids, as memoryLimitFor's), the ceiling again once
// held is back under ceilingOn of it.
func ceilingLimitFor(on bool, held uint64, ceiling int64) (limit int64, nowOn bool) {
	if ceiling <= 0 {
		return noLimit, false
	}
	off, back := uint64(ceiling)/ceilingDiv*ceilingOff, uint64(ceiling)/ceilingDiv*ceilingOn
	switch {
	case on && held > off:
		on = false
	case !on && held < back:
		on = true
	}
	if on {
		return ceiling, true
	}
	return noLimit, false
}

// The shares of the ceiling (ceilingOn/ceilingDiv, ceilingOff/ceilingDiv)
// under which it applies again and over which it is lifted: with 15% of
// the ceiling above the held memory (70 MB of 460 MiB) the collector
// runs every 70 MB allocated at worst. At 100,000 hosts and 460 MiB:
// 3-4 collections an op instead of 2 (10 instead of 7 in the first);
// lifted at 80%, with a live heap 30 MB larger than now, it was lifted at
// most ops' peaks (RSS 560-610 MB).
const (
	ceilingDiv = 20
	ceilingOn  = 15 // 75%
	ceilingOff = 17 // 85%
)

// gcPercentFor is the GC percent for a pacer whose limit applies (on) or
// not, given the percent the process had (base): base while the limit
// applies, else bigHeapGOGC unless base is lower already (or off: -1).
func gcPercentFor(on bool, base int) int {
	if on || base < 0 || base <= bigHeapGOGC {
		return base
	}
	return bigHeapGOGC
}

// memoryLimitFor is the memory limit for held bytes held (heldMemory), given
// whether the target applied (on): the target, or noLimit; and whether it
// applies now.
func memoryLimitFor(on bool, held uint64) (limit int64, nowOn bool) {
	switch {
	case on && held > memoryOff:
		on = false
	case !on && held < memoryOn:
		on = true
	}
	if on {
		return MemoryTarget, true
	}
	return noLimit, false
}

// memoryCheck is how often the pacer reads the held memory (it changes at
// each collection, a few times a second under load).
const memoryCheck = 250 * time.Millisecond

// PaceMemory is PaceMemoryWithin the default ceiling ([server]
// memory_ceiling's default).
func PaceMemory(ctx context.Context, log *slog.Logger) (stop func()) {
	return PaceMemoryWithin(ctx, log, config.Default().Server.MemoryCeiling)
}

// PaceMemoryWithin applies the server's memory pacing until the returned
// stop is called (stop puts the limit and GC percent found back):
// MemoryTarget while the held memory is small, then ceiling (<= 0: none)
// while it leaves the collector room under it (ceilingLimitFor). It does
// nothing when the environment sets GOMEMLIMIT (the operator's limit
// wins) or a limit is set already (another server in the same process
// paces it: tests); it leaves the GC percent alone when the environment
// sets GOGC.
func PaceMemoryWithin(ctx context.Context, log *slog.Logger, ceiling int64) (stop func()) {
	if _, set := lookupGOMEMLIMIT(); set {
		return func() {}
	}
	prev := debug.SetMemoryLimit(-1)
	if prev != noLimit {
		return func() {}
	}
	_, gogcSet := os.LookupEnv("GOGC")
	basePct := debug.SetGCPercent(100) // read: put back at once
	debug.SetGCPercent(basePct)
	samples := newHeldSamples()
	on, atCeiling, limit, pct := false, false, int64(-1), basePct
	apply := func() { // the first call made here, the others by the goroutine
		held, ok := samples.read()
		if !ok {
			return
		}
		var l int64
		if l, on = memoryLimitFor(on, held); !on {
			l, atCeiling = ceilingLimitFor(atCeiling, held, ceiling)
		}
		if l != limit {
			debug.SetMemoryLimit(l)
			if limit != -1 {
				log.Debug("memory pacing", "held", held, "limit", l)
			}
			limit = l
		}
		if p := gcPercentFor(on, basePct); !gogcSet && p != pct {
			debug.SetGCPercent(p)
			log.Debug("memory pacing", "held", held, "gc_percent", p)
			pct = p
		}
	}
	apply()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(memoryCheck)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				apply()
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
		debug.SetMemoryLimit(prev)
		if pct != basePct {
			debug.SetGCPercent(basePct)
		}
	}
}

// heldSamples read the memory the runtime holds that a collection does
// not give back: the live heap, and everything the memory limit counts
// that is not the heap's objects or its free or unused room (stacks, GC
// metadata, the runtime's other uses). Read together, by one
// metrics.Read.
type heldSamples []metrics.Sample

// The runtime/metrics names heldSamples reads, in their order.
var heldNames = [...]string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
}

func newHeldSamples() heldSamples {
	s := make(heldSamples, len(heldNames))
	for i, n := range heldNames {
		s[i].Name = n
	}
	return s
}

// read is the held memory: the live heap plus the runtime's memory apart
// from the heap (false: a metric this runtime does not have).
func (s heldSamples) read() (uint64, bool) {
	metrics.Read(s)
	var v [len(heldNames)]uint64
	for i := range s {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0, false
		}
		v[i] = s[i].Value.Uint64()
	}
	return heldMemory(v[0], v[1], v[2]+v[3]+v[4]+v[5]), true
}

// heldMemory is the live heap plus what of the runtime's total memory is
// not the heap (heap: its objects, dead ones included, and its unused,
// free and released room).
func heldMemory(live, total, heap uint64) uint64 {
	if heap > total { // not read at one instant: no overhead seen
		return live
	}
	return live + total - heap
}

func lookupGOMEMLIMIT() (string, bool) { return os.LookupEnv("GOMEMLIMIT") }
