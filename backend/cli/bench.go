package cli

import (
	"context"
	"time"

	"gseproc/backend/bench"
)

// runBench measures gseproc as deployed: `gseproc bench fleet` (one op
// over a simulated fleet in its own process, end to end through the real
// server and op client) and `gseproc bench operate` (the operate_proc
// request rate under concurrent clients). Everything runs on 127.0.0.1
// and is stopped on return.
func runBench(ctx context.Context, args []string, io Stdio) error {
	fs := newFlags("bench", "bench fleet|operate [flags]", io)
	var s bench.Setup
	fs.IntVar(&s.Hosts, "hosts", 10000, "simulated hosts in the fleet (`N`)")
	fs.Int64Var(&s.Seed, "seed", 1, "seed of the simulated fleet")
	fs.DurationVar(&s.LatencyMedian, "latency-median", 5*time.Millisecond, "simulated agents' median reply delay")
	fs.DurationVar(&s.LatencyP99, "latency-p99", 50*time.Millisecond, "simulated agents' p99 reply delay")
	fs.Float64Var(&s.Rate, "rate", 0, "the bench app's request limit per second (0 = none)")
	fs.IntVar(&s.Burst, "burst", 0, "the bench app's request burst")
	fs.StringVar(&s.ProfileDir, "profile", "", "write the server's CPU, heap, mutex, block and goroutine profiles to `DIR`")
	fs.IntVar(&s.ProfileSeconds, "profile-seconds", 20, "length of the CPU profile")
	fs.StringVar(&s.Bin, "bin", "", "the gseproc binary to start (default: this one)")
	runs := fs.Int("runs", 3, "fleet: runs of the op")
	clients := fs.Int("clients", 50, "operate: concurrent clients")
	requests := fs.Int("requests", 40000, "operate: at most this many calls")
	duration := fs.Duration("duration", 10*time.Second, "operate: at most this long")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || (pos[0] != "fleet" && pos[0] != "operate") {
		return usageError("bench", "want one measurement: fleet or operate")
	}
	what := pos[0]
	s.Out = io.Out
	if what == "fleet" {
		_, err := bench.Fleet(ctx, bench.FleetOptions{Setup: s, Runs: *runs})
		return err
	}
	_, err = bench.Operate(ctx, bench.LoadOptions{Setup: s, Clients: *clients, Requests: *requests, Duration: *duration})
	return err
}
