package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"sync"
	"time"

	"gseproc/backend/config"
	"gseproc/backend/node"
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
	fs := newFlags("server", "server [--config FILE] [--listen ADDR] [--nats-listen ADDR] [--demo] [--hash-secret SECRET]", io)
	cfgPath := fs.String("config", "", "config `FILE` ([server] listen, apps, fleet; default: $GSEPROC_CONFIG, then $XDG_CONFIG_HOME/gseproc/config.toml, then /etc/gseproc/config.toml)")
	listen := fs.String("listen", "", "serve on `ADDR` (host:port), overriding [server] listen (default "+config.DefaultListen+")")
	natsListen := fs.String("nats-listen", "", "the embedded NATS server listens for agents on `ADDR` (host:port; port -1 picks a free one), overriding [nats] listen (default "+config.DefaultNATSListen+")")
	demo := fs.Bool("demo", false, "serve a simulated fleet holding every host and process the API documents' examples name, with the demo app esb_test / xxx on biz 1 (no config file needed)")
	pprofAddr := fs.String("pprof", "", "serve Go profiles (net/http/pprof, with mutex and block profiling on) at `ADDR`, a loopback host:port")
	hash := fs.String("hash-secret", "", "print the [[server.apps]] salt and secret_sha256 lines for `SECRET` and exit")
	if err := parseList("server", fs, args); err != nil {
		return err
	}
	if *hash != "" {
		salt := randomHex(8)
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
		applyDemo(&cfg)
	}
	if *listen != "" {
		cfg.Server.Listen = *listen
	}
	if *natsListen != "" {
		cfg.NATS.Listen = *natsListen
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

	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	node, err := node.StartServer(ctx, cfg, *demo, Version, log)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("server backend: %w", err)
	}
	defer node.Close()
	if node.AgentsURL != "" {
		fmt.Fprintf(io.Out, "agents connect to %s\n", node.AgentsURL)
	}

	if *pprofAddr != "" {
		stop, err := servePprof(*pprofAddr, io)
		if err != nil {
			_ = ln.Close()
			return &ExitError{Code: 2, Err: err}
		}
		defer stop()
	}

	var sopts []server.Option
	if r := node.Readiness(); r != nil {
		sopts = append(sopts, server.WithReadiness(r))
	}
	srv := server.New(node, cfg.Server, log, sopts...)
	// The API answers from now on: /healthz and /readyz (which says why it
	// is not ready: a cluster node waits for its peers), every other call
	// 503 with the reason until the node has started.
	var wg sync.WaitGroup
	defer wg.Wait()
	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing() // before wg.Wait
	wg.Go(func() {
		select {
		case <-serveCtx.Done():
			return
		case <-node.Started():
		}
		if err := node.Err(); err != nil {
			log.Error("server could not start", "err", err)
			stopServing()
			return
		}
		if !node.Running() {
			return // stopped while starting
		}
		fmt.Fprintf(io.Out, "gseproc server listening on http://%s\n", ln.Addr())
		log.Info("serving", "addr", ln.Addr().String(), "fleet", cfg.Server.Fleet, "apps", len(cfg.Server.Apps), "demo", *demo)
	})
	fmt.Fprintf(io.Out, "gseproc server starting: health at http://%s/readyz\n", ln.Addr())
	log.Info("starting: /healthz and /readyz answer", "addr", ln.Addr().String())
	if err := srv.Serve(serveCtx, ln); err != nil {
		return err
	}
	stopServing()
	wg.Wait()
	if err := node.Err(); err != nil {
		return fmt.Errorf("server backend: %w", err)
	}
	log.Info("server stopped")
	return nil
}

// applyDemo turns cfg into the demo: the documents' hosts and processes in
// the simulated fleet, and the demo app.
func applyDemo(cfg *config.Config) {
	cfg.Simulator.Demo = true
	if cfg.Server.Fleet != "simulated" {
		cfg.Server.Fleet = "mixed"
	}
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

// servePprof serves the Go profiles on addr (loopback only) with mutex
// and block profiling turned on; stop ends it.
func servePprof(addr string, io Stdio) (stop func(), err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("--pprof %q: profiles are served on a loopback address only", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof: %w", err)
	}
	runtime.SetMutexProfileFraction(10)
	runtime.SetBlockProfileRate(int(100 * time.Microsecond))
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln)
	}()
	fmt.Fprintf(io.Out, "pprof on http://%s\n", ln.Addr())
	return func() {
		_ = hs.Close()
		<-done
	}, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
