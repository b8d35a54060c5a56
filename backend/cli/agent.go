package cli

import (
	"context"
	"fmt"

	"gseproc/backend/config"
	"gseproc/backend/node"
	"gseproc/model"
)

// runAgent runs the host agent: `gseproc agent --config FILE`, with flags
// for the common settings so several agents with different identities can
// run on one machine. It supervises the hosted processes and serves them
// over NATS (node.NewAgent); the supervision goes on while the server is
// unreachable, and the connection is retried forever.
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

	n, err := node.NewAgent(cfg, log)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	fmt.Fprintf(io.Out, "gseproc agent %s: supervising (registry in %s), serving over NATS at %s\n", n.ID(), cfg.Agent.DataDir, cfg.NATS.ClientURLs())
	return n.Run(ctx)
}
