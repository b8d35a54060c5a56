//go:build linux

package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/model"
)

// The agent's scale in processes (issue 12): many hosted processes on
// one agent, started by one op through the engine, and a storm of
// crash-looping ones. TestManyProcessesOneOp and TestCrashLoopsLeaveNoZombie
// are the fast regular checks; BenchmarkAgentHolds1000 and
// BenchmarkAgentCrashStorm measure the targets (make bench).

// manyProcs saves n resident definitions in namespace ns on a's host (one
// setup dir, one pid file each), each started by start (a shell line
// that puts its process's pid in $GSEPROC_PID_FILE).
func manyProcs(tb testing.TB, eng *engine.Engine, a *Agent, ns string, n int, start string, retries int, tune ...func(*model.Policy)) []model.Process {
	tb.Helper()
	dir := tb.TempDir()
	ps := make([]model.Process, n)
	for i := range ps {
		name := fmt.Sprintf("p%04d", i)
		p := model.Process{
			Meta: model.Meta{Namespace: ns, Name: name},
			Spec: model.Spec{
				Identity: model.Identity{ProcName: name, SetupPath: dir, PidPath: filepath.Join(dir, name+".pid")},
				Control:  model.Control{StartCmd: start},
				Policy: model.Policy{AutoType: model.AutoResident, StartRetries: retries, OpTimeout: 60,
					StartCheckSecs: model.DefaultStartCheckSecs, StartInterval: model.DefaultStartInterval,
					StartCheckEndSecs: 30, InstanceNum: 1},
			},
		}
		for _, f := range tune {
			f(&p.Spec.Policy)
		}
		if err := eng.SaveProcess(context.Background(), model.ProcessDef{Process: p, Hosts: []model.Host{a.host}}); err != nil {
			tb.Fatal(err)
		}
		ps[i] = p
		tb.Cleanup(func() { killByPidFiles(p) })
	}
	return ps
}

// operateNS runs op over every definition of ns as one task and returns
// its results (all of them, or the test fails).
func operateNS(tb testing.TB, eng *engine.Engine, ns string, op model.OpType, n int) []model.Result {
	tb.Helper()
	out := operateSel(tb, eng, op, backend.Selector{Namespace: ns})
	if len(out) != n {
		tb.Fatalf("%s: %d results of %d targets", op, len(out), n)
	}
	return out
}

// operateSel runs op over what sel selects as one task and returns its
// results, waiting for them up to a generous deadline.
func operateSel(tb testing.TB, eng *engine.Engine, op model.OpType, sel backend.Selector) []model.Result {
	tb.Helper()
	ctx := context.Background()
	task, err := eng.Operate(ctx, backend.OperateRequest{Op: op, Selector: sel})
	if err != nil {
		tb.Fatalf("%s: %v", op, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	ch, err := eng.Watch(wctx, task.ID, 0)
	if err != nil {
		tb.Fatal(err)
	}
	var out []model.Result
	for r := range ch {
		out = append(out, r)
	}
	return out
}

// codes counts results by code, for the report of a failure.
func codes(rs []model.Result) map[int]int {
	m := map[int]int{}
	for _, r := range rs {
		m[r.Code]++
	}
	return m
}

// failures is the first message of each failing code of rs.
func failures(rs []model.Result) map[int]string {
	m := map[int]string{}
	for _, r := range rs {
		if _, seen := m[r.Code]; !seen && r.Code != model.CodeSuccess {
			m[r.Code] = r.Message
		}
	}
	return m
}

// hostedRunning counts a's hosted processes whose state is running with a
// live pid.
func hostedRunning(a *Agent) (hosted, running int) {
	for _, st := range a.Statuses() {
		if st.Hosted {
			hosted++
		}
		if st.State == model.ProcRunning && st.PID > 0 {
			if _, live := alive(st.PID); live {
				running++
			}
		}
	}
	return hosted, running
}

// selfUsage is this process's cpu time so far (user + system, not its
// children's) and its resident set now.
func selfUsage() (cpu time.Duration, rss uint64) {
	if st, err := readStat(os.Getpid()); err == nil {
		cpu = time.Duration(st.Utime+st.Stime) * (time.Second / clkTck)
	}
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseUint(f[0], 10, 64)
				rss = kb * 1024
			}
		}
	}
	return cpu, rss
}

