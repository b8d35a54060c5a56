package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"gseproc/backend/agent"
	"gseproc/backend/config"
	"gseproc/backend/simulator"
	"gseproc/backend/transport"
)

// AgentNode is the host agent served over NATS (`gseproc agent`), as
// NewAgent built it: connected, not yet running.
type AgentNode struct {
	stopper
	a    *agent.Agent
	link *transport.Link
	cfg  config.Config
	log  *slog.Logger
}

// stopper ends a node's run when Run's ctx ends or when its NATS link
// fails for good (fail), and keeps why.
type stopper struct {
	ctx    context.Context
	cancel context.CancelFunc
	fatal  chan error
}

func newStopper() stopper {
	ctx, cancel := context.WithCancel(context.Background())
	return stopper{ctx: ctx, cancel: cancel, fatal: make(chan error, 1)}
}

// fail ends the run with err (a connection refused for good).
func (s stopper) fail(err error) {
	select {
	case s.fatal <- err:
	default:
	}
	s.cancel()
}

// failure is the error fail was given, if any.
func (s stopper) failure() error {
	select {
	case err := <-s.fatal:
		return err
	default:
		return nil
	}
}

// NewAgent builds the agent of cfg.Agent (its hosting registry read) and
// its NATS link of cfg.NATS. The agent spreads over the listed URLs by its
// identity, and moves back to its own node when it returns. A permanent
// connection failure at start (credentials or certificates wrong) is
// returned; transient ones are retried with the reason in the log. An
// error here is a configuration's.
func NewAgent(cfg config.Config, log *slog.Logger) (*AgentNode, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a, err := agent.New(cfg.Agent, log)
	if err != nil {
		return nil, err
	}
	n := &AgentNode{stopper: newStopper(), a: a, cfg: cfg, log: log}
	id := a.Identity().Host.AgentID()
	co := transport.ClientOptionsFromConfig(cfg.NATS, "gseproc-agent "+id)
	co.FailFast, co.Home = true, id
	co.OnFatal = n.fail
	if n.link, err = ClientLink(co, log); err != nil {
		n.cancel()
		_ = a.Close()
		return nil, err
	}
	return n, nil
}

// ID is the agent's id (cloud:ip).
func (n *AgentNode) ID() string { return n.a.Identity().Host.AgentID() }

// Run supervises the hosted processes and serves them over NATS until ctx
// ends, the agent stops on its own or the connection fails for good; the
// supervision goes on while the server is unreachable. The hosted
// processes keep running after it. Run is called once.
func (n *AgentNode) Run(ctx context.Context) error {
	defer n.link.Close()
	defer n.cancel()
	stop := context.AfterFunc(ctx, n.cancel)
	defer stop()
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() {
		runErr = n.a.Run(n.ctx)
		n.cancel() // the agent stopped on its own: stop serving too
	})
	serveErr := transport.ServeAgentOn(n.ctx, n.link, n.a, transport.ServeOptions{
		HeartbeatInterval: n.cfg.NATS.HeartbeatInterval.D(), Logger: n.log,
		EventDir: filepath.Join(n.cfg.Agent.DataDir, "events"),
	})
	n.cancel()
	wg.Wait()
	if err := n.failure(); err != nil {
		return err
	}
	if serveErr != nil {
		n.log.Error("agent: cannot serve over NATS", "err", serveErr)
		return serveErr
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	n.log.Info("agent stopped; hosted processes keep running")
	return nil
}

// SimNode is a simulated fleet served as agents over NATS (`gseproc sim`),
// as NewSim built it: one connection serves every host, so thousands cost
// little; each host answers on its own subject, heartbeats while its
// simulated agent is up, and publishes its events.
type SimNode struct {
	stopper
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
	n := &SimNode{stopper: newStopper(), Fleet: fleet, cfg: cfg, log: log}
	co := transport.ClientOptionsFromConfig(cfg.NATS, fmt.Sprintf("gseproc-sim %d hosts", fleet.Len()))
	co.FailFast = true
	co.OnFatal = n.fail
	if n.link, err = ClientLink(co, log); err != nil {
		n.cancel()
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
	defer n.cancel()
	stop := context.AfterFunc(ctx, n.cancel)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { n.Fleet.Run(n.ctx) })
	err := transport.ServeFleetOn(n.ctx, n.link, n.Fleet, transport.ServeOptions{HeartbeatInterval: n.cfg.NATS.HeartbeatInterval.D(), Logger: n.log})
	n.cancel()
	wg.Wait()
	if ferr := n.failure(); ferr != nil {
		return ferr
	}
	if err != nil {
		n.log.Error("sim: cannot serve over NATS", "err", err)
	}
	return err
}
