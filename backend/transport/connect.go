package transport

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/backend/config"
	"gseproc/backend/transport/subjects"
	"gseproc/model"
)

// ClientOptions say how an agent (or a server to an external cluster)
// connects.
type ClientOptions struct {
	URLs         string // comma-separated; default nats://127.0.0.1:4222
	Name         string // connection name shown by the server, e.g. "gseproc-agent 0:10.0.0.1"
	User         string
	Password     string
	NKeySeedFile string
	CredsFile    string // user JWT + seed (decentralised auth)
	TLS          config.NATSTLSConfig
	// MaxReconnectDelay caps the jittered exponential reconnect backoff
	// (default 30s); the first retries come after about 250ms.
	MaxReconnectDelay time.Duration
	// FailFast: a permanent failure before the first connection closes
	// the connection and calls OnFatal (agents: exit and say why).
	FailFast bool
	OnFatal  func(error)
	// Home (e.g. the agent's identity) picks this client's own node among
	// the URLs; HomeCheck is how often a client away from it checks
	// whether it is back (default 30s).
	Home      string
	HomeCheck time.Duration
	// NoEcho: the connection is not delivered its own publishes (an
	// agent's or a fleet's: their inboxes cover the subjects they
	// publish on, and a fleet's heartbeats are 20,000 a second at
	// 100,000 hosts).
	NoEcho bool
}

// ClientOptionsFromConfig takes the client settings of the [nats] section.
func ClientOptionsFromConfig(cfg config.NATSConfig, name string) ClientOptions {
	return ClientOptions{URLs: cfg.ClientURLs(), Name: name, User: cfg.User, Password: cfg.Password,
		NKeySeedFile: cfg.NKeySeedFile, CredsFile: cfg.CredsFile, TLS: cfg.TLS}
}

