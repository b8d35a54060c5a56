package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/simulator"
	"gseproc/backend/store/jsstore"
	"gseproc/backend/transport"
	"gseproc/backend/transport/natsembed"
	"gseproc/model"
)

// demoAgentLabels are added to every real agent's labels under --demo:
// they join biz 1, beside the simulated fleet.
var demoAgentLabels = map[string]string{"bk_biz_id": "1"}

// NATS is the server side of the NATS transport, as
// StartNATS built it.
type NATS struct {
	// Dispatcher and Inventory are what the engine is given: the NATS
	// dispatcher, or (with a fleet) the fleet merged with it.
	Dispatcher engine.Dispatcher
	Inventory  engine.Inventory
	// Store is the JetStream store (the engine does not own it: Close does).
	Store engine.Store
	// NATS is the NATS dispatcher itself (hosts heard from, their statuses).
	NATS *transport.Dispatcher
	// ClientURL is where agents connect (print it for the operator).
	ClientURL string
	// Embedded is the in-process NATS server, nil with external URLs.
	Embedded *natsembed.Embedded

	// Link owns the server's own NATS connection: one closed for good is
	// replaced, and the dispatcher and the store move onto the new one.
	Link    *transport.Link
	closeMu sync.Once
	err     error
}

// StartNATS connects to NATS (connectNATS) and opens the JetStream
// store on it (openStore), waiting for the store as long as ctx lasts.
// Close (in this order) stops the dispatcher, the store, the connection and
// the embedded server; call it after closing the engine.
func StartNATS(ctx context.Context, cfg config.Config, demo bool, fleet transport.Router, log *slog.Logger) (*NATS, error) {
	b, err := connectNATS(cfg, demo, log)
	if err != nil {
		return nil, err
	}
	if err := b.openStore(ctx, cfg, fleet); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// connectNATS embeds a NATS server with JetStream as cfg.NATS says (or
// connects to cfg.NATS.URLs and embeds nothing) and builds the NATS
// dispatcher on it. It does not wait for JetStream: a cluster node started
// alone serves its agents' connections and its health while it waits for
// its peers (openStore waits).
//
// Under demo, agents join without credentials (the listen address must be
// loopback) and get the labels of biz 1.
func connectNATS(cfg config.Config, demo bool, log *slog.Logger) (_ *NATS, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &NATS{}
	defer func() {
		if err != nil {
			_ = b.Close()
		}
	}()
	nc := cfg.NATS
	var dial func() (*nats.Conn, error)
	if nc.External() {
		o := transport.ClientOptionsFromConfig(nc, "gseproc-server")
		// One connection per server (not thousands, as agents): it retries
		// often, so that the API serves again within seconds of NATS
		// coming back, not after a backoff grown to half a minute.
		o.MaxReconnectDelay = serverReconnectDelay
		dial = func() (*nats.Conn, error) { return transport.ConnectNow(o, log) }
		b.ClientURL = nc.ClientURLs()
		log.Info("nats: using external cluster", "urls", b.ClientURL)
	} else {
		if b.Embedded, err = natsembed.StartEmbedded(nc, natsembed.EmbeddedOptions{Demo: demo}, log); err != nil {
			return nil, err
		}
		dial = func() (*nats.Conn, error) { return b.Embedded.Connect("gseproc-server") }
		b.ClientURL = b.Embedded.ClientURL()
	}
	if b.Link, err = transport.NewLink(dial, transport.LinkOptions{Name: "gseproc-server", Logger: log}); err != nil {
		return nil, err
	}

	var static []model.HostInfo
	for _, s := range nc.Hosts {
		h, err := model.ParseAgentID(s)
		if err != nil {
			return nil, fmt.Errorf("nats.hosts: %w", err)
		}
		static = append(static, model.HostInfo{Host: h})
	}
	do := transport.DispatcherOptions{OfflineAfter: nc.OfflineAfter.D(), StaticHosts: static, Logger: log,
		BeatInterval: nc.HeartbeatInterval.D(), MaxBeatsPerSecond: nc.MaxHeartbeatsPerSecond,
		Events: transport.EventStreamOptions{Replicas: nc.Replicas}}
	if demo {
		do.Labels = demoAgentLabels
	}
	if b.NATS, err = transport.NewDispatcher(b.Link.Conn(), do); err != nil {
		return nil, err
	}
	b.Link.Bind("dispatcher", b.NATS.Rebind)
	b.Dispatcher, b.Inventory = b.NATS, b.NATS
	return b, nil
}

// serverReconnectDelay caps the reconnect backoff of a server's own
// connection to an external NATS cluster.
const serverReconnectDelay = 2 * time.Second

// openStore opens the JetStream store on b's connection. It waits for
// JetStream as long as ctx lasts: without a quorum (a cluster node whose
// peers are not up yet) every attempt times out and is tried again; an
// error retrying cannot cure (permissions, a bad configuration) returns at
// once. When fleet is not nil (the simulated fleet under --demo),
// Dispatcher and Inventory then route a host to the fleet when the fleet
// has it and to NATS otherwise.
func (b *NATS) openStore(ctx context.Context, cfg config.Config, fleet transport.Router) error {
	js, err := jetstream.New(b.Link.Conn())
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	st, err := jsstore.New(ctx, js, jsstore.OptionsFromConfig(cfg))
	if err != nil {
		return err
	}
	b.Store = st
	b.Link.Bind("store", func(ctx context.Context, nc *nats.Conn) error {
		js, err := jetstream.New(nc)
		if err != nil {
			return fmt.Errorf("jetstream: %w", err)
		}
		return st.Rebind(ctx, js)
	})
	if fleet != nil {
		m := transport.Merge(fleet, b.NATS)
		b.Dispatcher, b.Inventory = m, m
	}
	return nil
}

// Close stops everything StartNATS started; safe to call twice.
func (b *NATS) Close() error {
	b.closeMu.Do(func() {
		var errs []error
		if b.NATS != nil {
			errs = append(errs, b.NATS.Close())
		}
		if b.Store != nil {
			errs = append(errs, b.Store.Close())
		}
		if b.Link != nil {
			if err := b.Link.Conn().Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				errs = append(errs, err)
			}
			b.Link.Close()
		}
		if b.Embedded != nil {
			b.Embedded.Shutdown()
		}
		b.err = errors.Join(errs...)
	})
	return b.err
}