// threadCPU is the cpu time of the calling OS thread so far.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// zombieChildren lists this process's children that are zombies (exited,
// not reaped).
func zombieChildren() []int {
	var out []int
	for _, pid := range childPids() {
		if st, err := readStat(pid); err == nil && st.State == 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

// durations is the p50 and max of the results' times (sent to answered).
func durations(rs []model.Result) (p50, maxD time.Duration) {
	var ds []time.Duration
	for _, r := range rs {
		ds = append(ds, r.Finished.Sub(r.Started))
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)-1]
}

// holdMany starts n processes on a with one op and checks every one
// started, hosted and running; it returns the op's wall time.
func holdMany(tb testing.TB, eng *engine.Engine, a *Agent, ns string, n int) time.Duration {
	tb.Helper()
	manyProcs(tb, eng, a, ns, n, `sleep 3600 >/dev/null 2>&1 & echo $! > "$GSEPROC_PID_FILE"`, 3)
	t0 := time.Now()
	rs := operateNS(tb, eng, ns, model.OpStart, n)
	took := time.Since(t0)
	p50, maxD := durations(rs)
	tb.Logf("start of %d: each answered in p50 %s, max %s", n, p50.Round(time.Millisecond), maxD.Round(time.Millisecond))
	if c := codes(rs); c[model.CodeSuccess] != n {
		tb.Fatalf("start of %d: codes %v: %v", n, c, failures(rs))
	}
	if hosted, running := hostedRunning(a); hosted != n || running != n {
		tb.Fatalf("after the start of %d: %d hosted, %d running", n, hosted, running)
	}
	return took
}

// TestManyProcessesOneOp: 200 processes started by one op on one agent are
// all started, hosted and running (none timed out), and one op stops them.
func TestManyProcessesOneOp(t *testing.T) {
	t.Parallel()
	const n = 200
	a := newAgent(t, "")
	eng := localEngine(t, a)
	took := holdMany(t, eng, a, "many", n)
	t.Logf("%d processes started by one op in %s", n, took.Round(time.Millisecond))
	if c := codes(operateNS(t, eng, "many", model.OpStop, n)); c[model.CodeSuccess] != n {
		t.Fatalf("stop of %d: codes %v", n, c)
	}
	if hosted, running := hostedRunning(a); hosted != 0 || running != 0 {
		t.Fatalf("after the stop: %d hosted, %d running", hosted, running)
	}
}

// BenchmarkAgentHolds1000: one op starts 1,000 hosted processes on one
// agent (agent defaults, real processes): all started and hosted, none
// timed out. Reports the op's time and the agent's cpu and memory.
func BenchmarkAgentHolds1000(b *testing.B) {
	const n = 1000
	for range b.N {
		a := newAgent(b, "", func(c *config.AgentConfig) { *c = benchConfig(c.DataDir) })
		eng := localEngine(b, a)
		cpu0, _ := selfUsage()
		took := holdMany(b, eng, a, "hold", n)
		cpu1, rss := selfUsage()
		b.ReportMetric(took.Seconds(), "start-s")
		b.ReportMetric(float64(rss)/(1<<20), "rss-MB")
		b.ReportMetric((cpu1 - cpu0).Seconds(), "cpu-s")
		b.Logf("%d processes started and hosted by one op in %s; agent (test process) cpu %s, rss %.1f MB",
			n, took.Round(time.Millisecond), cpu1-cpu0, float64(rss)/(1<<20))
		t0 := time.Now()
		if c := codes(operateNS(b, eng, "hold", model.OpStop, n)); c[model.CodeSuccess] != n {
			b.Fatalf("stop of %d: codes %v", n, c)
		}
		b.Logf("stopped by one op in %s", time.Since(t0).Round(time.Millisecond))
	}
}

// benchConfig is the agent's defaults on dataDir.
func benchConfig(dataDir string) config.AgentConfig {
	cfg := config.DefaultAgent()
	cfg.IP = "127.0.0.1"
	cfg.DataDir = dataDir
	return cfg
}

// storm registers n crash-looping processes with one op (register: the
// restart policy starts them, so a loaded machine's slow start check
// cannot fail the op). Each passes its start check (start_check_secs 1)
// and dies soon after (life 3 s from its launch in the benchmark), so every restart
// is a real one: start_cmd, a new process, its pid file, the check, its
// exit; start_interval 1 s (backoff 1 s doubling) keeps them looping,
// start_retries high enough to loop through the window. It watches the
// agent for window: its cpu, its peak rss, a status op's answer time
// (one every statusEvery: p50, p99, max, how many were asked, and the
// longest from its tick; any that fails fails the
// benchmark), restarts, zombies.
type stormFigures struct {
	restarts   int // restart_success events in the window
	failed     int // restart_failed events in the window
	failedMsg  string
	cpu        time.Duration // the test process's, less harness
	harness    time.Duration // the harness's own sampling, left out of cpu
	wall       time.Duration
	cpuShare   float64 // of one core
	peakRSS    uint64
	startRSS   uint64
	statusMax  time.Duration
	statusP50  time.Duration
	statusP99  time.Duration
	statusN    int
	statusDue  time.Duration // the longest from a tick to its answer
	zombiesMax int           // at one sample: exited, not reaped yet
	zombiesEnd int           // left once the storm is stopped (10 s to reap them)
	load0      string
	load1      string
}

// loadavg is the first three fields of /proc/loadavg.
func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// statusEvery is how often the storm asks for a status.
const statusEvery = 20 * time.Millisecond

func storm(tb testing.TB, a *Agent, eng *engine.Engine, n int, life string, window time.Duration) stormFigures {
	tb.Helper()
	ev := collect(tb, a)
	ps := manyProcs(tb, eng, a, "storm", n, `sleep `+life+` >/dev/null 2>&1 & echo $! > "$GSEPROC_PID_FILE"`, 1000,
		func(p *model.Policy) { p.StartCheckSecs, p.StartInterval = 1, 1 })
	if rs := operateNS(tb, eng, "storm", model.OpRegister, n); codes(rs)[model.CodeSuccess] != n {
		tb.Fatalf("register of %d: codes %v: %v", n, codes(rs), failures(rs))
	}
	var f stormFigures
	// What the setup (and an earlier benchmark in this process) left in
	// the heap is not the storm's: give it back before the peak is taken.
	debug.FreeOSMemory()
	_, f.startRSS = selfUsage()
	f.load0 = loadavg()
	restarts0 := len(ev.of(model.EventRestartSuccess))
	failed0 := len(ev.of(model.EventRestartFailed))
	// GSEPROC_STORM_CPUPROFILE names a file for a cpu profile of the
	// window alone (go test's -cpuprofile takes the setup and the stop in
	// too).
	if path := os.Getenv("GSEPROC_STORM_CPUPROFILE"); path != "" {
		pf, err := os.Create(path)
		if err != nil {
			tb.Fatal(err)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			tb.Fatal(err)
		}
		defer pf.Close()
		defer pprof.StopCPUProfile() // at the latest; stopped at the window's end
	}
	cpu0, _ := selfUsage()
	t0 := time.Now()
	// The status ops: one every statusEvery from a goroutine of their own
	// (a console refreshing), so that the harness's sampling, slow on a
	// loaded machine, does not thin them out.
	type asked struct {
		lat  []time.Duration
		due  time.Duration // the longest from a tick to its answer
		bad  int
		what string // the first that failed
	}
	stop, done := make(chan struct{}), make(chan asked, 1)
	go func() {
		var got asked
		t := time.NewTicker(statusEvery)
		defer t.Stop()
		for i := 0; ; i++ {
			var tick time.Time
			select {
			case <-stop:
				done <- got
				return
			case tick = <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			p := ps[i%n]
			s := time.Now()
			var r model.AgentReply
			// A region of its own in a -trace: where a slow one's time went
			// (run, wait for a P, blocked on a lock, in a syscall).
			trace.WithRegion(ctx, "status", func() {
				r = a.Handle(ctx, model.AgentRequest{Op: model.OpStatus, Process: p})
			})
			got.lat = append(got.lat, time.Since(s))
			// From the tick on, the wait of this goroutine to run counts
			// too: what a client whose request waits for the agent to be
			// scheduled sees. Ticks missed meanwhile are not asked.
			got.due = max(got.due, time.Since(tick))
			cancel()
			if r.Code != model.CodeSuccess || r.Status == nil || r.Status.ProcKey != p.Key() {
				if got.bad++; got.what == "" {
					got.what = fmt.Sprintf("status of %s: %d %s (status %+v)", p.Key(), r.Code, r.Message, r.Status)
				}
			}
		}
	}()
	// The harness's own sampling (the rss read, the zombie count, which
	// reads /proc for each of some 500 children) is the test's work, not
	// the agent's: it runs on this goroutine's own OS thread, whose cpu
	// time is taken around it and left out of the agent's.
	runtime.LockOSThread()
	var harness time.Duration
	for i := 0; time.Since(t0) < window; i++ {
		h0 := threadCPU()
		if _, rss := selfUsage(); rss > f.peakRSS {
			f.peakRSS = rss
		}
		if i%10 == 0 {
			f.zombiesMax = max(f.zombiesMax, len(zombieChildren()))
		}
		harness += threadCPU() - h0
		time.Sleep(100 * time.Millisecond)
	}
	runtime.UnlockOSThread()
	close(stop)
	st := <-done
	cpu1, _ := selfUsage()
	f.cpu, f.wall, f.harness = cpu1-cpu0-harness, time.Since(t0), harness
	if os.Getenv("GSEPROC_STORM_CPUPROFILE") != "" {
		pprof.StopCPUProfile() // its writing is not the window's
	}
	if st.bad > 0 {
		tb.Fatalf("%d of %d status ops during the storm failed; the first: %s", st.bad, len(st.lat), st.what)
	}
	lat := st.lat
	if len(lat) == 0 {
		tb.Fatal("no status asked during the storm")
	}
	f.cpuShare = f.cpu.Seconds() / f.wall.Seconds()
	f.restarts = len(ev.of(model.EventRestartSuccess)) - restarts0
	if fails := ev.of(model.EventRestartFailed)[failed0:]; len(fails) > 0 {
		f.failed, f.failedMsg = len(fails), fails[0].Message
	}
	f.load1 = loadavg()
	slices.Sort(lat)
	f.statusN, f.statusMax, f.statusP50, f.statusDue = len(lat), lat[len(lat)-1], lat[len(lat)/2], st.due
	f.statusP99 = lat[min(len(lat)-1, len(lat)*99/100)]
	if f.failed > 0 {
		tb.Logf("first failed restart: %s", f.failedMsg)
	}
	tb.Logf("storm of %d for %s (load %s -> %s): %d restarts (%d failed), agent cpu %.2f s = %.1f%% of a core (the harness's own sampling, %.2f s, left out); rss %.1f MB at the start, peak %.1f MB; status op p50 %s p99 %s max %s (%d asked; from its tick, max %s); zombies: at most %d at a sample (exited, not reaped yet)",
		n, f.wall.Round(time.Millisecond), f.load0, f.load1, f.restarts, f.failed, f.cpu.Seconds(), f.cpuShare*100, f.harness.Seconds(),
		float64(f.startRSS)/(1<<20), float64(f.peakRSS)/(1<<20), f.statusP50, f.statusP99, f.statusMax, f.statusN, f.statusDue, f.zombiesMax)
	// The stop ends the storm: one running is stopped, one in backoff or
	// dead with its exit not handled yet has its restart called off (both
	// success), and none is hosted or running after it.
	rs := operateNS(tb, eng, "storm", model.OpStop, n)
	tb.Logf("stop of the storm: codes %v", codes(rs))
	if codes(rs)[model.CodeSuccess]+codes(rs)[model.CodeNotRunning] != n {
		tb.Fatalf("stop of %d: codes %v: %v", n, codes(rs), failures(rs))
	}
	if hosted, running := hostedRunning(a); hosted != 0 || running != 0 {
		for _, st := range a.Statuses() {
			if st.Hosted || st.State == model.ProcRunning {
				tb.Logf("left after the stop: %s %s hosted %v pid %d: %s", st.ProcKey, st.State, st.Hosted, st.PID, st.Message)
				break
			}
		}
		tb.Fatalf("after the storm's stop: %d hosted, %d running", hosted, running)
	}
	for deadline := time.Now().Add(slowBox); ; time.Sleep(100 * time.Millisecond) {
		f.zombiesEnd = len(zombieChildren())
		if f.zombiesEnd == 0 || time.Now().After(deadline) {
			break
		}
	}
	return f
}

// BenchmarkAgentCrashStorm: 500 hosted processes crash-looping (each
// passes its start check after 1 s and dies 2 s later) for 30 s under the
// agent's defaults but start_interval 1 s (backoff 1 s doubling to 1 min):
// the agent's cpu (cpu-seconds of this process, user + system, not its
// children's, less the harness's own sampling, timed on its own thread;
// per wall second and per restart), its peak rss, a status
// op's answer time during the storm, and zombies. The agent is a
// subreaper (agent.subreaper), so the daemons its commands leave behind
// are its children too, and count if left zombies. The agent runs in the
// test process, with the engine that registered the processes (idle
// during the window): what the figures count is an upper bound on the
// agent's own (the status ops count: answering them is the agent's
// work). GSEPROC_STORM_CPUPROFILE=file profiles the window alone. A
// start_cmd is a shell line (sh -c): the fork is the
// agent's cpu, the shell's own run is the command's.
func BenchmarkAgentCrashStorm(b *testing.B) {
	for range b.N {
		a := newAgent(b, "", func(c *config.AgentConfig) {
			*c = benchConfig(c.DataDir)
			c.Subreaper = true
		})
		eng := localEngine(b, a)
		f := storm(b, a, eng, 500, "3", 30*time.Second)
		perRestart := 0.0
		if f.restarts > 0 {
			perRestart = f.cpu.Seconds() / float64(f.restarts)
		}
		b.ReportMetric(f.cpuShare*100, "cpu-%core")
		b.ReportMetric(perRestart*1000, "cpu-ms/restart")
		b.ReportMetric(float64(f.peakRSS)/(1<<20), "rss-MB")
		b.ReportMetric(float64(f.statusMax.Microseconds())/1000, "status-max-ms")
		b.ReportMetric(float64(f.statusP99.Microseconds())/1000, "status-p99-ms")
		b.ReportMetric(float64(f.statusP50.Microseconds())/1000, "status-p50-ms")
		b.ReportMetric(float64(f.statusN), "status-n")
		b.ReportMetric(float64(f.statusDue.Microseconds())/1000, "status-due-max-ms")
		b.ReportMetric(float64(f.restarts), "restarts")
		b.ReportMetric(float64(f.zombiesEnd), "zombies-left")
		b.Logf("%.2f ms of agent cpu per restart; %d zombies left after the stop", perRestart*1000, f.zombiesEnd)
	}
}
