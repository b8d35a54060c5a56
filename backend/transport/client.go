package transport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"

	"github.com/nats-io/nats.go"
)

// ClientLink connects an agent or a simulated fleet as co says, and keeps
// the connection (Link): when the NATS server closes it for good, a new
// one is dialed. co.FailFast applies to the first connection only: one
// that worked once is dialed again whatever the reason.
func ClientLink(co ClientOptions, log *slog.Logger) (*Link, error) {
	first := true
	return NewLink(func() (*nats.Conn, error) {
		o := co
		o.FailFast = o.FailFast && first
		o.NoEcho = true // its inboxes cover what it publishes
		first = false
		return Connect(o, log)
	}, LinkOptions{Name: co.Name, Logger: log})
}

// Stopper ends a client's run (an agent's, a simulated fleet's) when
// its Ctx is cancelled or when its NATS link fails for good (Fail, given
// as ClientOptions.OnFatal), and keeps why.
type Stopper struct {
	// Ctx is the run's context; Cancel ends it.
	Ctx    context.Context
	Cancel context.CancelFunc
	fatal  chan error
}

// NewStopper makes a Stopper whose run has not ended.
func NewStopper() Stopper {
	ctx, cancel := context.WithCancel(context.Background())
	return Stopper{Ctx: ctx, Cancel: cancel, fatal: make(chan error, 1)}
}

// Fail ends the run with err (a connection refused for good).
func (s Stopper) Fail(err error) {
	select {
	case s.fatal <- err:
	default:
	}
	s.Cancel()
}

// Failure is the error Fail was given, if any.
func (s Stopper) Failure() error {
	select {
	case err := <-s.fatal:
		return err
	default:
		return nil
	}
}

// randomSecret is 32 random hex digits (ids and prefixes no one can guess).
func randomSecret() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
