package cli

import (
	"context"
	"fmt"
	"net"

	"gseproc/backend/config"
	"gseproc/backend/node"
)

// runServer serves the HTTP API: `gseproc server --config FILE`,
// `--listen ADDR` overrides the address, `--demo` needs no file.
func runServer(ctx context.Context, args []string, io Stdio) error {
	fs := newFlags("server", "server [--config FILE] [--listen ADDR] [--nats-listen ADDR] [--demo] [--hosts N] [--seed S] [--hash-secret SECRET]", io)
	cfgPath := fs.String("config", "", "config `FILE` ([server] listen, apps, fleet; default: $GSEPROC_CONFIG, then $XDG_CONFIG_HOME/gseproc/config.toml, then /etc/gseproc/config.toml)")
	listen := fs.String("listen", "", "serve on `ADDR` (host:port), overriding [server] listen (default "+config.DefaultListen+")")
	natsListen := fs.String("nats-listen", "", "the embedded NATS server listens for agents on `ADDR` (host:port; port -1 picks a free one), overriding [nats] listen (default "+config.DefaultNATSListen+")")
	demo := fs.Bool("demo", false, "serve a simulated fleet holding every host and process the API documents' examples name, with the demo app esb_test / xxx on biz 1 (no config file needed)")
	pprofAddr := fs.String("pprof", "", "serve Go profiles (net/http/pprof, with mutex and block profiling on) at `ADDR`, a loopback host:port")
	hash := fs.String("hash-secret", "", "print the [[server.apps]] salt and secret_sha256 lines for `SECRET` and exit")
	var sim simFlags
	sim.register(fs) // the simulated fleet's, with --demo or [server] fleet = simulated or mixed
	if err := parseList("server", fs, args); err != nil {
		return err
	}
	if *hash != "" {
		salt := config.NewSalt()
		fmt.Fprintf(io.Out, "salt = %q\nsecret_sha256 = %q\n", salt, config.HashSecret(salt, *hash))
		return nil
	}

	cfg := config.Default()
	if !*demo || *cfgPath != "" {
		var err error
		if cfg, err = loadConfig(*cfgPath, io); err != nil {
			return &ExitError{Code: 2, Err: err}
		}
	}
	if *demo {
		node.ApplyDemo(&cfg)
	}
	if *listen != "" {
		cfg.Server.Listen = *listen
	}
	if *natsListen != "" {
		cfg.NATS.Listen = *natsListen
	}
	if sim.set {
		// A server of real agents only has no simulated fleet to size:
		// the flags would change nothing, silently.
		if f := cfg.Server.Fleet; f != "simulated" && f != "mixed" { // "" is "nats" too
			return &ExitError{Code: 2, Err: fmt.Errorf("--hosts and --seed size the simulated fleet, which this server does not have ([server] fleet = %q): add --demo, or set fleet = \"simulated\" or \"mixed\"", cfg.Server.Fleet)}
		}
		sim.apply(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	log := newLogger(cfg.Log, io.Err)
	if *demo {
		log.Warn("demo credentials in use: app esb_test / secret xxx may operate biz 1 and biz_set 1 and every namespace; requests without bk_app_code are accepted as esb_test; the native API is open. Do not expose this server.",
			"listen", cfg.Server.Listen)
	}
	if len(cfg.Server.Apps) == 0 {
		log.Warn("no [[server.apps]] configured: every GSE/JOB API request will be refused (1306403)")
	}

	// The server's GC pacing (node.PaceMemoryWithin): a steady server
	// stays under node.MemoryTarget, a large operation's heap under
	// [server] memory_ceiling while it leaves room, else as GOGC paces it.
	defer node.PaceMemoryWithin(ctx, log, cfg.Server.MemoryCeiling)()

	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	n, err := node.StartServer(ctx, cfg, *demo, Version, log)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("server backend: %w", err)
	}
	defer n.Close()
	if n.AgentsURL != "" {
		fmt.Fprintf(io.Out, "agents connect to %s\n", n.AgentsURL)
	}

	if *pprofAddr != "" {
		addr, stop, err := node.ServePprof(*pprofAddr)
		if err != nil {
			_ = ln.Close()
			return &ExitError{Code: 2, Err: err}
		}
		defer stop()
		fmt.Fprintf(io.Out, "pprof on http://%s\n", addr)
	}

	fmt.Fprintf(io.Out, "gseproc server starting: health at http://%s/readyz\n", ln.Addr())
	if err := n.ServeAPI(ctx, ln, cfg.Server, func(addr net.Addr) {
		fmt.Fprintf(io.Out, "gseproc server listening on http://%s\n", addr)
	}); err != nil {
		return err
	}
	if err := n.Err(); err != nil {
		return fmt.Errorf("server backend: %w", err)
	}
	log.Info("server stopped")
	return nil
}