// Connect dials NATS for a long-lived client. A server that is down at
// start or later is retried forever with a jittered exponential backoff,
// and Connect itself returns at once (the connection is then in
// RECONNECTING state and publishes are buffered by nats.go). Every failed
// attempt's reason is logged (warn; error when retrying cannot cure it;
// each reason once per 30 s). With FailFast, a permanent failure
// (credentials refused, a certificate not trusted or missing) before the
// first connection closes the connection and calls OnFatal. With Home set,
// the URLs are tried from a place of the list chosen by Home, so clients
// spread over the nodes, and a client away from that node moves back
// when it answers again. Bad options (unreadable nkey seed, TLS files)
// fail at once.
func Connect(o ClientOptions, log *slog.Logger) (*nats.Conn, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	urls := o.URLs
	if strings.TrimSpace(urls) == "" {
		urls = "nats://" + config.DefaultNATSListen
	}
	maxDelay := o.MaxReconnectDelay
	if maxDelay <= 0 {
		maxDelay = 30 * time.Second
	}
	cs := &connState{log: log, o: o}
	list := splitURLs(urls)
	opts := []nats.Option{
		nats.Name(o.Name),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.CustomReconnectDelay(backoff(250*time.Millisecond, maxDelay)),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() {
				return // closed by its owner, who may have returned already
			}
			log.Warn("nats: disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats: reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ConnectHandler(func(nc *nats.Conn) {
			cs.connected.Store(true)
			log.Info("nats: connected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ReconnectErrHandler(cs.failed),
		nats.ErrorHandler(func(nc *nats.Conn, _ *nats.Subscription, err error) {
			if nc.IsClosed() {
				return // its owner has heard of it, and may have returned
			}
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), subjects.Inbox+`"`) {
				// A server from before the inboxes: the agent falls back on
				// the subjects it grants (agentSubs, fleetServer.decide).
				log.Info("nats: inbox not granted (a server from before it)", "err", err)
				return
			}
			if errors.Is(err, nats.ErrPermissionViolation) {
				log.Error("nats: refused by this credential's permissions", "err", err)
				return
			}
			log.Warn("nats: async error", "err", err)
		}),
	}
	if o.Home != "" && len(list) > 1 {
		list = rotate(list, o.Home)
		if u, err := url.Parse(list[0]); err == nil {
			cs.homeHost = u.Host
		}
		opts = append(opts, nats.DontRandomize(), nats.ReconnectToServer(cs.pick))
	}
	if o.NoEcho {
		opts = append(opts, nats.NoEcho())
	}
	if o.User != "" {
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	}
	if o.NKeySeedFile != "" {
		opt, err := nats.NkeyOptionFromSeed(o.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nats nkey seed %s: %w", o.NKeySeedFile, err)
		}
		opts = append(opts, opt)
	}
	if o.CredsFile != "" {
		if _, err := os.Stat(o.CredsFile); err != nil {
			return nil, fmt.Errorf("nats creds file: %w", err)
		}
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	if o.TLS.CA != "" {
		opts = append(opts, nats.RootCAs(o.TLS.CA))
	}
	if o.TLS.Cert != "" {
		opts = append(opts, nats.ClientCert(o.TLS.Cert, o.TLS.Key))
	}
	nc, err := nats.Connect(strings.Join(list, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", urls, err)
	}
	if nc.IsConnected() {
		// ConnectHandler says so (and logs it) too, but later, from
		// nats.go's callback goroutine; failed must know now.
		cs.connected.Store(true)
	}
	if o.Home != "" && len(list) > 1 {
		stop := make(chan struct{})
		nc.SetClosedHandler(func(*nats.Conn) { close(stop) })
		go cs.goHome(nc, list[0], stop)
	}
	return nc, nil
}

// connState follows one connection for Connect's callbacks.
type connState struct {
	log       *slog.Logger
	o         ClientOptions
	connected atomic.Bool // connected at least once
	home      atomic.Bool // the next reconnect goes to the home node
	homeHost  string      // host:port of the home node

	mu     sync.Mutex
	logged map[string]time.Time // reason -> when last logged
	fatal  bool
}

// failed is told of every failed connection attempt.
func (cs *connState) failed(nc *nats.Conn, err error) {
	if err == nil || errors.Is(err, nats.ErrServerNotInPool) {
		return
	}
	perm := permanent(err)
	reason := explain(err)
	cs.mu.Lock()
	if perm && cs.o.FailFast && !cs.connected.Load() {
		first := !cs.fatal
		cs.fatal = true
		cs.mu.Unlock()
		if first {
			cs.log.Error("nats: cannot connect, and retrying will not help; giving up", "url", nc.ConnectedUrlRedacted(), "reason", reason, "err", err)
			fatal := fmt.Errorf("connect to nats %s: %s: %w", cs.o.URLs, reason, err)
			go func() { // not from nats.go's callback goroutine, which Close stops
				nc.Close()
				if cs.o.OnFatal != nil {
					cs.o.OnFatal(fatal)
				}
			}()
		}
		return
	}
	now := time.Now()
	if cs.logged == nil || len(cs.logged) > 64 {
		cs.logged = map[string]time.Time{}
	}
	last, seen := cs.logged[reason]
	quiet := seen && now.Sub(last) < 30*time.Second
	if !quiet {
		cs.logged[reason] = now
	}
	cs.mu.Unlock()
	if quiet {
		return
	}
	level := slog.LevelWarn
	if perm {
		level = slog.LevelError
	}
	cs.log.Log(context.Background(), level, "nats: cannot connect; retrying", "reason", reason, "err", err)
}

// pick sends a reconnect to the home node when goHome asked for it, and
// leaves the choice to nats.go otherwise.
func (cs *connState) pick(servers []nats.Server, _ nats.ServerInfo) (*nats.Server, time.Duration) {
	if !cs.home.Swap(false) {
		return nil, 0
	}
	for i := range servers {
		if servers[i].URL != nil && servers[i].URL.Host == cs.homeHost {
			return &servers[i], 0
		}
	}
	return nil, 0
}

// goHome checks every HomeCheck, while the connection is on another node
// than home, whether home accepts TCP connections again, and if so moves
// the connection back to it. It returns when the connection closes.
func (cs *connState) goHome(nc *nats.Conn, home string, stop <-chan struct{}) {
	every := cs.o.HomeCheck
	if every <= 0 {
		every = 30 * time.Second
	}
	hu, err := url.Parse(home)
	if err != nil || hu.Host != cs.homeHost {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		cur, err := url.Parse(nc.ConnectedUrl())
		if !nc.IsConnected() || err != nil || cur.Host == hu.Host {
			continue
		}
		c, err := net.DialTimeout("tcp", hu.Host, 2*time.Second)
		if err != nil {
			continue
		}
		c.Close()
		cs.log.Info("nats: home node answers again; moving back", "home", hu.Redacted(), "from", cur.Redacted())
		cs.home.Store(true)
		_ = nc.ForceReconnect()
	}
}

func splitURLs(s string) []string {
	var out []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// rotate orders list (sorted, so every client agrees whatever order it was
// given) from the place key hashes to: each client has its own first
// (home) node, and a fleet spreads evenly over the nodes.
func rotate(list []string, key string) []string {
	s := slices.Sorted(slices.Values(list))
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	i := int(h.Sum32() % uint32(len(s)))
	return append(s[i:], s[:i]...)
}

// explain says in words what a connection failure means.
func explain(err error) string {
	var uae x509.UnknownAuthorityError
	var hne x509.HostnameError
	var cie x509.CertificateInvalidError
	msg := strings.ToLower(err.Error())
	switch {
	case errors.Is(err, nats.ErrAuthorization) || strings.Contains(msg, "authorization violation"):
		return "credentials refused (user/password, nkey seed or creds file wrong, or not configured on the server)"
	case errors.Is(err, nats.ErrAuthExpired):
		return "credentials expired"
	case errors.As(err, &uae):
		return "the server's certificate is not signed by the trusted CA (--tls-ca / [nats.tls] ca)"
	case errors.As(err, &hne):
		return "the server's certificate does not name the address connected to"
	case errors.As(err, &cie):
		return "the server's certificate is invalid (expired or not for server use)"
	case strings.Contains(msg, "certificate required") || strings.Contains(msg, "bad certificate") ||
		strings.Contains(msg, "connection closed by remote after tls handshake"):
		return "the server requires a client certificate it trusts (--tls-cert/--tls-key)"
	case strings.Contains(msg, "secure connection required"):
		return "the server requires TLS (use a tls:// URL or --tls-ca)"
	case strings.Contains(msg, "first record does not look like a tls handshake") || strings.Contains(msg, "secure connection not available"):
		return "the server does not speak TLS"
	case strings.Contains(msg, "connection refused"):
		return "no NATS server listening there (down or wrong address)"
	case errors.Is(err, nats.ErrNoServers):
		return "no NATS server answers at the URLs (down, not reachable, or a wrong address)"
	case strings.Contains(msg, "timeout") || strings.Contains(msg, "no route to host") || strings.Contains(msg, "i/o timeout"):
		return "the server does not answer (network or firewall)"
	}
	return err.Error()
}

// ConnectNow dials like Connect but fails when no server answers at once
// (for one-shot tools and the server's connection to an external cluster).
func ConnectNow(o ClientOptions, log *slog.Logger) (*nats.Conn, error) {
	nc, err := Connect(o, log)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(5 * time.Second)
	for !nc.IsConnected() {
		if err := nc.LastError(); permanent(err) {
			nc.Close()
			return nil, fmt.Errorf("connect to nats %s: %w", o.URLs, err)
		}
		if time.Now().After(deadline) {
			err := nc.LastError()
			nc.Close()
			return nil, fmt.Errorf("connect to nats %s: no server answered in 5s (last error: %v)", o.URLs, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nc, nil
}

// backoff is the reconnect delay (model.Backoff): from base, doubling,
// capped at max, +-25% jitter so that a fleet does not reconnect in step.
func backoff(base, max time.Duration) nats.ReconnectDelayHandler {
	b := model.Backoff{Base: base, Max: max, Jitter: 0.25}
	return func(attempts int) time.Duration { return b.Delay(attempts-1, rand.Float64()) }
}

// permanent reports a connect failure that retrying will not cure:
// credentials refused, a certificate not trusted.
func permanent(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) {
		return true
	}
	var uae x509.UnknownAuthorityError
	var hne x509.HostnameError
	var cie x509.CertificateInvalidError
	if errors.As(err, &uae) || errors.As(err, &hne) || errors.As(err, &cie) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, m := range []string{"authorization", "tls error", "certificate required", "bad certificate", "secure connection required", "closed by remote after tls handshake", "first record does not look like a tls handshake"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}
