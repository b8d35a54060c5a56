package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend/client"
	"gseproc/backend/config"
	"gseproc/backend/simulator"
	"gseproc/model"
)

// Bench credentials: the app the harness configures and calls as, and the
// NATS user the simulator (and the harness's own probe) connect as.
const (
	appCode   = "gseproc-bench"
	appSecret = "bench-secret"
	appSalt   = "0123456789abcdef"
	natsUser  = "gseproc-bench"
	natsPass  = "bench-nats-password"
)

// Setup describes the server and fleet a benchmark starts.
type Setup struct {
	// Bin is the gseproc binary to run (default: this executable).
	Bin string
	// Hosts is the simulated fleet size.
	Hosts int
	// Seed of the fleet.
	Seed int64
	// LatencyMedian and LatencyP99 of the simulated agents' replies.
	LatencyMedian, LatencyP99 time.Duration
	// Rate and Burst are the bench app's request limit (0: none).
	Rate  float64
	Burst int
	// ProfileDir, when set, receives the server's CPU, heap, mutex, block
	// and goroutine profiles of the measured part, the sim's CPU and heap
	// profiles of the same part, and each op client's CPU profile (Fleet).
	ProfileDir string
	// ProfileSeconds is the CPU profile's length (default 20).
	ProfileSeconds int
	// ProfileRun, when set (Fleet), starts the server's and the sim's CPU
	// profiles when that run starts instead of when the measured part
	// does, and the next run waits for them to end: one run's profile
	// alone (the first op after start-up costs the server twice what the
	// later ones do, and a profile of the first ProfileSeconds mixes them).
	ProfileRun int
	// MaxTargets is the server's engine.max_targets (0: the default).
	MaxTargets int
	// MemoryCeiling is the server's [server] memory_ceiling: 0 leaves
	// the default, a negative one sets none (0 in the file), so that what
	// the ceiling costs is measured against its absence.
	MemoryCeiling int64
	// Out receives progress and the figures.
	Out io.Writer
}

func (s *Setup) defaults() error {
	if s.Bin == "" {
		bin, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench: find the gseproc binary: %w", err)
		}
		s.Bin = bin
	}
	if s.Hosts <= 0 {
		s.Hosts = 10000
	}
	if s.Seed == 0 {
		s.Seed = 1
	}
	if s.LatencyMedian <= 0 {
		s.LatencyMedian = 5 * time.Millisecond
	}
	if s.LatencyP99 <= 0 {
		s.LatencyP99 = 50 * time.Millisecond
	}
	if s.ProfileSeconds <= 0 {
		s.ProfileSeconds = 20
	}
	if s.Out == nil {
		s.Out = io.Discard
	}
	return nil
}

// simConfig is the fleet both the sim process and the harness build
// (same seed, same hosts and definitions). No host fails, is offline or
// unreachable: a bench measures the system, not the simulated failures
// (an offline host holds a task until its own deadline).
func (s *Setup) simConfig() config.SimulatorConfig {
	c := config.Default().Simulator
	c.Hosts, c.Seed = s.Hosts, s.Seed
	c.LatencyMedian, c.LatencyP99 = config.Duration(s.LatencyMedian), config.Duration(s.LatencyP99)
	c.FailureRate, c.OfflineRate, c.UnreachableRate, c.CrashRate = 0, 0, 0, 0
	return c
}

// configText is the config file of the server, the sim and the op client.
func (s *Setup) configText(dir string) string {
	sc := s.simConfig()
	return fmt.Sprintf(`[log]
level = "warn"

[simulator]
hosts = %d
seed = %d
latency_median = %q
latency_p99 = %q
failure_rate = 0.0
offline_rate = 0.0
unreachable_rate = 0.0
crash_rate = 0.0
%s
[server]
listen = "127.0.0.1:0"
fleet = "nats"
max_body_bytes = 67108864
rate = %g
burst = %d
native_auth = false
%s
%s
[[nats.users]]
user = %q
password = %q
role = "server"
`, sc.Hosts, sc.Seed, sc.LatencyMedian.D().String(), sc.LatencyP99.D().String(), s.engineSection(),
		s.Rate, s.Burst, s.memoryCeilingLine(), benchAppAndNATS(dir), natsUser, natsPass)
}

// memoryCeilingLine is [server] memory_ceiling as MemoryCeiling says:
// no line for the default.
func (s *Setup) memoryCeilingLine() string {
	switch {
	case s.MemoryCeiling > 0:
		return fmt.Sprintf("memory_ceiling = %d\n", s.MemoryCeiling)
	case s.MemoryCeiling < 0:
		return "memory_ceiling = 0\n"
	}
	return ""
}

// engineSection is the config's [engine] part: empty for the defaults.
func (s *Setup) engineSection() string {
	if s.MaxTargets <= 0 {
		return ""
	}
	return fmt.Sprintf("\n[engine]\nmax_targets = %d\n", s.MaxTargets)
}

