package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/model"
)

// A Link owns one long-lived NATS connection for its users and keeps one
// open for them. nats.go reconnects a connection that drops by itself (a
// server restart, a slow consumer cut off), but it closes one for good
// when the server answers an error it does not recover from ("maximum
// control line exceeded", a parser or payload violation) or refuses the
// credentials twice in a row: every later call on that *nats.Conn answers
// "nats: connection closed". The Link then dials a new connection, with
// a jittered exponential backoff while dialing fails, and hands it to
// every user bound to it (Bind), in the order they bound, so that each
// subscribes again and opens its JetStream handles again on it. Users
// that run their own loop wait for the new connection with Next.
//
// Conn is the connection in use; Status says what the link is doing, for
// logs and health. Only Close closes the link's connection.
type Link struct {
	name    string
	dial    func() (*nats.Conn, error) // nil: a fixed connection, never replaced
	log     *slog.Logger
	backoff model.Backoff

	mu      sync.Mutex
	nc      *nats.Conn
	changed chan struct{} // closed when nc is replaced or the link closes
	users   []linkUser
	st      LinkStatus
	closing bool

	ctx  context.Context // ends at Close: stops dialing and binding
	stop context.CancelFunc
	done chan struct{}
}

type linkUser struct {
	name   string
	rebind func(context.Context, *nats.Conn) error
}

// LinkStatus is what a Link is doing.
type LinkStatus struct {
	// State: "connected", "reconnecting" (nats.go is reconnecting the
	// connection), "redialing" (it was closed for good; a new one is being
	// dialed or its users bound to it), "closed" (by its owner).
	State string `json:"state"`
	// Redials counts the connections dialed after one was closed for good.
	Redials int `json:"redials"`
	// LastClosed says why the last connection was closed for good, and when.
	LastClosed   string    `json:"last_closed,omitempty"`
	LastClosedAt time.Time `json:"last_closed_at,omitzero"`
}

// Link states (LinkStatus.State).
const (
	LinkConnected    = "connected"
	LinkReconnecting = "reconnecting"
	LinkRedialing    = "redialing"
	LinkClosed       = "closed"
)

// LinkOptions configure a Link.
type LinkOptions struct {
	// Name names the link in logs, e.g. "gseproc-server".
	Name string
	// Backoff spaces the dial attempts after a close (default 250ms
	// doubling to 30s, +-25%).
	Backoff model.Backoff
	Logger  *slog.Logger
}

// ErrClosed marks a connection that was closed for good (see Link).
var ErrClosed = errors.New("nats connection closed")

// NewLink dials the first connection with dial (it fails when dial does)
// and keeps the link's connection open until Close. dial is called again,
// from the link's own goroutine, whenever the connection is closed
// without Close.
func NewLink(dial func() (*nats.Conn, error), o LinkOptions) (*Link, error) {
	nc, err := dial()
	if err != nil {
		return nil, err
	}
	l := newLink(nc, o)
	l.dial = dial
	go l.supervise()
	return l, nil
}

// FixedLink is a link over nc that never dials another connection (for
// callers that own their connection, and tests).
func FixedLink(nc *nats.Conn) *Link {
	l := newLink(nc, LinkOptions{})
	close(l.done)
	return l
}

func newLink(nc *nats.Conn, o LinkOptions) *Link {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Backoff.Base <= 0 {
		o.Backoff = model.Backoff{Base: 250 * time.Millisecond, Max: 30 * time.Second, Jitter: 0.25}
	}
	l := &Link{name: o.Name, log: o.Logger.With("nats_link", o.Name), backoff: o.Backoff, nc: nc,
		changed: make(chan struct{}), done: make(chan struct{})}
	l.ctx, l.stop = context.WithCancel(context.Background())
	return l
}

// Conn is the connection in use (it may be reconnecting, or closed while
// the link dials a new one).
func (l *Link) Conn() *nats.Conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nc
}

// Bind registers a user of the link's connections: rebind is called with
// every new connection the link dials (not with the current one), from
// the link's goroutine, before Next's waiters are told; its ctx ends at
// Close. A rebind that fails is called again, after a backoff, until it
// succeeds or that connection closes too.
func (l *Link) Bind(name string, rebind func(context.Context, *nats.Conn) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.users = append(l.users, linkUser{name: name, rebind: rebind})
}

