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
// the limit is lifted and GOGC alone paces the collector as before: a
// limit under the live heap would collect without pause.

// MemoryTarget is the soft memory limit the server keeps while its live
// heap is under memoryOn (see above).
const MemoryTarget = 224 << 20

// The live heap under which the limit applies (memoryOn) and over which
// it is lifted (memoryOff): apart, so that a live heap near one bound
// does not switch it at every collection.
const (
	memoryOn  = MemoryTarget * 5 / 8 // 140 MiB
	memoryOff = MemoryTarget * 3 / 4 // 168 MiB
)

// noLimit is the Go runtime's "no memory limit".
const noLimit = math.MaxInt64

// memoryLimitFor is the memory limit for a live heap of live bytes, given
// whether the target applied (on): the target, or noLimit; and whether it
// applies now.
func memoryLimitFor(on bool, live uint64) (limit int64, nowOn bool) {
	switch {
	case on && live > memoryOff:
		on = false
	case !on && live < memoryOn:
		on = true
	}
	if on {
		return MemoryTarget, true
	}
	return noLimit, false
}

// memoryCheck is how often the pacer reads the live heap (it changes at
// each collection, a few times a second under load).
const memoryCheck = 250 * time.Millisecond

// PaceMemory applies the server's memory pacing until the returned stop
// is called (stop puts the limit found back). It does nothing when the
// environment sets GOMEMLIMIT (the operator's limit wins) or a limit is
// set already (another server in the same process paces it: tests).
func PaceMemory(ctx context.Context, log *slog.Logger) (stop func()) {
	if _, set := lookupGOMEMLIMIT(); set {
		return func() {}
	}
	prev := debug.SetMemoryLimit(-1)
	if prev != noLimit {
		return func() {}
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	on, limit := false, int64(-1)
	apply := func() { // the first call made here, the others by the goroutine
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		var l int64
		l, on = memoryLimitFor(on, sample[0].Value.Uint64())
		if l != limit {
			debug.SetMemoryLimit(l)
			if limit != -1 {
				log.Debug("memory pacing", "live_heap", sample[0].Value.Uint64(), "limit", l)
			}
			limit = l
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
	}
}

func lookupGOMEMLIMIT() (string, bool) { return os.LookupEnv("GOMEMLIMIT") }
