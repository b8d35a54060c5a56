package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"

	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/simulator"
	"gseproc/backend/store"
)

// OpenEmbedded builds and starts the embedded engine over a simulated fleet
// (cfg.Simulator) with an in-memory store, seeds the registry with the
// fleet's definitions and runs the fleet's crash simulation. The returned
// func stops the simulation, closes the engine, the fleet and the store,
// and waits for all of them; it is safe to call more than once.
func OpenEmbedded(ctx context.Context, cfg config.Config, version string, log *slog.Logger) (*engine.Engine, func() error, error) {
	e, _, closer, err := OpenEmbeddedFleet(ctx, cfg, version, log)
	return e, closer, err
}

// OpenEmbeddedFleet is OpenEmbedded, also returning the simulated fleet
// (a demo drives it).
func OpenEmbeddedFleet(ctx context.Context, cfg config.Config, version string, log *slog.Logger) (*engine.Engine, *simulator.Fleet, func() error, error) {
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
		engine.WithLogger(log), engine.WithReadOnly(cfg.Engine.ReadOnly), engine.WithVersion(version), engine.WithSimulator(fleet))
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
