package cli

import (
	"context"
	"fmt"
	"time"

	"gseproc/backend/bench"
)

// runBench measures gseproc as deployed: `gseproc bench fleet` (one op
// over a simulated fleet in its own process, end to end through the real
// server and op client) and `gseproc bench operate` (the operate_proc
// request rate under concurrent clients). Everything runs on 127.0.0.1
// and is stopped on return.
func runBench(ctx context.Context, args []string, io Stdio) error {
	fs := newFlags("bench", "bench fleet|operate|compare|agent [flags]", io)
	var s bench.Setup
	fs.IntVar(&s.Hosts, "hosts", 10000, "simulated hosts in the fleet (`N`)")
	fs.Int64Var(&s.Seed, "seed", 1, "seed of the simulated fleet")
	fs.DurationVar(&s.LatencyMedian, "latency-median", 5*time.Millisecond, "simulated agents' median reply delay")
	fs.DurationVar(&s.LatencyP99, "latency-p99", 50*time.Millisecond, "simulated agents' p99 reply delay")
	fs.Float64Var(&s.Rate, "rate", 0, "the bench app's request limit per second (0 = none)")
	fs.IntVar(&s.Burst, "burst", 0, "the bench app's request burst")
	fs.StringVar(&s.ProfileDir, "profile", "", "write the server's CPU, heap, mutex, block and goroutine profiles to `DIR`, and the sim's CPU and heap and each fleet op client's CPU profile")
	fs.IntVar(&s.ProfileSeconds, "profile-seconds", 20, "length of the CPU profile")
	fs.IntVar(&s.ProfileRun, "profile-run", 0, "fleet: the CPU profiles (server's and sim's) cover run `N` alone, from its start, for --profile-seconds (0: from the first run's start)")
	fs.StringVar(&s.Bin, "bin", "", "the gseproc binary to start (default: this one)")
	fs.Int64Var(&s.MemoryCeiling, "memory-ceiling", 0, "fleet, operate: the server's [server] memory_ceiling in `BYTES` (0: the default; -1: none)")
	runs := fs.Int("runs", 3, "fleet: runs of the op; compare: runs of the fan-out")
	clients := fs.Int("clients", 50, "operate: concurrent clients")
	requests := fs.Int("requests", 40000, "operate: at most this many calls")
	duration := fs.Duration("duration", 10*time.Second, "operate: at most this long")
	samples := fs.Int("samples", 20, "compare: kill -9 samples per supervisor")
	settle := fs.Duration("settle", 1500*time.Millisecond, "compare: how long each restarted process runs before the next kill")
	fanHosts := fs.Int("fanout-hosts", 10, "compare: hosts (real agents; ansible inventory hosts) of the fan-out")
	only := fs.String("only", "", "compare: the tools to run besides gseproc, comma-separated (s6,supervisord,pm2,ansible; default all installed)")
	procs := fs.Int("procs", 5, "agent: hosted processes of the idle agent")
	idle := fs.Duration("idle", 20*time.Second, "agent: how long the agent idles before it is measured; fleet: how long the idle fleet's server and sim CPU is measured before run 1")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || (pos[0] != "fleet" && pos[0] != "operate" && pos[0] != "compare" && pos[0] != "agent") {
		return usageError("bench", "want one measurement: fleet, operate, compare or agent")
	}
	what := pos[0]
	s.Out = io.Out
	// What agent, compare and fleet take is refused here, by its flag,
	// when out of range: below 1 it would be replaced by a default
	// (--procs 0 measured 5 hosted processes, fleet --idle 0 20 s), too
	// many fan-out hosts were found only after the restart measures, and
	// a --profile-run with no --profile or past --runs took no profile
	// without a word.
	var bad string
	switch {
	case what == "agent" && *procs < 1:
		bad = fmt.Sprintf("--procs: %d, want at least 1", *procs)
	case (what == "agent" || what == "fleet") && *idle <= 0:
		bad = fmt.Sprintf("--idle: %s, want more than 0", *idle)
	case what == "fleet" && *runs < 1:
		bad = fmt.Sprintf("--runs: %d, want at least 1", *runs)
	case what == "fleet" && (s.ProfileRun < 0 || s.ProfileRun > *runs):
		bad = fmt.Sprintf("--profile-run: %d, want 0..%d (--runs)", s.ProfileRun, *runs)
	case s.ProfileRun > 0 && s.ProfileDir == "":
		bad = fmt.Sprintf("--profile-run: %d without --profile DIR, where the profiles go", s.ProfileRun)
	case what == "compare" && *samples < 1:
		bad = fmt.Sprintf("--samples: %d, want at least 1", *samples)
	case what == "compare" && *settle <= 0:
		bad = fmt.Sprintf("--settle: %s, want more than 0", *settle)
	case what == "compare" && (*fanHosts < 1 || *fanHosts > bench.MaxFanoutHosts):
		bad = fmt.Sprintf("--fanout-hosts: %d, want 1..%d", *fanHosts, bench.MaxFanoutHosts)
	case what == "compare" && *runs < 1:
		bad = fmt.Sprintf("--runs: %d, want at least 1", *runs)
	}
	if bad != "" {
		return usageError("bench", "%s", bad)
	}
	if what == "agent" {
		_, err := bench.AgentIdleRSS(ctx, bench.AgentIdleOptions{Bin: s.Bin, Procs: *procs, Settle: *idle, Out: io.Out})
		return err
	}
	if what == "compare" {
		o := bench.CompareOptions{Samples: *samples, Settle: *settle, Hosts: *fanHosts, Runs: *runs, Out: io.Out}
		if *only != "" {
			if o.Only, err = bench.ParseOnly(*only); err != nil {
				return usageError("bench", "%v", err)
			}
		}
		_, err := bench.Compare(ctx, o)
		return err
	}
	if what == "fleet" {
		_, err := bench.Fleet(ctx, bench.FleetOptions{Setup: s, Runs: *runs, Idle: *idle})
		return err
	}
	_, err = bench.Operate(ctx, bench.LoadOptions{Setup: s, Clients: *clients, Requests: *requests, Duration: *duration})
	return err
}
