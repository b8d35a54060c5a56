package agentcmd

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"

	"gseproc/backend/cli/clikit"
	"gseproc/backend/config"
	"gseproc/model"
)

// Run runs the host agent: `gseproc agent --config FILE`, with flags for
// the common settings so several agents with different identities can run
// on one machine. It supervises the hosted processes and serves them over
// NATS (Node); the supervision goes on while the server is unreachable,
// and the connection is retried forever.
func Run(ctx context.Context, args []string, io clikit.Stdio) error {
	fs := clikit.NewFlags("agent", "agent [--config FILE] [--nats URL] [--cloud N] [--ip ADDR] [--data-dir DIR] [--user U --password P | --nkey-seed FILE | --creds FILE] [--tls-ca FILE] [--tls-cert FILE --tls-key FILE] [--label k=v]...", io)
	cfgPath := fs.String("config", "", "config `FILE` ([agent] identity and tuning, [nats] connection)")
	var nf clikit.NATSClientFlags
	nf.Register(fs)
	cloud := fs.Int("cloud", 0, "bk_cloud_id `N` of this host (overrides [agent] cloud_id)")
	ip := fs.String("ip", "", "this host's `ADDR` in its cloud area (overrides [agent] ip)")
	dataDir := fs.String("data-dir", "", "`DIR` of the hosting registry (overrides [agent] data_dir; default "+config.DefaultAgentDataDir+")")
	var labels clikit.MultiFlag
	fs.Var(&labels, "label", "host label `key=value` (repeatable; added to [agent] labels)")
	if err := clikit.ParseList("agent", fs, args); err != nil {
		return err
	}
	cfg, set, err := nf.Load(fs, *cfgPath, io)
	if err != nil {
		return err
	}
	if set["cloud"] {
		cfg.Agent.CloudID = *cloud
	}
	if set["ip"] {
		cfg.Agent.IP = *ip
	}
	if set["data-dir"] {
		cfg.Agent.DataDir = *dataDir
	}
	for _, l := range labels {
		k, v, err := model.ParseLabel(l)
		if err != nil {
			return clikit.UsageError("agent", "--label %q: want key=value", l)
		}
		if cfg.Agent.Labels == nil {
			cfg.Agent.Labels = map[string]string{}
		}
		cfg.Agent.Labels[k] = v
	}
	if err := cfg.Validate(); err != nil {
		return &clikit.ExitError{Code: 2, Err: err}
	}
	if err := cfg.Agent.Validate(); err != nil {
		return &clikit.ExitError{Code: 2, Err: err}
	}
	log := clikit.NewLogger(cfg.Log, io.Err)
	defer agentGC()() // restored on return: Run also runs in-process (tests, embedding)

	n, err := NewNode(cfg, log)
	if err != nil {
		return &clikit.ExitError{Code: 2, Err: err}
	}
	fmt.Fprintf(io.Out, "gseproc agent %s: supervising (registry in %s), serving over NATS at %s\n", n.ID(), cfg.Agent.DataDir, cfg.NATS.ClientURLs())
	return n.Run(ctx)
}

// agentGCPercent is the agent's GOGC unless the environment sets one.
// An idle agent's live heap is about 1 MB, and the Go runtime lets the
// heap grow to at least 4 MB x GOGC/100 before it collects: at the
// default 100 that floor, not what the agent keeps, is most of its
// anonymous memory. At 25 the floor is 1 MB (measured by gseproc bench
// agent: anonymous RSS 6.4-6.9 MB -> 4.2 MB with 5 hosted processes);
// the cost is a collection per 25% of heap growth, small at the agent's
// allocation rate (a crash storm of 500 processes: see
// BenchmarkAgentCrashStorm run with GOGC=25). Measured again on
// gseproc-agent (5 hosted, 20 s idle; gctrace: live heap under 1 MB,
// goal 1 MB): anonymous RSS 4.3 MB at 25, 4.4 MB at 10 (the floor is
// no longer what binds: the rest is the runtime's per-size-class spans
// and metadata), 6.5 MB at 100. A GOMEMLIMIT of 6 MiB takes it to 3.1 MB
// but collects continuously (cpu 0.6% -> 5.9% of a core while idle), so
// none is set.
const agentGCPercent = 25

// agentGC applies agentGCPercent when GOGC is not set, and returns what
// puts the previous setting back.
func agentGC() (restore func()) {
	if _, set := os.LookupEnv("GOGC"); !set {
		prev := debug.SetGCPercent(agentGCPercent)
		return func() { debug.SetGCPercent(prev) }
	}
	return func() {}
}