// benchAppAndNATS is the part of a bench server's config after [server]'s
// own keys: the bench app (the API's and the op client's credential) and
// an embedded NATS on 127.0.0.1 storing under dir; [[nats.users]] follow.
func benchAppAndNATS(dir string) string {
	return fmt.Sprintf(`[[server.apps]]
bk_app_code = %q
salt = %q
secret_sha256 = %q
biz = [1]
namespaces = ["*"]

[server.client]
bk_app_code = %q
bk_app_secret = %q
bk_username = "bench"

[nats]
listen = "127.0.0.1:-1"
store_dir = %q
`, appCode, appSalt, config.HashSecret(appSalt, appSecret), appCode, appSecret,
		filepath.Join(dir, "jetstream"))
}

// env is a running server and fleet.
type env struct {
	setup   Setup
	dir     string
	cfg     string // config file
	server  *child
	sim     *child
	url     string // HTTP API
	natsURL string
	pprof   string // server's pprof address, "" when not profiling
	// simPprof is the sim's pprof address, "" when not profiling.
	simPprof string
	client   *client.Client
	defs     []model.ProcessDef
	out      opOutput // the op client's output, room kept between runs
}

// start starts the server and the sim, seeds the registry with the
// fleet's definitions and waits for every host to be online.
func start(ctx context.Context, s Setup) (_ *env, err error) {
	if err := s.defaults(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gseproc-bench-*")
	if err != nil {
		return nil, fmt.Errorf("bench: work dir: %w", err)
	}
	e := &env{setup: s, dir: dir, cfg: filepath.Join(dir, "config.toml")}
	defer func() {
		if err != nil {
			e.stop()
		}
	}()
	if err := os.WriteFile(e.cfg, []byte(s.configText(dir)), 0o600); err != nil {
		return nil, fmt.Errorf("bench: write config: %w", err)
	}
	args := []string{"server", "--config", e.cfg}
	var env []string
	if s.ProfileDir != "" {
		args = append(args, "--pprof", "127.0.0.1:0")
		env = append(env, gcTraceEnv())
	}
	if e.server, err = startChildEnv("server", []string{dropWarning}, env, s.Bin, args...); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if e.natsURL, err = e.server.waitLine(wctx, "agents connect to "); err != nil {
		return nil, err
	}
	if e.url, err = e.server.waitLine(wctx, "gseproc server listening on "); err != nil {
		return nil, err
	}
	if s.ProfileDir != "" {
		if e.pprof, err = e.server.waitLine(wctx, "pprof on "); err != nil {
			return nil, err
		}
	}
	e.client = Connect(e.url)

	// The registry: the fleet's definitions, as an operator applies them.
	t0 := time.Now()
	fleet, err := simulator.NewChecked(s.simConfig())
	if err != nil {
		return nil, fmt.Errorf("bench: fleet: %w", err)
	}
	e.defs = fleet.Definitions()
	fleet.Close()
	for _, d := range e.defs {
		d.Rev = 0
		if err := e.client.SaveProcess(ctx, d); err != nil {
			return nil, fmt.Errorf("bench: register %s: %w", d.Process.Key(), err)
		}
	}
	fmt.Fprintf(s.Out, "registry: %d definitions over %d hosts applied in %s\n", len(e.defs), s.Hosts, time.Since(t0).Round(time.Millisecond))

	t0 = time.Now()
	simArgs := []string{"sim", "--config", e.cfg, "--nats", e.natsURL, "--user", natsUser, "--password", natsPass}
	if s.ProfileDir != "" {
		simArgs = append(simArgs, "--pprof", "127.0.0.1:0")
	}
	if e.sim, err = startChild("sim", nil, s.Bin, simArgs...); err != nil {
		return nil, err
	}
	if _, err := e.sim.waitLine(wctx, "gseproc sim:"); err != nil {
		return nil, err
	}
	if s.ProfileDir != "" {
		if e.simPprof, err = e.sim.waitLine(wctx, "pprof on "); err != nil {
			return nil, err
		}
	}
	octx, ocancel := context.WithTimeout(ctx, 5*time.Minute)
	defer ocancel()
	for {
		info, err := e.client.Info(octx)
		if err == nil && info.Online >= s.Hosts {
			break
		}
		select {
		case <-octx.Done():
			return nil, fmt.Errorf("bench: waiting for %d hosts online (last: %+v, %v): %w", s.Hosts, info, err, octx.Err())
		case <-time.After(2 * time.Second): // Info lists every host: not too often
		}
	}
	fmt.Fprintf(s.Out, "fleet: %d simulated hosts online in %s (sim in its own process)\n", s.Hosts, time.Since(t0).Round(time.Millisecond))
	if err := e.settle(octx); err != nil {
		return nil, err
	}
	return e, nil
}

// settle waits until the server has stored what start-up handed it (the
// agents' agent_online events, ~100,000 of them at 100,000 hosts, still
// being stored when the last host is online) and says how long that took:
// the op measured next is then the op alone, not the op and start-up's
// tail. The signal is the server's own backlog (/metrics'
// gseproc_events_queued and gseproc_writes_queued), read until both are 0;
// what the events stream stored meanwhile is said too.
func (e *env) settle(ctx context.Context) error {
	t0 := time.Now()
	was, _ := e.streamSeqs(ctx)
	pid := e.server.cmd.Process.Pid
	u0, _ := readUsage(pid)
	if err := e.awaitBacklog(ctx, "start-up's backlog", settlePoll, func(events, writes int) bool { return events == 0 && writes == 0 }); err != nil {
		if !errors.Is(err, errNoBacklog) {
			return err
		}
		// A server from before the gauges (--bin, an older build
		// compared): measured as it was then, and said.
		fmt.Fprintf(e.setup.Out, "start-up not awaited: the server's /metrics has no backlog gauges (a server from before them)\n")
		return nil
	}
	stored := "?"
	if now, err := e.streamSeqs(ctx); err == nil && was != nil {
		stored = storedSince(was, now)
	}
	u1, _ := readUsage(pid)
	fmt.Fprintf(e.setup.Out, "start-up settled: the server's event and write backlog empty %s after every host was online (server CPU %s meanwhile; stored meanwhile: %s)\n",
		time.Since(t0).Round(time.Millisecond), (u1.CPU - u0.CPU).Round(time.Millisecond), stored)
	return nil
}

// settlePoll is how often settle reads the server's backlog.
const settlePoll = 100 * time.Millisecond

// backlog reads the server's event and write backlog from its /metrics
// at base (the API's address).
func backlog(ctx context.Context, base string) (events, writes int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	page, err := metricsPage(ctx, http.DefaultClient, base)
	if err != nil {
		return 0, 0, err
	}
	return metricsBacklog(page)
}

// errNoBacklog: a /metrics page has neither backlog gauge (a server from
// before them).
var errNoBacklog = errors.New("/metrics has no gseproc_events_queued nor gseproc_writes_queued")

// metricsBacklog is the gseproc_events_queued and gseproc_writes_queued
// gauges of a /metrics page in the text format; an error when either is
// missing (a server without them is never found settled), errNoBacklog
// when both are.
func metricsBacklog(page string) (events, writes int, err error) {
	ev, everr := metricValue(page, "gseproc_events_queued")
	wr, werr := metricValue(page, "gseproc_writes_queued")
	switch {
	case errors.Is(everr, errMetricMissing) && errors.Is(werr, errMetricMissing):
		return 0, 0, errNoBacklog
	case everr != nil || werr != nil:
		return 0, 0, errors.Join(everr, werr)
	}
	return int(ev), int(wr), nil
}

// stop stops the sim and the server and removes the work dir.
func (e *env) stop() {
	if e.client != nil {
		_ = e.client.Close()
	}
	if e.sim != nil {
		e.sim.stop()
	}
	if e.server != nil {
		e.server.stop()
	}
	_ = os.RemoveAll(e.dir)
}

// dropped counts the server's "event dropped" warnings so far.
func (e *env) dropped() int { return e.server.count(dropWarning) }

// dropWarning is what the server logs for each event it could not queue.
const dropWarning = "event dropped"

// consumers is the number of JetStream consumers on the server now.
func (e *env) consumers(ctx context.Context) (int, error) {
	nc, err := nats.Connect(e.natsURL, nats.UserInfo(natsUser, natsPass), nats.Name("gseproc-bench probe"))
	if err != nil {
		return 0, fmt.Errorf("bench: probe nats: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	ai, err := js.AccountInfo(ctx)
	if err != nil {
		return 0, fmt.Errorf("bench: account info: %w", err)
	}
	return ai.Consumers, nil
}

// streamTotals is the messages and bytes every JetStream stream holds now.
func (e *env) streamTotals(ctx context.Context) (msgs, bytes uint64, err error) {
	nc, err := nats.Connect(e.natsURL, nats.UserInfo(natsUser, natsPass), nats.Name("gseproc-bench probe"))
	if err != nil {
		return 0, 0, fmt.Errorf("bench: probe nats: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, 0, err
	}
	l := js.ListStreams(ctx)
	for si := range l.Info() {
		msgs += si.State.Msgs
		bytes += si.State.Bytes
	}
	if err := l.Err(); err != nil {
		return 0, 0, fmt.Errorf("bench: list streams: %w", err)
	}
	return msgs, bytes, nil
}

// streamSeqs is every JetStream stream's last sequence now, by name: the
// difference of two readings is how many messages each stored meanwhile
// (deleted, purged or replaced ones included).
func (e *env) streamSeqs(ctx context.Context) (map[string]uint64, error) {
	nc, err := nats.Connect(e.natsURL, nats.UserInfo(natsUser, natsPass), nats.Name("gseproc-bench probe"))
	if err != nil {
		return nil, fmt.Errorf("bench: probe nats: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	seqs := map[string]uint64{}
	l := js.ListStreams(ctx)
	for si := range l.Info() {
		seqs[si.Config.Name] = si.State.LastSeq
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("bench: list streams: %w", err)
	}
	return seqs, nil
}

// profiler takes the server's profiles while the measured part runs.
type profiler struct {
	e    *env
	dir  string
	wg   sync.WaitGroup
	errs []error
	mu   sync.Mutex
	stop chan struct{} // ends the peak heap sampling
	peak []byte        // the sampled heap profile of the largest live heap
	// runPeak and runMost are the same since the last run ended
	// (afterRun), guarded by mu.
	runPeak []byte
	runMost int64
	// seqs are the streams' last sequences when the last run ended (or
	// the measured part began): what each stored during a run is told
	// after it (afterRun), start-up's backlog included.
	seqs map[string]uint64
}

// startProfile takes a heap profile and begins a CPU profile of
// ProfileSeconds and the sampling of the peak heap (nil when not
// profiling).
func (e *env) startProfile() *profiler {
	if e.pprof == "" {
		return nil
	}
	p := &profiler{e: e, dir: e.setup.ProfileDir, stop: make(chan struct{}), runMost: -1}
	// The heap profile's allocation counts are since the server started:
	// this one, taken before, is their base (pprof -base). Taken after a
	// collection (gc=1), its in-use figures are the live heap now, not at
	// the last collection, which may have been in the middle of start-up.
	p.fetch(e.pprof, "heap-before.pprof", "heap?gc=1")
	p.seqs, _ = e.streamSeqs(context.Background())
	if e.simPprof != "" {
		p.fetch(e.simPprof, "sim-heap-before.pprof", "heap?gc=1")
	}
	if e.setup.ProfileRun <= 0 {
		p.startCPU(&p.wg)
	}
	p.wg.Go(p.samplePeak)
	return p
}

// startCPU begins the server's CPU profile of ProfileSeconds and the
// sim's over the same part (the simulated fleet's work per op); wg is
// done once both are saved.
func (p *profiler) startCPU(wg *sync.WaitGroup) (sent *sync.WaitGroup) {
	e := p.e
	sent = &sync.WaitGroup{}
	sent.Add(1)
	wg.Go(func() {
		p.fetchSent(e.pprof, "cpu.pprof", fmt.Sprintf("profile?seconds=%d", e.setup.ProfileSeconds), sent.Done)
	})
	if e.simPprof != "" {
		sent.Add(1)
		wg.Go(func() {
			p.fetchSent(e.simPprof, "sim-cpu.pprof", fmt.Sprintf("profile?seconds=%d", e.setup.ProfileSeconds), sent.Done)
		})
	}
	return sent
}

// beforeRun starts the CPU profiles when run n is Setup.ProfileRun; the
// wait it returns (nil otherwise) ends once they are saved.
func (p *profiler) beforeRun(n int) (wait func()) {
	if p == nil || n != p.e.setup.ProfileRun {
		return nil
	}
	var wg sync.WaitGroup
	// The profiles' requests are written before the run starts (a
	// profile begun after the op client would miss its first part):
	// waited for, not guessed by a sleep a loaded machine can outlast.
	p.startCPU(&wg).Wait()
	return wg.Wait
}

// peakEvery is how often samplePeak reads the server's heap profile.
const peakEvery = time.Second

// samplePeak reads the server's heap profile every peakEvery until
// finish, without forcing a collection, and keeps the one whose in-use
// bytes (the live heap at the collection before it) are the largest:
// what the server held at its peak, which sets its RSS (Go's collector
// lets the heap grow in proportion to it).
func (p *profiler) samplePeak() {
	t := time.NewTicker(peakEvery)
	defer t.Stop()
	var most int64 = -1
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		// The text profile's first line says the in-use bytes; the
		// profile kept is the binary one (pprof symbolizes it without the
		// server's binary), read right after: of the same collection
		// unless one ended in between.
		text, err := p.get("heap?debug=1")
		if err != nil {
			continue // the next tick tries again; finish's profiles say if the server is gone
		}
		n, ok := heapInuse(text)
		if !ok {
			continue
		}
		p.mu.Lock()
		runMost := p.runMost
		p.mu.Unlock()
		if n <= most && n <= runMost {
			continue
		}
		body, err := p.get("heap")
		if err != nil {
			continue
		}
		if n > most {
			most, p.peak = n, body
		}
		p.mu.Lock()
		if n > p.runMost {
			p.runMost, p.runPeak = n, body
		}
		p.mu.Unlock()
	}
}

// heapInuse is the in-use bytes of a heap profile in the text format
// (debug=1), from its first line: "heap profile: <inuse objects>:
// <inuse bytes> [<alloc objects>: <alloc bytes>] @ heap/<rate>".
func heapInuse(text []byte) (int64, bool) {
	line, _, _ := strings.Cut(string(text[:min(len(text), 200)]), "\n")
	var objs, bytes int64
	if _, err := fmt.Sscanf(line, "heap profile: %d: %d", &objs, &bytes); err != nil {
		return 0, false
	}
	return bytes, true
}

// fetch saves the profile at path of the pprof server at base as file.
func (p *profiler) fetch(base, file, path string) { p.fetchSent(base, file, path, nil) }

// fetchSent is fetch, calling sent (when not nil) once the request is
// written or has failed: a profile of a duration begins about then.
func (p *profiler) fetchSent(base, file, path string, sent func()) {
	var once sync.Once
	told := func() {
		if sent != nil {
			once.Do(sent)
		}
	}
	defer told()
	err := func() error {
		hc := &http.Client{Timeout: time.Duration(p.e.setup.ProfileSeconds+60) * time.Second}
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { told() },
		})
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/debug/pprof/"+path, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", path, resp.Status)
		}
		if err := os.MkdirAll(p.dir, 0o755); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(p.dir, file))
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, resp.Body); err != nil {
			_ = f.Close()
			return err
		}
		return f.Close()
	}()
	if err != nil {
		p.mu.Lock()
		p.errs = append(p.errs, fmt.Errorf("profile %s: %w", file, err))
		p.mu.Unlock()
	}
}

