package transport

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/backend/config"
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
}

// ClientOptionsFromConfig takes the client settings of the [nats] section.
func ClientOptionsFromConfig(cfg config.NATSConfig, name string) ClientOptions {
	return ClientOptions{URLs: cfg.ClientURLs(), Name: name, User: cfg.User, Password: cfg.Password,
		NKeySeedFile: cfg.NKeySeedFile, CredsFile: cfg.CredsFile, TLS: cfg.TLS}
}

// Connect dials NATS for a long-lived client. It never gives up: a server
// that is down at start or later is retried forever with a jittered
// exponential backoff, and Connect itself returns at once (the connection
// is then in RECONNECTING state and publishes are buffered by nats.go).
// Bad options (unreadable nkey seed, TLS files) fail at once.
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
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				log.Error("nats: refused by this credential's permissions", "err", err)
				return
			}
			log.Warn("nats: async error", "err", err)
		}),
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
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", urls, err)
	}
	return nc, nil
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

// backoff is an exponential reconnect delay, full-jittered in [d/2, d],
// from base to max.
func backoff(base, max time.Duration) nats.ReconnectDelayHandler {
	return func(attempts int) time.Duration {
		d := base
		for i := 1; i < attempts && d < max; i++ {
			d *= 2
		}
		d = min(d, max)
		return d/2 + rand.N(d/2+1)
	}
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
	return strings.Contains(msg, "authorization") || strings.Contains(msg, "tls error")
}