// OpenNATSEngine builds and starts an engine whose agents are reached over
// NATS and whose state is in JetStream: a server `kill -9`ed mid-task
// resumes its unfinished tasks at the next start, and several servers on
// one NATS cluster share tasks and data. Under demo (or with
// withFleet), the simulated fleet of cfg.Simulator runs in process beside
// the real agents, and its definitions seed the registry.
//
// It returns the engine, the NATS backend (ClientURL is where agents
// connect) and a closer that stops everything in order.
func OpenNATSEngine(ctx context.Context, cfg config.Config, demo, withFleet bool, version string, log *slog.Logger) (*engine.Engine, *NATS, func() error, error) {
	fleet, err := serverFleet(cfg, demo || withFleet)
	if err != nil {
		return nil, nil, nil, err
	}
	nb, err := connectNATS(cfg, demo, log)
	if err != nil {
		if fleet != nil {
			_ = fleet.Close()
		}
		return nil, nil, nil, err
	}
	e, closer, err := startNATSEngine(ctx, cfg, nb, fleet, version, log)
	if err != nil {
		return nil, nil, nil, err
	}
	return e, nb, closer, nil
}

// serverFleet is the simulated fleet of cfg.Simulator when with is set
// (--demo, fleet "mixed"), else nil.
func serverFleet(cfg config.Config, with bool) (*simulator.Fleet, error) {
	if !with {
		return nil, nil
	}
	return simulator.NewChecked(cfg.Simulator)
}

// startNATSEngine opens the store on nb (waiting for JetStream as long as
// ctx lasts), then builds and starts the engine on it, beside fleet when
// not nil. It owns nb and fleet from then on: the returned closer (or a
// failure) closes them.
func startNATSEngine(ctx context.Context, cfg config.Config, nb *NATS, fleet *simulator.Fleet, version string, log *slog.Logger) (*engine.Engine, func() error, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	closers := []func() error{nb.Close}
	if fleet != nil {
		closers = []func() error{fleet.Close, nb.Close}
	}
	fail := func(err error) (*engine.Engine, func() error, error) {
		for _, c := range closers {
			_ = c()
		}
		return nil, nil, err
	}
	var router transport.Router
	if fleet != nil {
		router = fleet
	}
	// The id before the store: a bad id file is said at once, not once
	// JetStream has a quorum.
	id, err := ServerID(cfg)
	if err != nil {
		return fail(err)
	}
	if err := nb.openStore(ctx, cfg, router); err != nil {
		return fail(err)
	}
	opts := []engine.Option{engine.WithLogger(log), engine.WithReadOnly(cfg.Engine.ReadOnly), engine.WithVersion(version), engine.WithOwner(id)}
	if fleet != nil {
		opts = append(opts, engine.WithSimulator(fleet))
	}
	e := engine.New(cfg.Engine, nb.Dispatcher, nb.Inventory, nb.Store, opts...)
	log.Info("server identity", "server_id", e.Owner(), "stable", id != "")
	closer, err := startEngine(ctx, e, fleet, closers...)
	if err != nil {
		return nil, nil, err
	}
	return e, closer, nil
}