// afterRun takes the server's heap profile after run n (after a
// collection: its live heap; heap-run-N.pprof), writes the sampled one of
// the largest live heap since the run before (heap-peak-run-N.pprof), and
// prints what could grow from one run to the next and never shrink: the
// RSS, the live heap, goroutines, JetStream consumers, the streams'
// messages and bytes. Two of these profiles compared (go tool pprof
// -sample_index=inuse_space -base heap-run-02.pprof heap-run-10.pprof)
// show what the runs between left behind.
func (p *profiler) afterRun(ctx context.Context, n int) {
	if p == nil {
		return
	}
	var gcs string
	if gc := p.e.server.gc; gc != nil {
		k, most, heap, cpu := gc.take()
		gcs = fmt.Sprintf("; during it %d collections (%s CPU), the largest live heap one found %d MB, the heap up to %d MB", k, ms(cpu), most, heap)
	}
	// The text profile, after a collection, ends with the MemStats of
	// then: its HeapAlloc is the live heap (its first line's in-use bytes
	// are the samples', not scaled to the heap). The binary one kept is
	// read right after, of the same collection.
	var live int64 = -1
	if text, err := p.get("heap?gc=1&debug=1"); err == nil {
		live, _ = memStat(text, "HeapAlloc")
	}
	p.fetch(p.e.pprof, fmt.Sprintf("heap-run-%02d.pprof", n), "heap")
	p.mu.Lock()
	peak := p.runPeak
	p.runPeak, p.runMost = nil, -1
	p.mu.Unlock()
	if peak != nil {
		_ = os.WriteFile(filepath.Join(p.dir, fmt.Sprintf("heap-peak-run-%02d.pprof", n)), peak, 0o644)
	}
	goroutines := -1
	if text, err := p.get("goroutine?debug=1"); err == nil {
		_, _ = fmt.Sscanf(string(text), "goroutine profile: total %d", &goroutines)
	}
	cons, _ := p.e.consumers(ctx)
	msgs, bytes, _ := p.e.streamTotals(ctx)
	var rss int64
	if u, err := readUsage(p.e.server.cmd.Process.Pid); err == nil {
		rss = u.RSS
	}
	fmt.Fprintf(p.e.setup.Out, "after run %d: RSS %s, live heap %s, goroutines %d, consumers %d, stream messages %d (%s)%s\n",
		n, mb(rss), mb(live), goroutines, cons, msgs, mb(int64(bytes)), gcs)
	if seqs, err := p.e.streamSeqs(ctx); err == nil && p.seqs != nil {
		fmt.Fprintf(p.e.setup.Out, "stored during run %d: %s\n", n, storedSince(p.seqs, seqs))
		p.seqs = seqs
	}
}

