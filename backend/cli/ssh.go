package cli

import (
	"context"
	"fmt"
	"time"

	"gseproc/backend/config"
	"gseproc/backend/node"
	"gseproc/backend/sshconsole"
)

// runSSH serves the console over SSH: `gseproc ssh [--server URL]`.
func runSSH(ctx context.Context, args []string, io Stdio) error {
	fs := newFlags("ssh", "ssh [--config FILE] [--server URL] [--listen ADDR] [--host-key FILE] [--authorized-keys FILE] [--idle-timeout D]", io)
	var cf commonFlags
	cf.register(fs)
	listen := fs.String("listen", "", "serve SSH on `ADDR` (host:port), overriding [ssh] listen")
	hostKey := fs.String("host-key", "", "the host key `FILE`, generated on first start, overriding [ssh] host_key")
	authKeys := fs.String("authorized-keys", "", "the authorized-keys `FILE` (each key with operator=\"NAME\",namespaces=\"NS,...\"), overriding [ssh] authorized_keys")
	idle := fs.Duration("idle-timeout", 0, "close a session after this long without a key press, overriding [ssh] idle_timeout")
	fs.Usage = listUsage(fs, "ssh [flags]", "Serve the console over SSH. Each public key of the authorized-keys file maps to\n"+
		"an operator name and the namespaces that operator may see and change; every\naction is recorded in the audit trail under that name (via ssh). The console\n"+
		"runs on the embedded engine, or on the server at --server (with [server.client]\ncredentials). Passwords are never accepted.")
	if err := parseList("ssh", fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(cf.config, io)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	if *listen != "" {
		cfg.SSH.Listen = *listen
	}
	if *hostKey != "" {
		cfg.SSH.HostKey = *hostKey
	}
	if *authKeys != "" {
		cfg.SSH.AuthorizedKeys = *authKeys
	}
	if *idle != 0 {
		cfg.SSH.IdleTimeout = config.Duration(*idle)
	}
	cf.sim.apply(&cfg)
	if err := cfg.Validate(); err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	keys, err := sshconsole.LoadAuthorizedKeys(cfg.SSH.AuthorizedKeys)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	log := newLogger(cfg.Log, io.Err)
	be, closeBackend, err := node.OpenBackend(ctx, cfg, cf.server, Version, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := closeBackend(); err != nil {
			log.Warn("close backend", "err", err)
		}
	}()
	srv, err := node.StartSSH(cfg, keys, be, Version, log)
	if err != nil {
		return err
	}
	fmt.Fprintf(io.Out, "gseproc ssh console listening on %s (host key %s, %d authorized keys, idle timeout %s)\n",
		srv.Addr(), srv.HostKeyFingerprint(), len(keys), cfg.SSH.IdleTimeout.D().Round(time.Second))
	return srv.Serve(ctx)
}