// Next waits until the link's connection is another than old and returns
// it. It answers ErrClosed when the link is closed, or is fixed (it never
// has another connection); ctx's error when ctx ends first.
func (l *Link) Next(ctx context.Context, old *nats.Conn) (*nats.Conn, error) {
	for {
		l.mu.Lock()
		nc, ch, closing := l.nc, l.changed, l.closing
		l.mu.Unlock()
		switch {
		case closing:
			return nil, fmt.Errorf("%s: link closed: %w", l.name, ErrClosed)
		case l.dial == nil:
			return nil, closedError(old)
		case nc != old:
			return nc, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Status says what the link is doing now.
func (l *Link) Status() LinkStatus {
	l.mu.Lock()
	st, nc, closing := l.st, l.nc, l.closing
	l.mu.Unlock()
	switch {
	case closing:
		st.State = LinkClosed
	case st.State == LinkRedialing:
	case nc.IsConnected():
		st.State = LinkConnected
	case nc.IsClosed():
		st.State = LinkRedialing // the supervisor has not noticed yet
		if l.dial == nil {
			st.State = LinkClosed
		}
	default:
		st.State = LinkReconnecting
	}
	return st
}

// Close stops redialing and closes the connection in use; safe to call
// twice. (Drain the connection first for a graceful end.)
func (l *Link) Close() {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		return
	}
	l.closing = true
	close(l.changed)
	nc := l.nc
	l.mu.Unlock()
	l.stop()
	<-l.done
	nc.Close()
}

// supervise waits for the connection to close, then dials a new one and
// binds the users to it, until Close.
func (l *Link) supervise() {
	defer close(l.done)
	for {
		nc := l.Conn()
		if waitClosed(l.ctx, nc) != nil || l.isClosing() {
			return
		}
		reason := "closed"
		if err := nc.LastError(); err != nil {
			reason = err.Error()
		}
		l.mu.Lock()
		l.st.State, l.st.LastClosed, l.st.LastClosedAt = LinkRedialing, reason, time.Now()
		l.mu.Unlock()
		l.log.Error("nats: connection closed for good by the server; dialing a new one", "reason", reason)
		fresh, ok := l.redial()
		if !ok {
			return
		}
		l.mu.Lock()
		if l.closing {
			l.mu.Unlock()
			fresh.Close()
			return
		}
		l.nc = fresh
		l.st.Redials++
		users := append([]linkUser(nil), l.users...)
		l.mu.Unlock()
		if !l.rebind(fresh, users) {
			if l.isClosing() {
				return
			}
			continue // the new connection closed too: dial again
		}
		l.mu.Lock()
		l.st.State = ""
		close(l.changed)
		l.changed = make(chan struct{})
		redials := l.st.Redials
		l.mu.Unlock()
		l.log.Info("nats: new connection in use", "redials", redials, "users", len(users), "status", fresh.Status().String())
	}
}

// redial dials until it succeeds or the link closes.
func (l *Link) redial() (*nats.Conn, bool) {
	for k := 0; ; k++ {
		nc, err := l.dial()
		if err == nil {
			return nc, true
		}
		l.log.Warn("nats: dialing a new connection failed; retrying", "attempt", k+1, "err", err)
		select {
		case <-l.ctx.Done():
			return nil, false
		case <-time.After(l.backoff.Delay(k, rand.Float64())):
		}
	}
}

// rebind binds every user to nc, retrying each with backoff; false when
// nc closed (or the link closed) before all were bound.
func (l *Link) rebind(nc *nats.Conn, users []linkUser) bool {
	for _, u := range users {
		for k := 0; ; k++ {
			err := u.rebind(l.ctx, nc)
			if err == nil {
				break
			}
			l.log.Warn("nats: binding a user to the new connection failed; retrying", "user", u.name, "attempt", k+1, "err", err)
			if nc.IsClosed() {
				return false
			}
			select {
			case <-l.ctx.Done():
				return false
			case <-time.After(l.backoff.Delay(k, rand.Float64())):
			}
		}
	}
	return true
}

func (l *Link) isClosing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closing
}

// waitClosed waits until nc is closed or ctx ends.
func waitClosed(ctx context.Context, nc *nats.Conn) error {
	ch := nc.StatusChanged(nats.CLOSED)
	defer nc.RemoveStatusListener(ch)
	if nc.IsClosed() {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