// storedSince says how many messages each stream stored from one reading
// of the streams' last sequences (was) to the next (now), by name, those
// that stored none left out.
func storedSince(was, now map[string]uint64) string {
	var parts []string
	d := storedDelta(was, now)
	for _, name := range slices.Sorted(maps.Keys(d)) {
		if d := d[name]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", name, d))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// memStat is the runtime.MemStats field name of a heap profile in the
// text format (debug=1), from its "# name = value" line.
func memStat(text []byte, name string) (int64, bool) {
	_, rest, ok := strings.Cut(string(text), "\n# "+name+" = ")
	if !ok {
		return 0, false
	}
	var n int64
	if _, err := fmt.Sscanf(rest, "%d", &n); err != nil {
		return 0, false
	}
	return n, true
}

// get reads one of the server's pprof pages.
func (p *profiler) get(path string) ([]byte, error) {
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Get(p.e.pprof + "/debug/pprof/" + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", path, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// finish waits for the CPU profile and takes the others.
func (p *profiler) finish() error {
	if p == nil {
		return nil
	}
	close(p.stop)
	p.wg.Wait()
	for _, x := range []struct{ file, path string }{
		{"heap.pprof", "heap?gc=1"}, {"mutex.pprof", "mutex"}, {"block.pprof", "block"}, {"goroutine.pprof", "goroutine"},
	} {
		p.fetch(p.e.pprof, x.file, x.path)
	}
	if p.e.simPprof != "" {
		p.fetch(p.e.simPprof, "sim-heap.pprof", "heap?gc=1")
	}
	if p.peak != nil {
		if err := os.WriteFile(filepath.Join(p.dir, "heap-peak.pprof"), p.peak, 0o644); err != nil {
			p.errs = append(p.errs, fmt.Errorf("profile heap-peak.pprof: %w", err))
		}
	}
	fmt.Fprintf(p.e.setup.Out, "profiles in %s (go tool pprof -top %s; allocations of the measured part: go tool pprof -sample_index=alloc_objects -base %s %s; the live heap at its peak: go tool pprof -sample_index=inuse_space -top %s)\n",
		p.dir, filepath.Join(p.dir, "cpu.pprof"), filepath.Join(p.dir, "heap-before.pprof"), filepath.Join(p.dir, "heap.pprof"), filepath.Join(p.dir, "heap-peak.pprof"))
	if p.e.simPprof != "" {
		fmt.Fprintf(p.e.setup.Out, "the sim's: %s, %s, %s; bench fleet's op clients': %s (one per run, merged by go tool pprof -top)\n",
			filepath.Join(p.dir, "sim-cpu.pprof"), filepath.Join(p.dir, "sim-heap-before.pprof"), filepath.Join(p.dir, "sim-heap.pprof"), filepath.Join(p.dir, "client-cpu-*.pprof"))
	}
	return errors.Join(p.errs...)
}

// FleetOptions are `gseproc bench fleet`'s.
type FleetOptions struct {
	Setup
	// Runs of the op (default 3).
	Runs int
	// Namespace and Name select the targets (default gse / bkmonitorbeat,
	// deployed on about 84% of the hosts).
	Namespace, Name string
	// Op is the operation (default status).
	Op model.OpType
	// Idle is how long the server's and the sim's CPU is measured, the
	// fleet online and no op made, before run 1 (default 20 s: every
	// host's heartbeats come in it at least once at a 20 s interval).
	Idle time.Duration
}

// FleetRun is one op's figures.
type FleetRun struct {
	Targets            int
	Wall               time.Duration // op client started to exited
	HostP50, HostP99   time.Duration // per-host dispatch to reply (the agents' side)
	DoneP50, DoneP99   time.Duration // op started to each result printed by the client
	ServerCPU          time.Duration
	ServerRSS, PeakRSS int64
	SimCPU             time.Duration // the simulated fleet's process
	ClientCPU          time.Duration // the op client's process (user + system)
	NotOK              int
	// Where the wall goes, each from the op client's start: the task
	// created (its Created, the server's clock: the same machine's), the
	// first host sent the op (the earliest result's Started), the last
	// host's reply (the latest Finished), the last result printed by the
	// client; the rest of Wall is the task stored complete, the stream's
	// end and the client's exit.
	Created, FirstSent, LastReply, LastLine time.Duration
	// Stored is from the op client's start to the server's write backlog
	// found empty once the client exited: every result and last known
	// status the op handed the store is stored (the server stores
	// statuses behind the runs in flight). StoredCPU is the server's CPU
	// from the client's start to then. Both 0: not known (a server from
	// before the backlog gauge).
	Stored, StoredCPU time.Duration
}

// Fleet runs the op Runs times over the fleet with the real op client and
// prints each run's figures.
func Fleet(ctx context.Context, o FleetOptions) ([]FleetRun, error) {
	if o.Runs <= 0 {
		o.Runs = 3
	}
	if o.Namespace == "" && o.Name == "" {
		o.Namespace, o.Name = "gse", "bkmonitorbeat"
	}
	if o.Op == 0 {
		o.Op = model.OpStatus
	}
	if o.Idle <= 0 {
		o.Idle = 20 * time.Second
	}
	e, err := start(ctx, o.Setup)
	if err != nil {
		return nil, err
	}
	defer e.stop()
	out := e.setup.Out
	if u, err := readUsage(e.server.cmd.Process.Pid); err == nil {
		fmt.Fprintf(out, "server after start-up: RSS %s (peak %s), CPU %s; event drops: %d\n",
			mb(u.RSS), mb(u.PeakRSS), u.CPU.Round(time.Millisecond), e.dropped())
	}
	if gc := e.server.gc; gc != nil {
		n, live, heap, cpu := gc.take()
		fmt.Fprintf(out, "start-up: %d collections (%s CPU), the largest live heap one found %d MB, the heap up to %d MB\n", n, ms(cpu), live, heap)
	}
	if err := e.idleCPU(ctx, o.Idle); err != nil {
		return nil, err
	}
	prof := e.startProfile()
	var runs []FleetRun
	for i := range o.Runs {
		wait := prof.beforeRun(i + 1)
		r, err := e.runOp(ctx, o, i+1)
		if wait != nil {
			wait()
		}
		if err != nil {
			return runs, fmt.Errorf("run %d: %w", i+1, err)
		}
		runs = append(runs, r)
		prof.afterRun(ctx, i+1)
	}
	if err := prof.finish(); err != nil {
		fmt.Fprintf(out, "warning: %v\n", err)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "hosts\ttargets\twall\thost p50\thost p99\tdone p50\tdone p99\tserver CPU\tserver RSS\tpeak RSS\tsim CPU\tclient CPU\tnot OK\t\n")
	for _, r := range runs {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", o.Hosts, r.Targets, ms(r.Wall), ms(r.HostP50), ms(r.HostP99),
			ms(r.DoneP50), ms(r.DoneP99), ms(r.ServerCPU), mb(r.ServerRSS), mb(r.PeakRSS), ms(r.SimCPU), ms(r.ClientCPU), r.NotOK)
	}
	_ = tw.Flush()
	if len(runs) > 1 {
		fmt.Fprintln(out, wallSummary(runs))
	}
	fmt.Fprintln(out, "where the wall goes, from the op client's start: task created, first host sent, last host's reply, last result printed, client exited; then every write of the op stored (statuses are stored behind the runs) and the server's CPU until then")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "run\tcreated\tfirst sent\tlast reply\tlast printed\texited\tall stored\tserver CPU\t\n")
	for i, r := range runs {
		stored, cpu := "?", "?"
		if r.Stored > 0 {
			stored, cpu = ms(r.Stored), ms(r.StoredCPU)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", i+1, ms(r.Created), ms(r.FirstSent), ms(r.LastReply), ms(r.LastLine), ms(r.Wall), stored, cpu)
	}
	_ = tw.Flush()
	fmt.Fprintf(out, "event drops while %d agents came online and ran: %d\n", o.Hosts, e.dropped())
	return runs, nil
}

// idleCPU prints the server's and the sim's CPU per second over d, the
// fleet online and no op made: what the fleet's heartbeats cost the two
// between ops. What is left of start-up's tail once settle has seen the
// event and write backlog empty is let pass first (the fleet being told
// its heartbeat interval, each host beating once more at a new phase,
// and the collections after start-up's garbage): the server's CPU is
// read in windows of idleWindow until one is not a quarter under the one
// before (at most idleSettleMax).
func (e *env) idleCPU(ctx context.Context, d time.Duration) error {
	pid, simPID := e.server.cmd.Process.Pid, e.sim.cmd.Process.Pid
	t0 := time.Now()
	for prev := -1.0; time.Since(t0) < idleSettleMax; {
		rates, err := cpuPerSecond(ctx, idleWindow, pid)
		if err != nil {
			return err
		}
		if prev >= 0 && rates[0] >= 0.75*prev {
			break
		}
		prev = rates[0]
	}
	settled := time.Since(t0)
	rates, err := cpuPerSecond(ctx, d, pid, simPID)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.setup.Out, "idle fleet before run 1 (%s, after %s for start-up's tail to pass): server CPU %.0f ms/s, sim CPU %.0f ms/s\n",
		d, settled.Round(time.Second), rates[0], rates[1])
	return nil
}

// The idle CPU's settling windows and their bound.
const (
	idleWindow    = 5 * time.Second
	idleSettleMax = time.Minute
)

// cpuPerSecond is the CPU per second, in milliseconds, of each process
// of pids over d.
func cpuPerSecond(ctx context.Context, d time.Duration, pids ...int) ([]float64, error) {
	before := make([]time.Duration, len(pids))
	for i, p := range pids {
		u, err := readUsage(p)
		if err != nil {
			return nil, err
		}
		before[i] = u.CPU
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(d):
	}
	secs := time.Since(t0).Seconds()
	rates := make([]float64, len(pids))
	for i, p := range pids {
		u, err := readUsage(p)
		if err != nil {
			return nil, err
		}
		rates[i] = float64((u.CPU - before[i]).Milliseconds()) / secs
	}
	return rates, nil
}

// runOp runs `gseproc op` once (the run-th) and measures it. When
// profiling, the op client writes its CPU profile to client-cpu-RUN.pprof.
func (e *env) runOp(ctx context.Context, o FleetOptions, run int) (FleetRun, error) {
	var r FleetRun
	pid := e.server.cmd.Process.Pid
	u0, s0, err := e.usages()
	if err != nil {
		return r, err
	}
	cmd := exec.CommandContext(ctx, e.setup.Bin, "op", o.Op.String(), "--server", e.url, "--config", e.cfg,
		"--ns", o.Namespace, "--name", o.Name, "--json")
	cmd.SysProcAttr = ownGroup()
	if dir := e.setup.ProfileDir; dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return r, fmt.Errorf("bench: profile dir: %w", err)
		}
		cmd.Env = append(os.Environ(), "GSEPROC_CLI_CPU_PROFILE="+filepath.Join(dir, fmt.Sprintf("client-cpu-%d.pprof", run)))
	}
	cmd.Stdout = nil
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return r, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	e.out.reserve(e.setup.Hosts * opLineSize)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return r, fmt.Errorf("start op: %w", err)
	}
	// Read while the op runs, the lines' times kept; the lines are read
	// once the client has exited (opOutput).
	rerr := e.out.readFrom(stdout, func() time.Duration { return time.Since(start) })
	if rerr != nil {
		_, _ = io.Copy(io.Discard, stdout) // so that the client is not left blocked writing
	}
	werr := cmd.Wait()
	r.Wall = time.Since(start)
	if rerr != nil {
		return r, fmt.Errorf("op: read its output: %w", rerr)
	}
	// The server's and the sim's usage at the op's end, before the lines
	// are read.
	u1, s1, err := e.usages()
	if err != nil {
		return r, err
	}
	// Stored before the lines are read: the time the op's writes took,
	// not the harness's reading.
	if err := e.allStored(ctx); err == nil {
		r.Stored = time.Since(start)
		if u, err := readUsage(pid); err == nil {
			r.StoredCPU = u.CPU - u0.CPU
		}
	} else if !errors.Is(err, errNoBacklog) {
		return r, err
	}
	var host, done []time.Duration
	var taskID string
	var firstSent, lastReply time.Time
	var line opLine
	e.out.lines(func(b []byte, at time.Duration) {
		if err := readOpLine(b, &line); err != nil {
			return
		}
		host = append(host, line.Finished.Sub(line.Started))
		done = append(done, at)
		taskID = line.TaskID
		if firstSent.IsZero() || line.Started.Before(firstSent) {
			firstSent = line.Started
		}
		if line.Finished.After(lastReply) {
			lastReply = line.Finished
		}
		if line.State != model.StateSuccess {
			r.NotOK++
		}
	})
	if ps := cmd.ProcessState; ps != nil {
		r.ClientCPU = ps.UserTime() + ps.SystemTime()
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return r, fmt.Errorf("op: %w", werr)
	}
	if _, err := fmt.Sscanf(lastTargetsField(stderr.String()), "%d", &r.Targets); err != nil {
		return r, fmt.Errorf("op printed no summary: %s", stderr.String())
	}
	r.ServerCPU, r.ServerRSS, r.PeakRSS, r.SimCPU = u1.CPU-u0.CPU, u1.RSS, u1.PeakRSS, s1.CPU-s0.CPU
	r.HostP50, r.HostP99 = pct(host, 50), pct(host, 99)
	r.DoneP50, r.DoneP99 = pct(done, 50), pct(done, 99)
	if len(done) > 0 {
		r.LastLine = done[len(done)-1] // sorted by pct
		r.FirstSent, r.LastReply = firstSent.Sub(start), lastReply.Sub(start)
	}
	if taskID != "" {
		if t, err := e.client.TaskSummary(ctx, taskID); err == nil {
			r.Created = t.Task.Created.Sub(start)
		}
	}
	if len(host) != r.Targets {
		return r, fmt.Errorf("op printed %d results for %d targets", len(host), r.Targets)
	}
	return r, nil
}

