package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/logging"
	"gseproc/backend/simulator"
	"gseproc/backend/store"
)

// loadConfig loads the config file (path, or the usual places when "") and
// prints its warnings (unknown keys) to io.Err.
func loadConfig(path string, io Stdio) (config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return cfg, err
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(io.Err, "warning:", w)
	}
	return cfg, nil
}

// newLogger builds the slog logger of cfg: level debug, info, warn or error
// (default info), format text or json, to cfg.File when set (appended;
// falling back to w when it cannot be opened) or else to w.
func newLogger(cfg config.LogConfig, w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Level)); err != nil || cfg.Level == "" {
		level = slog.LevelInfo
	}
	var fileErr error
	if cfg.File != "" {
		f, err := os.OpenFile(cfg.File, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
		if err != nil {
			fileErr = err
		} else {
			w = f // the process's lifetime: closed on exit
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if strings.EqualFold(cfg.Format, "json") {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	// A failure that repeats (a route to a dead node is retried 4 times a
	// second) is written once per 30 s, with how often it repeated.
	l := slog.New(logging.RateLimit(h, slog.LevelWarn, 30*time.Second))
	if fileErr != nil {
		l.Warn("log file unusable, logging here instead", "file", cfg.File, "err", fileErr)
	}
	return l
}

// openBackend opens the backend a command talks to: the servers at
// serverURLs (--server, comma-separated) or else those of [server.client]
// servers, when given; else the embedded engine over a simulated fleet.
// The returned func closes everything it started.
func openBackend(ctx context.Context, cfg config.Config, serverURLs string, log *slog.Logger) (backend.Backend, func() error, error) {
	urls := cfg.Server.Client.Servers
	if serverURLs != "" {
		urls = []string{serverURLs}
	}
	if len(urls) > 0 {
		b, err := newRemote(urls, cfg, log)
		if err != nil {
			return nil, nil, fmt.Errorf("connect to %s: %w", strings.Join(urls, ","), err)
		}
		closer := func() error {
			if c, ok := b.(io.Closer); ok {
				return c.Close()
			}
			return nil
		}
		return b, closer, nil
	}
	e, closer, err := openEmbedded(ctx, cfg, log)
	if err != nil {
		return nil, nil, err
	}
	return e, closer, nil
}

// openEmbedded builds and starts the embedded engine over a simulated fleet
// (cfg.Simulator) with an in-memory store, seeds the registry with the
// fleet's definitions and runs the fleet's crash simulation. The returned
// func stops the simulation, closes the engine, the fleet and the store,
// and waits for all of them; it is safe to call more than once.
func openEmbedded(ctx context.Context, cfg config.Config, log *slog.Logger) (*engine.Engine, func() error, error) {
	e, _, closer, err := openEmbeddedFleet(ctx, cfg, log)
	return e, closer, err
}

// openEmbeddedFleet is openEmbedded, also returning the simulated fleet
// (a demo drives it).
func openEmbeddedFleet(ctx context.Context, cfg config.Config, log *slog.Logger) (*engine.Engine, *simulator.Fleet, func() error, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	fleet, err := simulator.NewChecked(cfg.Simulator)
	if err != nil {
		return nil, nil, nil, err
	}
	st := store.NewMemory(store.WithKeepTasks(cfg.Engine.KeepTasks), store.WithKeepEvents(cfg.Engine.KeepEvents), store.WithKeepAudit(cfg.Engine.KeepAudit),
		store.WithMaxAge(cfg.Engine.ResultMaxAge.D()))
	e := engine.New(cfg.Engine, fleet, fleet, st,
		engine.WithLogger(log), engine.WithReadOnly(cfg.Engine.ReadOnly), engine.WithVersion(Version), engine.WithSimulator(fleet))
	closer, err := startEngine(ctx, e, fleet, fleet.Close, st.Close)
	if err != nil {
		return nil, nil, nil, err
	}
	return e, fleet, closer, nil
}

// startEngine starts e and, when fleet is not nil, seeds e's registry with
// the fleet's definitions and runs its crash simulation. The returned func
// stops the simulation, waits for it, then closes e and calls each of
// closers in order, returning their errors joined; it is safe to call more
// than once. When startEngine fails, it has done the same.
func startEngine(ctx context.Context, e *engine.Engine, fleet *simulator.Fleet, closers ...func() error) (func() error, error) {
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var once sync.Once
	var closeErr error
	closer := func() error {
		once.Do(func() {
			stop()
			wg.Wait()
			errs := []error{e.Close()}
			for _, c := range closers {
				errs = append(errs, c())
			}
			closeErr = errors.Join(errs...)
		})
		return closeErr
	}
	if err := e.Start(ctx); err != nil {
		_ = closer()
		return nil, err
	}
	if fleet != nil {
		if err := e.Seed(ctx, fleet.Definitions()); err != nil {
			_ = closer()
			return nil, err
		}
		wg.Go(func() { fleet.Run(runCtx) })
	}
	return closer, nil
}
