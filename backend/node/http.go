package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"sync"
	"time"

	"gseproc/backend/config"
	"gseproc/backend/server"
)

// Demo credentials: the documents' examples use app esb_test, secret xxx, biz 1.
const (
	DemoAppCode = "esb_test"
	DemoSecret  = "xxx"
)

// ApplyDemo turns cfg into the demo (`gseproc server --demo`): the
// documents' hosts and processes in the simulated fleet beside real agents
// (unless the fleet is simulated only), the demo app DemoAppCode /
// DemoSecret on biz 1 and biz_set 1 in every namespace, accepted for a
// request without bk_app_code, and the native API open.
func ApplyDemo(cfg *config.Config) {
	cfg.Simulator.Demo = true
	if cfg.Server.Fleet != "simulated" {
		cfg.Server.Fleet = "mixed"
	}
	salt := config.NewSalt()
	app := config.AppConfig{Code: DemoAppCode, Salt: salt, SecretSHA256: config.HashSecret(salt, DemoSecret),
		Biz: []int{1}, BizSet: []int{1}, Namespaces: []string{"*"}}
	apps := []config.AppConfig{app}
	for _, a := range cfg.Server.Apps {
		if a.Code != DemoAppCode {
			apps = append(apps, a)
		}
	}
	cfg.Server.Apps = apps
	cfg.Server.AnonymousApp = DemoAppCode
	cfg.Server.NativeAuth = false
}

// ServeAPI serves the HTTP API of n on ln until ctx ends or n fails to
// start. The API answers at once: /healthz and /readyz (which says why it
// is not ready: a cluster node waits for its peers), every other call 503
// with the reason until n has started; serving is called once it has (not
// if it failed or stopped first). It returns the HTTP server's error; n's
// own is n.Err.
func (n *Server) ServeAPI(ctx context.Context, ln net.Listener, cfg config.ServerConfig, serving func(addr net.Addr)) error {
	var sopts []server.Option
	if r := n.Readiness(); r != nil {
		sopts = append(sopts, server.WithReadiness(r))
	}
	sopts = append(sopts, server.WithBacklog(n.Backlog))
	srv := server.New(n, cfg, n.log, sopts...)
	var wg sync.WaitGroup
	defer wg.Wait()
	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing() // before wg.Wait
	wg.Go(func() {
		select {
		case <-serveCtx.Done():
			return
		case <-n.Started():
		}
		if err := n.Err(); err != nil {
			n.log.Error("server could not start", "err", err)
			stopServing()
			return
		}
		if !n.Running() {
			return // stopped while starting
		}
		serving(ln.Addr())
		n.log.Info("serving", "addr", ln.Addr().String(), "fleet", cfg.Fleet, "apps", len(cfg.Apps), "demo", n.demo)
	})
	n.log.Info("starting: /healthz and /readyz answer", "addr", ln.Addr().String())
	return srv.Serve(serveCtx, ln)
}

// ServePprof serves the Go profiles (net/http/pprof) on addr, a loopback
// host:port only, with mutex and block profiling turned on; stop ends it.
func ServePprof(addr string) (_ net.Addr, stop func(), err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--pprof %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, nil, fmt.Errorf("--pprof %q: profiles are served on a loopback address only", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--pprof: %w", err)
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
	return ln.Addr(), func() {
		_ = hs.Close()
		<-done
	}, nil
}
