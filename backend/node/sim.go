package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"

	"gseproc/backend/config"
	"gseproc/backend/simulator"
	"gseproc/backend/transport"
)

// SimNode is a simulated fleet served as agents over NATS (`gseproc sim`),
// as NewSim built it: one connection serves every host, so thousands cost
// little; each host answers on its own subject, heartbeats while its
// simulated agent is up, and publishes its events.
type SimNode struct {
	stop transport.Stopper
	// Fleet is the simulated fleet.
	Fleet *simulator.Fleet
	link  *transport.Link
	cfg   config.Config
	log   *slog.Logger
}

// NewSim builds the fleet of cfg.Simulator and its NATS link of cfg.NATS.
// A permanent connection failure at start is returned. An error here is a
// configuration's.
func NewSim(cfg config.Config, log *slog.Logger) (*SimNode, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fleet, err := simulator.NewChecked(cfg.Simulator)
	if err != nil {
		return nil, err
	}
	n := &SimNode{stop: transport.NewStopper(), Fleet: fleet, cfg: cfg, log: log}
	co := transport.ClientOptionsFromConfig(cfg.NATS, fmt.Sprintf("gseproc-sim %d hosts", fleet.Len()))
	co.FailFast = true
	co.OnFatal = n.stop.Fail
	if n.link, err = transport.ClientLink(co, log); err != nil {
		n.stop.Cancel()
		_ = fleet.Close()
		return nil, err
	}
	return n, nil
}

// Run runs the fleet's simulation and serves it over NATS until ctx ends or
// the connection fails for good, then closes the fleet. Run is called once.
func (n *SimNode) Run(ctx context.Context) error {
	defer n.Fleet.Close()
	defer n.link.Close()
	defer n.stop.Cancel()
	stop := context.AfterFunc(ctx, n.stop.Cancel)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { n.Fleet.Run(n.stop.Ctx) })
	err := transport.ServeFleetOn(n.stop.Ctx, n.link, n.Fleet, transport.ServeOptions{HeartbeatInterval: n.cfg.NATS.HeartbeatInterval.D(), Logger: n.log})
	n.stop.Cancel()
	wg.Wait()
	if ferr := n.stop.Failure(); ferr != nil {
		return ferr
	}
	if err != nil {
		n.log.Error("sim: cannot serve over NATS", "err", err)
	}
	return err
}

// SimGCPercent is the GC percent of a `gseproc sim` process (PaceSimGC).
// A simulated fleet's live heap is mostly its hosts' lasting state (their
// subscriptions, labels, served-host records: ~145 MB at 100,000 hosts,
// dense with pointers), while an op allocates ~1.1 KB per request it
// answers in the NATS client (the message, its subjects and its data),
// ~95 MB per op over 84,000 hosts: at Go's default (100) the collector
// marked that live heap about once per op (its workers ~0.12 s of the
// sim's ~1 s of CPU per op, write barriers and assists besides), CPU the
// server and the op client share on a small box. bench fleet --hosts
// 100000, 3 runs each of 100, 200 and 400 interleaved twice (load 1.5-3):
// the sim's CPU per op 967, 757 and 845 ms on average; 400 grows the heap
// further for no more gain (fresh pages cost too).
const SimGCPercent = 200

// PaceSimGC sets the process's GC percent to SimGCPercent unless the
// environment sets GOGC (the operator's wins), until the returned restore
// is called (a sim run inside another process, a test's, leaves it as it
// was). A simulator is a test tool: its RSS, not the server's, pays (up
// to about 3 times its live heap between collections instead of 2).
func PaceSimGC() (restore func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	prev := debug.SetGCPercent(SimGCPercent)
	return func() { debug.SetGCPercent(prev) }
}
