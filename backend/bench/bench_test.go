package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"gseproc/backend/config"
)

func TestReadUsage(t *testing.T) {
	u, err := readUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS <= 0 || u.PeakRSS < u.RSS {
		t.Fatalf("usage %+v: want RSS > 0 and peak >= RSS", u)
	}
	if _, err := readUsage(-1); err == nil {
		t.Fatal("usage of pid -1: want an error")
	}
}

func TestChildLinesAndCounts(t *testing.T) {
	c, err := startChild("sh", []string{"dropped"}, "sh", "-c", "echo 'ready at 127.0.0.1:1'; echo 'x dropped'; echo 'y dropped'; sleep 30")
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := c.waitLine(ctx, "ready at ")
	if err != nil || got != "127.0.0.1:1" {
		t.Fatalf("waitLine = %q, %v", got, err)
	}
	if _, err := c.waitLine(ctx, "y dropped"); err != nil {
		t.Fatal(err)
	}
	if n := c.count("dropped"); n != 2 {
		t.Fatalf("count = %d, want 2", n)
	}
	c.stop()
	if _, err := c.waitLine(ctx, "never printed"); err == nil {
		t.Fatal("waitLine after exit: want an error")
	}
}

// TestChildStderrApart: a line on stdout written while a line on stderr
// is half written (the runtime writes a collection's trace in pieces) is
// read whole, and so is the trace line.
func TestChildStderrApart(t *testing.T) {
	c, err := startChildEnv("sh", nil, []string{gcTraceEnv()}, "sh", "-c",
		`printf 'gc 2 @0.119s 3%%: 2.0+5.1+0.030 ms clock, ' >&2; sleep 0.2; echo 'gseproc server listening on http://x'; sleep 0.2; `+
			`echo '4.1+0.44/2.6/2.0+0.060 ms cpu, 3->4->2 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P' >&2; sleep 30`)
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, err := c.waitLine(ctx, "gseproc server listening on "); err != nil || got != "http://x" {
		t.Fatalf("waitLine = %q, %v", got, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.gc.mu.Lock()
		n := c.gc.n
		c.gc.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the trace line was not read whole: %d collections", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPercentilesAndSummary(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if p := pct(d, 50); p != 51*time.Millisecond {
		t.Fatalf("p50 = %s", p)
	}
	if p := pct(d, 99); p != 100*time.Millisecond {
		t.Fatalf("p99 = %s", p)
	}
	if pct(nil, 50) != 0 {
		t.Fatal("p50 of nothing: want 0")
	}
	if n := lastTargetsField("GSETASK:1: status done, 8426 target(s): 8426 success in 1.2s"); n != "8426" {
		t.Fatalf("targets = %q", n)
	}
}

func TestMetricValue(t *testing.T) {
	text := "# HELP go_memstats_mallocs_total Total number of heap objects allocated.\n" +
		"# TYPE go_memstats_mallocs_total counter\n" +
		"go_memstats_mallocs_total_x 7\n" +
		"go_memstats_mallocs_total 1.234567e+06\n"
	if n, err := metricValue(text, "go_memstats_mallocs_total"); err != nil || n != 1234567 {
		t.Fatalf("metricValue = %d, %v; want 1234567", n, err)
	}
	if _, err := metricValue(text, "go_gc_duration_seconds"); err == nil {
		t.Fatal("a missing metric: want an error")
	}
}

// TestHeapInuse: the in-use bytes are read from a text heap profile's
// first line, as the runtime writes it; anything else is not taken.
func TestHeapInuse(t *testing.T) {
	for _, c := range []struct {
		name string
		text string
		want int64
		ok   bool
	}{
		{"the runtime's header", "heap profile: 1205: 412345678 [98765: 2000000000] @ heap/1048576\n1: 8192 [1: 8192] @ 0x1\n", 412345678, true},
		{"a header alone", "heap profile: 0: 0 [0: 0] @ heap/1048576", 0, true},
		{"not a heap profile", "goroutine profile: total 12\n", 0, false},
		{"empty", "", 0, false},
	} {
		got, ok := heapInuse([]byte(c.text))
		if got != c.want || ok != c.ok {
			t.Errorf("%s: heapInuse = %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
	// The header of this process's own profile is read.
	var b strings.Builder
	if err := pprof.Lookup("heap").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	if _, ok := heapInuse([]byte(b.String())); !ok {
		t.Errorf("this process's heap profile: header not read: %.80q", b.String())
	}
}

// TestMemStat: a heap profile's MemStats lines are read by name, and this
// process's own profile has a HeapAlloc.
func TestMemStat(t *testing.T) {
	text := "heap profile: 1: 2 [3: 4] @ heap/524288\n\n# runtime.MemStats\n# Alloc = 10\n# HeapAlloc = 123456\n# Sys = 9\n"
	for _, c := range []struct {
		name string
		want int64
		ok   bool
	}{{"HeapAlloc", 123456, true}, {"Sys", 9, true}, {"Alloc", 10, true}, {"HeapSys", 0, false}} {
		if got, ok := memStat([]byte(text), c.name); got != c.want || ok != c.ok {
			t.Errorf("memStat(%s) = %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
	var b strings.Builder
	if err := pprof.Lookup("heap").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	if n, ok := memStat([]byte(b.String()), "HeapAlloc"); !ok || n <= 0 {
		t.Errorf("this process's heap profile: HeapAlloc = %d, %v", n, ok)
	}
}

func TestReadAgentMemory(t *testing.T) {
	var r AgentIdle
	if err := readAgentMemory(os.Getpid(), &r); err != nil {
		t.Fatal(err)
	}
	if r.RSS <= 0 || r.Anon <= 0 || r.Anon+r.File > r.RSS+(1<<20) || r.HWM < r.RSS || r.Threads < 1 {
		t.Fatalf("memory %+v: want RSS > 0, anon + file about RSS, peak >= RSS, threads >= 1", r)
	}
	if err := readAgentMemory(-1, &r); err == nil {
		t.Fatal("memory of pid -1: want an error")
	}
}

// TestBenchConfigsLoad: the config files bench fleet|operate and bench
// agent write load and validate, with the bench app, its client
// credential, the loopback NATS storing in the work dir and each one's
// NATS user.
func TestBenchConfigsLoad(t *testing.T) {
	dir := t.TempDir()
	s := Setup{Hosts: 10, Bin: "gseproc"}
	if err := s.defaults(); err != nil {
		t.Fatal(err)
	}
	big := s
	big.MaxTargets = 400000
	ceiled := s
	ceiled.MemoryCeiling = 600 << 20
	unceiled := s
	unceiled.MemoryCeiling = -1
	for name, tc := range map[string]struct{ text, user string }{
		"fleet":                     {s.configText(dir), natsUser},
		"agent":                     {agentIdleConfig(dir), agentUser},
		"fleet with max_targets":    {big.configText(dir), natsUser},
		"fleet with memory_ceiling": {ceiled.configText(dir), natsUser},
		"fleet without a ceiling":   {unceiled.configText(dir), natsUser},
	} {
		p := filepath.Join(dir, name+".toml")
		if err := os.WriteFile(p, []byte(tc.text), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(p)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, tc.text)
		}
		if len(c.Server.Apps) != 1 || c.Server.Apps[0].Code != appCode || c.Server.Client.AppCode != appCode ||
			c.Server.Client.AppSecret != appSecret || c.NATS.Listen != "127.0.0.1:-1" ||
			c.NATS.StoreDir != filepath.Join(dir, "jetstream") || len(c.NATS.Users) != 1 || c.NATS.Users[0].User != tc.user {
			t.Errorf("%s: server %+v nats %+v", name, c.Server, c.NATS)
		}
		want := config.Default().Engine.MaxTargets
		if name == "fleet with max_targets" {
			want = big.MaxTargets
		}
		if c.Engine.MaxTargets != want {
			t.Errorf("%s: engine.max_targets %d, want %d", name, c.Engine.MaxTargets, want)
		}
		wantCeiling := config.Default().Server.MemoryCeiling
		switch name {
		case "fleet with memory_ceiling":
			wantCeiling = ceiled.MemoryCeiling
		case "fleet without a ceiling":
			wantCeiling = 0
		}
		if c.Server.MemoryCeiling != wantCeiling {
			t.Errorf("%s: server.memory_ceiling %d, want %d", name, c.Server.MemoryCeiling, wantCeiling)
		}
	}
}

// TestGCTrace: the collection trace's lines are told from others; the
// largest live heap and heap since the last take are kept, collections
// forced are left out, and take starts again.
func TestGCTrace(t *testing.T) {
	var g gcTrace
	for _, c := range []struct {
		line string
		gc   bool
	}{
		{"gc 1 @0.015s 2%: 0.047+17+0.005 ms clock, 0.094+0.27/7.7/2.5+0.010 ms cpu, 3->3->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P", true},
		{"gc 45 @15.423s 13%: 0.12+700+0.033 ms clock, 0.24+192/335/0+0.066 ms cpu, 504->537->372 MB, 559 MB goal, 10 MB stacks, 0 MB globals, 2 P", true},
		{"gc 46 @17.660s 12%: 1.5+523+2.0 ms clock, 3.1+127/264/0+4.1 ms cpu, 507->542->377 MB, 564 MB goal, 10 MB stacks, 0 MB globals, 2 P", true},
		{"gc 47 @19.343s 12%: 0.54+252+0.004 ms clock, 1.0+152/124/0.012+0.009 ms cpu, 600->610->500 MB, 571 MB goal, 1 MB stacks, 0 MB globals, 2 P (forced)", true},
		{"gc is a word a log line may start with", false},
		{`time=2026-11-29T00:15:46.707Z level=WARN msg="store events"`, false},
	} {
		if got := g.line(c.line); got != c.gc {
			t.Errorf("line(%.40q) = %v, want %v", c.line, got, c.gc)
		}
	}
	// CPU: 0.094+0.27+7.7+2.5+0.010, 0.24+192+335+0+0.066, 3.1+127+264+0+4.1 ms.
	wantCPU := time.Duration((10.574 + 527.306 + 398.2) * float64(time.Millisecond))
	if n, live, heap, cpu := g.take(); n != 3 || live != 377 || heap != 542 || (cpu-wantCPU).Abs() > time.Microsecond {
		t.Errorf("take = %d, %d, %d, %s; want 3 collections, live 377 MB, heap 542 MB, %s CPU", n, live, heap, cpu, wantCPU)
	}
	if n, live, heap, cpu := g.take(); n != 0 || live != 0 || heap != 0 || cpu != 0 {
		t.Errorf("take again = %d, %d, %d, %s; want nothing", n, live, heap, cpu)
	}
}

// TestStoredSince: each stream's messages stored between two readings,
// by name, those that stored none left out.
func TestStoredSince(t *testing.T) {
	for _, c := range []struct {
		was, now map[string]uint64
		want     string
	}{
		{map[string]uint64{"a": 1}, map[string]uint64{"a": 1}, "nothing"},
		{nil, map[string]uint64{"KV_b": 5, "a": 2}, "KV_b 5, a 2"},
		{map[string]uint64{"x": 10, "y": 3}, map[string]uint64{"x": 12, "y": 3, "z": 1}, "x 2, z 1"},
		{map[string]uint64{"x": 10, "y": 3}, map[string]uint64{"x": 4, "y": 5}, "y 2"}, // x made again
	} {
		if got := storedSince(c.was, c.now); got != c.want {
			t.Errorf("storedSince(%v, %v) = %q, want %q", c.was, c.now, got, c.want)
		}
	}
}

// TestMetricsBacklog: the backlog is read from the two gauges of a
// /metrics page whatever their place and format; a page without both is
// an error (never taken as settled), errNoBacklog when it has neither (a
// server from before them: the bench goes on without waiting).
func TestMetricsBacklog(t *testing.T) {
	for _, c := range []struct {
		page           string
		events, writes int
		ok, none       bool
	}{
		{"# HELP gseproc_events_queued x\n# TYPE gseproc_events_queued gauge\ngseproc_events_queued 0\ngseproc_writes_queued 0\n", 0, 0, true, false},
		{"go_goroutines 12\ngseproc_writes_queued 4096\ngseproc_events_queued 31234\n", 31234, 4096, true, false},
		{"gseproc_events_queued 1.5e+06\ngseproc_writes_queued 0", 1500000, 0, true, false},
		{"gseproc_events_queued 0\n", 0, 0, false, false},
		{"gseproc_events_queued_total 0\ngseproc_writes_queued_x 0\n", 0, 0, false, true},
		{"gseproc_events_queued zero\ngseproc_writes_queued 0\n", 0, 0, false, false},
		{"go_goroutines 12\n", 0, 0, false, true},
		{"", 0, 0, false, true},
	} {
		ev, w, err := metricsBacklog(c.page)
		if (err == nil) != c.ok || (c.ok && (ev != c.events || w != c.writes)) || errors.Is(err, errNoBacklog) != c.none {
			t.Errorf("metricsBacklog(%q) = %d, %d, %v; want %d, %d, ok %v, none %v", c.page, ev, w, err, c.events, c.writes, c.ok, c.none)
		}
	}
}

// TestWallSummary: the runs' walls and the sim's CPU, each by min,
// median (the middle two's mean for an even count) and max.
func TestWallSummary(t *testing.T) {
	runs := []FleetRun{
		{Wall: 3000 * time.Millisecond, SimCPU: 900 * time.Millisecond},
		{Wall: 2000 * time.Millisecond, SimCPU: 600 * time.Millisecond},
		{Wall: 2600 * time.Millisecond, SimCPU: 800 * time.Millisecond},
		{Wall: 2400 * time.Millisecond, SimCPU: 700 * time.Millisecond},
	}
	want := "over 4 runs: wall min 2000 ms, median 2500 ms, max 3000 ms; the sim's CPU (the same work each run) min 600 ms, median 750 ms, max 900 ms"
	if got := wallSummary(runs); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got := median([]time.Duration{3, 1, 2}); got != 2 {
		t.Fatalf("median of 3, 1, 2 = %d, want 2", got)
	}
}
