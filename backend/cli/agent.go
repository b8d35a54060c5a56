package cli

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"gseproc/backend/agent"
	"gseproc/backend/config"
	"gseproc/backend/node"
	"gseproc/backend/transport"
	"gseproc/model"
)

// runAgent runs the host agent: `gseproc agent --config FILE`, with flags
// for the common settings so several agents with different identities can
// run on one machine. It supervises the hosted processes (backend/agent)
// and serves them over NATS (transport.ServeAgent); the supervision goes on
// while the server is unreachable, and the connection is retried forever.
func runAgent(ctx context.Context, args []string, io Stdio) error {
	fs := newFlags("agent", "agent [--config FILE] [--nats URL] [--cloud N] [--ip ADDR] [--data-dir DIR] [--user U --password P | --nkey-seed FILE | --creds FILE] [--tls-ca FILE] [--tls-cert FILE --tls-key FILE] [--label k=v]...", io)
	cfgPath := fs.String("config", "", "config `FILE` ([agent] identity and tuning, [nats] connection)")
	var nf natsClientFlags
	nf.register(fs)
	cloud := fs.Int("cloud", 0, "bk_cloud_id `N` of this host (overrides [agent] cloud_id)")
	ip := fs.String("ip", "", "this host's `ADDR` in its cloud area (overrides [agent] ip)")
	dataDir := fs.String("data-dir", "", "`DIR` of the hosting registry (overrides [agent] data_dir; default "+config.DefaultAgentDataDir+")")
	var labels multiFlag
	fs.Var(&labels, "label", "host label `key=value` (repeatable; added to [agent] labels)")
	if err := parseList("agent", fs, args); err != nil {
		return err
	}
	cfg, set, err := nf.load(fs, *cfgPath, io)
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
			return usageError("agent", "--label %q: want key=value", l)
		}
		if cfg.Agent.Labels == nil {
			cfg.Agent.Labels = map[string]string{}
		}
		cfg.Agent.Labels[k] = v
	}
	if err := cfg.Validate(); err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	if err := cfg.Agent.Validate(); err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	log := newLogger(cfg.Log, io.Err)

	a, err := agent.New(cfg.Agent, log)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	id := a.Identity().Host
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A permanent connection failure at start (credentials or certificates
	// wrong) ends the agent with the reason; transient ones are retried
	// with the reason in the log. The agent spreads over the listed URLs by
	// its identity, and moves back to its own node when it returns.
	fatal := make(chan error, 1)
	co := transport.ClientOptionsFromConfig(cfg.NATS, "gseproc-agent "+id.AgentID())
	co.FailFast, co.Home = true, id.AgentID()
	co.OnFatal = func(err error) {
		select {
		case fatal <- err:
		default:
		}
		cancel()
	}
	link, err := node.ClientLink(co, log)
	if err != nil {
		_ = a.Close()
		return &ExitError{Code: 2, Err: err}
	}
	defer link.Close()
	fmt.Fprintf(io.Out, "gseproc agent %s: supervising (registry in %s), serving over NATS at %s\n", id.AgentID(), cfg.Agent.DataDir, cfg.NATS.ClientURLs())
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() {
		runErr = a.Run(ctx)
		cancel() // the agent stopped on its own: stop serving too
	})
	serveErr := transport.ServeAgentOn(ctx, link, a, transport.ServeOptions{
		HeartbeatInterval: cfg.NATS.HeartbeatInterval.D(), Logger: log,
	})
	cancel()
	wg.Wait()
	select {
	case err := <-fatal:
		return err
	default:
	}
	if serveErr != nil {
		log.Error("agent: cannot serve over NATS", "err", serveErr)
		return serveErr
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	log.Info("agent stopped; hosted processes keep running")
	return nil
}
