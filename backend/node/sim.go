package node

import (
	"context"
	"fmt"
	"log/slog"
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
