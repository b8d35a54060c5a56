package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/server"
)

// Demo credentials: the documents' examples use app esb_test, secret xxx, biz 1.
const (
	demoAppCode = "esb_test"
	demoSecret  = "xxx"
)

// runServer serves the HTTP API: `gseproc server --config FILE`,
// `--listen ADDR` overrides the address, `--demo` needs no file.
func runServer(ctx context.Context, args []string, io Stdio) error {
	fs := newFlags("server", "server [--config FILE] [--listen ADDR] [--demo] [--hash-secret SECRET]", io)
	cfgPath := fs.String("config", "", "config `FILE` ([server] listen, apps, fleet; default: $GSEPROC_CONFIG, then $XDG_CONFIG_HOME/gseproc/config.toml, then /etc/gseproc/config.toml)")
	listen := fs.String("listen", "", "serve on `ADDR` (host:port), overriding [server] listen (default "+config.DefaultListen+")")
	demo := fs.Bool("demo", false, "serve a simulated fleet holding every host and process the API documents' examples name, with the demo app esb_test / xxx on biz 1 (no config file needed)")
	hash := fs.String("hash-secret", "", "print the [[server.apps]] salt and secret_sha256 lines for `SECRET` and exit")
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &ExitError{Code: 2}
	}
	if len(pos) > 0 {
		return usageError("server", "unexpected argument %q", pos[0])
	}
	if *hash != "" {
		salt := randomHex(8)
		fmt.Fprintf(io.Out, "salt = %q\nsecret_sha256 = %q\n", salt, config.HashSecret(salt, *hash))
		return nil
	}

	cfg := config.Default()
	if !*demo || *cfgPath != "" {
		if cfg, err = loadConfig(*cfgPath, io); err != nil {
			return &ExitError{Code: 2, Err: err}
		}
	}
	if *demo {
		applyDemo(&cfg)
	}
	if *listen != "" {
		cfg.Server.Listen = *listen
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

	b, closeBackend, err := buildServerBackend(ctx, cfg, *demo, log)
	if err != nil {
		return fmt.Errorf("server backend: %w", err)
	}
	defer closeBackend()

	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := server.New(b, cfg.Server, log)
	fmt.Fprintf(io.Out, "gseproc server listening on http://%s\n", ln.Addr())
	log.Info("serving", "addr", ln.Addr().String(), "fleet", cfg.Server.Fleet, "apps", len(cfg.Server.Apps), "demo", *demo)
	if err := srv.Serve(ctx, ln); err != nil {
		return err
	}
	log.Info("server stopped")
	return nil
}

// buildServerBackend builds the Backend the server serves. The fleet
// source is [server] fleet: "simulated" (the embedded engine over a
// simulated fleet, cfg.Simulator; demo has already been applied to cfg).
// This is the one place to swap in an engine driving real agents
// ("nats" is reserved for it).
func buildServerBackend(ctx context.Context, cfg config.Config, demo bool, log *slog.Logger) (backend.Backend, func() error, error) {
	_ = demo // the NATS fleet source will need it (demo agents); the simulated one reads cfg.Simulator.Demo
	switch cfg.Server.Fleet {
	case "", "simulated":
		e, _, closer, err := openEmbedded(ctx, cfg, log)
		if err != nil {
			return nil, nil, err
		}
		return e, closer, nil
	}
	return nil, nil, fmt.Errorf("server.fleet %q is not supported by this build (want simulated)", cfg.Server.Fleet)
}

// applyDemo turns cfg into the demo: the documents' hosts and processes in
// the simulated fleet, and the demo app.
func applyDemo(cfg *config.Config) {
	cfg.Simulator.Demo = true
	cfg.Server.Fleet = "simulated"
	salt := randomHex(8)
	app := config.AppConfig{Code: demoAppCode, Salt: salt, SecretSHA256: config.HashSecret(salt, demoSecret),
		Biz: []int{1}, BizSet: []int{1}, Namespaces: []string{"*"}}
	apps := []config.AppConfig{app}
	for _, a := range cfg.Server.Apps {
		if a.Code != demoAppCode {
			apps = append(apps, a)
		}
	}
	cfg.Server.Apps = apps
	cfg.Server.AnonymousApp = demoAppCode
	cfg.Server.NativeAuth = false
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
