package cli

import (
	"context"
	"fmt"

	"gseproc/backend/cli/clikit"
	"gseproc/backend/node"
	"gseproc/model"
)

// runSim runs a simulated fleet as agents over NATS: `gseproc sim --nats
// URL --hosts N [--seed S]`. One connection serves every host, so
// thousands cost little; each host answers on its own subject, heartbeats
// while its simulated agent is up, and publishes its events.
//
// `gseproc sim ACTION [flags]` is a live control instead (simctl.go).
func runSim(ctx context.Context, args []string, io Stdio) error {
	if len(args) > 0 {
		if a := model.SimAction(args[0]); a.Valid() {
			return runSimControl(ctx, a, args[1:], io)
		}
	}
	fs := newFlags("sim", "sim [--config FILE] [--nats URL] [--hosts N] [--seed S] [--pprof ADDR] [--user U --password P | --nkey-seed FILE | --creds FILE] [--tls-ca FILE] [--tls-cert FILE --tls-key FILE]", io)
	cfgPath := fs.String("config", "", "config `FILE` ([simulator] fleet, [nats] connection)")
	var nf clikit.NATSClientFlags
	nf.Register(fs)
	hosts := fs.Int("hosts", 0, "number of simulated `N` hosts (overrides [simulator] hosts)")
	seed := fs.Int64("seed", 0, "seed `S` of the fleet (same seed, same hosts; overrides [simulator] seed)")
	pprofAddr := fs.String("pprof", "", "serve Go profiles (net/http/pprof, with mutex and block profiling on) at `ADDR`, a loopback host:port")
	if err := parseList("sim", fs, args); err != nil {
		return err
	}
	cfg, set, err := nf.Load(fs, *cfgPath, io)
	if err != nil {
		return err
	}
	if set["hosts"] {
		cfg.Simulator.Hosts = *hosts
	}
	if set["seed"] {
		cfg.Simulator.Seed = *seed
	}
	if err := cfg.Validate(); err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	log := newLogger(cfg.Log, io.Err)
	if *pprofAddr != "" {
		addr, stop, err := node.ServePprof(*pprofAddr)
		if err != nil {
			return &ExitError{Code: 2, Err: err}
		}
		defer stop()
		fmt.Fprintf(io.Out, "pprof on http://%s\n", addr)
	}
	defer node.PaceSimGC()()
	n, err := node.NewSim(cfg, log)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	fmt.Fprintf(io.Out, "gseproc sim: %d simulated hosts (seed %d) serving over NATS at %s\n", n.Fleet.Len(), n.Fleet.Seed(), cfg.NATS.ClientURLs())
	return n.Run(ctx)
}
