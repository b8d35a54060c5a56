package agentcmd

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"

	"gseproc/backend/agent"
	"gseproc/backend/config"
	"gseproc/backend/transport"
)

// Node is the host agent served over NATS (`gseproc agent`), as NewNode
// built it: connected, not yet running.
type Node struct {
	stop transport.Stopper
	a    *agent.Agent
	link *transport.Link
	cfg  config.Config
	log  *slog.Logger
}

// NewNode builds the agent of cfg.Agent (its hosting registry read) and
// its NATS link of cfg.NATS. The agent spreads over the listed URLs by its
// identity, and moves back to its own node when it returns. A permanent
// connection failure at start (credentials or certificates wrong) is
// returned; transient ones are retried with the reason in the log. An
// error here is a configuration's.
func NewNode(cfg config.Config, log *slog.Logger) (*Node, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a, err := agent.New(cfg.Agent, log)
	if err != nil {
		return nil, err
	}
	n := &Node{stop: transport.NewStopper(), a: a, cfg: cfg, log: log}
	id := a.Identity().Host.AgentID()
	co := transport.ClientOptionsFromConfig(cfg.NATS, "gseproc-agent "+id)
	co.FailFast, co.Home = true, id
	co.OnFatal = n.stop.Fail
	if n.link, err = transport.ClientLink(co, log); err != nil {
		n.stop.Cancel()
		_ = a.Close()
		return nil, err
	}
	return n, nil
}

// ID is the agent's id (cloud:ip).
func (n *Node) ID() string { return n.a.Identity().Host.AgentID() }

// Run supervises the hosted processes and serves them over NATS until ctx
// ends, the agent stops on its own or the connection fails for good; the
// supervision goes on while the server is unreachable. The hosted
// processes keep running after it. Run is called once.
func (n *Node) Run(ctx context.Context) error {
	defer n.link.Close()
	defer n.stop.Cancel()
	stop := context.AfterFunc(ctx, n.stop.Cancel)
	defer stop()
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() {
		runErr = n.a.Run(n.stop.Ctx)
		n.stop.Cancel() // the agent stopped on its own: stop serving too
	})
	serveErr := transport.ServeAgentOn(n.stop.Ctx, n.link, n.a, transport.ServeOptions{
		HeartbeatInterval: n.cfg.NATS.HeartbeatInterval.D(), Logger: n.log,
		EventDir: filepath.Join(n.cfg.Agent.DataDir, "events"),
	})
	n.stop.Cancel()
	wg.Wait()
	if err := n.stop.Failure(); err != nil {
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