// usages are the server's and the sim's usage now.
func (e *env) usages() (server, sim usage, err error) {
	if server, err = readUsage(e.server.cmd.Process.Pid); err != nil {
		return server, sim, err
	}
	sim, err = readUsage(e.sim.cmd.Process.Pid)
	return server, sim, err
}

// allStored waits until the server's write backlog (/metrics'
// gseproc_writes_queued) is empty; errNoBacklog: the server has no such
// gauge.
func (e *env) allStored(ctx context.Context) error {
	return e.awaitBacklog(ctx, "the op's writes", storedPoll, func(_, writes int) bool { return writes == 0 })
}

// awaitBacklog reads the server's backlog every poll until done says it
// is what is awaited (what, in the error when ctx ends first);
// errNoBacklog: the server has no backlog gauges.
func (e *env) awaitBacklog(ctx context.Context, what string, poll time.Duration, done func(events, writes int) bool) error {
	for {
		events, writes, err := backlog(ctx, e.url)
		if err == nil && done(events, writes) || errors.Is(err, errNoBacklog) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: waiting for %s to be stored (last: %d events, %d writes, %v): %w", what, events, writes, err, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// storedPoll is how often allStored reads the server's write backlog.
const storedPoll = 20 * time.Millisecond

// lastTargetsField finds "N target(s)" in op's summary line.
func lastTargetsField(s string) string {
	i := strings.LastIndex(s, " target(s)")
	if i < 0 {
		return ""
	}
	j := strings.LastIndexByte(s[:i], ' ')
	return s[j+1 : i]
}

// pct is the p-th percentile (0..100) of d, sorting d.
func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p/100))]
}

// wallSummary is one line over the runs' walls (and the sim's CPU, the
// same work each run: on a shared machine it moves with the machine's
// pace, and the walls with it).
func wallSummary(runs []FleetRun) string {
	walls := make([]time.Duration, len(runs))
	sims := make([]time.Duration, len(runs))
	for i, r := range runs {
		walls[i], sims[i] = r.Wall, r.SimCPU
	}
	return fmt.Sprintf("over %d runs: wall min %s, median %s, max %s; the sim's CPU (the same work each run) min %s, median %s, max %s",
		len(runs), ms(pct(walls, 0)), ms(median(walls)), ms(pct(walls, 100)), ms(pct(sims, 0)), ms(median(sims)), ms(pct(sims, 100)))
}

// median is the median of d (the mean of the middle two of an even
// count); 0 for none. d is sorted.
func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	n := len(d)
	if n%2 == 1 {
		return d[n/2]
	}
	return (d[n/2-1] + d[n/2]) / 2
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
