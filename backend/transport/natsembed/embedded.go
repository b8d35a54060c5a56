package natsembed

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"gseproc/backend/config"
)

// EmbeddedOptions adjust StartEmbedded.
type EmbeddedOptions struct {
	// Demo lets agents connect without credentials (they may serve any
	// host). The listen address must then be a loopback address.
	Demo bool
}

// Embedded is a NATS server with JetStream running inside this process.
type Embedded struct {
	ns      *server.Server
	log     *slog.Logger
	user    string // the in-process server connection's own credentials
	pass    string
	tmpDir  string // removed at Shutdown when the store dir was temporary
	tlsOpts config.NATSTLSConfig
	routes  *routeWatch // nil when not clustered
}

// internalUser names the server's own (in-process) connection.
const internalUser = "gseproc-server"

// demoUser is the user credential-less connections are mapped to under demo.
const demoUser = "gseproc-demo-agent"

// StartEmbedded starts a NATS server with JetStream as cfg describes: it
// listens on cfg.Listen (default 127.0.0.1:4222, port -1 picks one), keeps
// JetStream files in cfg.StoreDir (or a temporary directory removed at
// Shutdown), accepts the agents of cfg.Users (each bound to its host when
// Host is set), serves TLS when cfg.TLS has a cert, and joins cfg.Cluster.
// It returns once the server accepts connections.
func StartEmbedded(cfg config.NATSConfig, opts EmbeddedOptions, log *slog.Logger) (*Embedded, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	listen := cfg.Listen
	if listen == "" {
		listen = config.DefaultNATSListen
	}
	host, port, err := config.SplitListen(listen)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: nats.listen: %w", err)
	}
	if opts.Demo && !isLoopback(host) {
		return nil, fmt.Errorf("embedded nats: nats.listen %q: under --demo agents join without credentials, so the address must be loopback (127.0.0.1, ::1 or localhost)", listen)
	}
	e := &Embedded{log: log, user: internalUser, pass: randomSecret(), tlsOpts: cfg.TLS}

	so := &server.Options{
		ServerName:     cfg.ServerName,
		Host:           host,
		Port:           port,
		NoSigs:         true,
		JetStream:      true,
		StoreDir:       cfg.StoreDir,
		MaxPayload:     8 << 20,
		NoSublistCache: true,
	}
	if so.ServerName == "" {
		so.ServerName = "gseproc-" + randomSecret()[:8]
	}
	if so.StoreDir == "" {
		d, err := os.MkdirTemp("", "gseproc-nats-*")
		if err != nil {
			return nil, fmt.Errorf("embedded nats: temporary store dir: %w", err)
		}
		e.tmpDir, so.StoreDir = d, d
	}
	so.Users = append(so.Users, &server.User{Username: e.user, Password: e.pass})
	for i, u := range cfg.Users {
		perms, err := credentialPermissions(u, opts.Demo)
		if err != nil {
			return nil, e.cleanup(fmt.Errorf("embedded nats: nats.users[%d]: %w", i, err))
		}
		if opts.Demo && perms != nil && (u.Role == "" || u.Role == config.NATSRoleAgent) && u.Host == "" {
			log.Warn("nats: agent credential not bound to a host: it may serve (and answer for) any host; accepted only under --demo", "entry", fmt.Sprintf("nats.users[%d]", i), "credential", u.Name())
		}
		if u.NKey != "" {
			so.Nkeys = append(so.Nkeys, &server.NkeyUser{Nkey: u.NKey, Permissions: perms})
		} else {
			so.Users = append(so.Users, &server.User{Username: u.User, Password: u.Password, Permissions: perms})
		}
	}
	if opts.Demo {
		so.Users = append(so.Users, &server.User{Username: demoUser, Password: randomSecret(), Permissions: hostPermissions("*.*")})
		so.NoAuthUser = demoUser
	} else if len(cfg.Users) == 0 {
		log.Warn("nats: no agent credentials configured ([[nats.users]]); agents cannot connect to the embedded server (use --demo for loopback agents without credentials)")
	}
	if cfg.TLS.Cert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cfg.TLS.Cert, KeyFile: cfg.TLS.Key, CaFile: cfg.TLS.CA, Verify: cfg.TLS.Verify})
		if err != nil {
			return nil, e.cleanup(fmt.Errorf("embedded nats: nats.tls: %w", err))
		}
		so.TLSConfig, so.TLS, so.TLSVerify, so.TLSTimeout = tc, true, cfg.TLS.Verify, 2
	}
	if cfg.Cluster.Listen != "" {
		ch, cp, err := config.SplitListen(cfg.Cluster.Listen)
		if err != nil {
			return nil, e.cleanup(fmt.Errorf("embedded nats: nats.cluster.listen: %w", err))
		}
		cc := cfg.Cluster
		if cc.User == "" {
			if !opts.Demo {
				return nil, e.cleanup(errors.New("embedded nats: nats.cluster.listen is set without nats.cluster.user and nats.cluster.password: anyone reaching the route port could join the cluster, read every store and command every agent; set them (the same on every node), or use --demo on loopback"))
			}
			if !isLoopback(ch) {
				return nil, e.cleanup(fmt.Errorf("embedded nats: nats.cluster.listen %q: under --demo routes without nats.cluster.user must listen on loopback", cc.Listen))
			}
			log.Warn("nats: cluster routes without authentication (--demo only)", "cluster_listen", cc.Listen)
		}
		so.Cluster = server.ClusterOpts{Name: cc.Name, Host: ch, Port: cp, Username: cc.User, Password: cc.Password}
		if cc.TLS.Cert != "" {
			tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cc.TLS.Cert, KeyFile: cc.TLS.Key, CaFile: cc.TLS.CA, Verify: true})
			if err != nil {
				return nil, e.cleanup(fmt.Errorf("embedded nats: nats.cluster.tls: %w", err))
			}
			// A node is the server of the routes it accepts and the client
			// of those it opens: it verifies its peer both ways.
			tc.ClientAuth = tls.RequireAndVerifyClientCert
			tc.RootCAs = tc.ClientCAs
			so.Cluster.TLSConfig, so.Cluster.TLSTimeout = tc, 2
		} else if !isLoopback(ch) {
			log.Warn("nats: cluster routes are not encrypted (set nats.cluster.tls): route traffic carries every command and store", "cluster_listen", cc.Listen)
		}
		for i, r := range cc.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, e.cleanup(fmt.Errorf("embedded nats: nats.cluster.routes[%d]: %w", i, err))
			}
			if cc.User != "" {
				u.User = url.UserPassword(cc.User, cc.Password)
			}
			so.Routes = append(so.Routes, u)
		}
	}

	ns, err := server.NewServer(so)
	if err != nil {
		return nil, e.cleanup(fmt.Errorf("embedded nats: %w", err))
	}
	fatal := &fatalLog{}
	ns.SetLoggerV2(slogAdapter{log.With("component", "nats-server"), fatal}, false, false, false)
	e.ns = ns
	ns.Start()
	for deadline := time.Now().Add(10 * time.Second); !ns.ReadyForConnections(50 * time.Millisecond); {
		msg := fatal.get()
		if msg == "" && time.Now().Before(deadline) {
			continue
		}
		ns.Shutdown()
		ns.WaitForShutdown()
		if msg == "" {
			msg = "not ready to accept connections after 10s"
		}
		return nil, e.cleanup(fmt.Errorf("embedded nats on %s: %s", listen, msg))
	}
	log.Info("nats: embedded server ready", "url", e.ClientURL(), "store_dir", so.StoreDir, "server_name", so.ServerName, "demo", opts.Demo, "tls", cfg.TLS.Cert != "")
	if cfg.Cluster.Listen != "" {
		e.routes = watchRoutes(ns, log, time.Second)
	}
	return e, nil
}

// Server is the underlying nats-server.
func (e *Embedded) Server() *server.Server { return e.ns }

// ClientURL is the address agents connect to, e.g. nats://127.0.0.1:4222.
func (e *Embedded) ClientURL() string {
	u := e.ns.ClientURL()
	if rest, ok := strings.CutPrefix(u, "nats://"); ok && e.tlsOpts.Cert != "" {
		u = "tls://" + rest
	}
	return u
}

// ClusterURL is the route address other nodes use (nats-route://...), or
// "" when the server is not clustered.
func (e *Embedded) ClusterURL() string {
	a := e.ns.ClusterAddr()
	if a == nil {
		return ""
	}
	return "nats-route://" + net.JoinHostPort(a.IP.String(), fmt.Sprint(a.Port))
}

// Connect opens the server's own connection to the embedded server with
// its internal full-permission credentials, over loopback TCP to the
// server's own listener. (Not in process: nats-server's in-process pipe is
// unbuffered, and under load a request could then block past its
// deadline.) The connection never follows the cluster's other nodes: the
// internal credentials are this node's only.
func (e *Embedded) Connect(name string, opts ...nats.Option) (*nats.Conn, error) {
	addr, ok := e.ns.Addr().(*net.TCPAddr)
	if !ok {
		return nil, fmt.Errorf("connect to embedded nats: no TCP listener")
	}
	ip := addr.IP
	if ip.IsUnspecified() {
		if ip.To4() != nil {
			ip = net.IPv4(127, 0, 0, 1)
		} else {
			ip = net.IPv6loopback
		}
	}
	u := "nats://" + net.JoinHostPort(ip.String(), strconv.Itoa(addr.Port))
	o := []nats.Option{nats.Name(name), nats.UserInfo(e.user, e.pass), nats.MaxReconnects(-1),
		nats.IgnoreDiscoveredServers(), nats.ReconnectWait(100 * time.Millisecond)}
	if e.tlsOpts.Cert != "" {
		// The peer is this process's own listening socket, which no one
		// else can hold; its certificate need not name the loopback
		// address. Under tls.verify the connection presents the server's
		// own certificate (it must allow client auth).
		o = append(o, nats.Secure(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}))
		if e.tlsOpts.Verify {
			o = append(o, nats.ClientCert(e.tlsOpts.Cert, e.tlsOpts.Key))
		}
	}
	o = append(o, opts...)
	nc, err := nats.Connect(u, o...)
	if err != nil {
		return nil, fmt.Errorf("connect to embedded nats: %w", err)
	}
	return nc, nil
}

// Shutdown stops the server and waits until it has stopped; a temporary
// store dir is removed.
func (e *Embedded) Shutdown() {
	if e == nil || e.ns == nil {
		return
	}
	if e.routes != nil {
		e.routes.Stop()
	}
	e.ns.Shutdown()
	e.ns.WaitForShutdown()
	_ = e.cleanup(nil)
}

func (e *Embedded) cleanup(err error) error {
	if e.tmpDir != "" {
		if rerr := os.RemoveAll(e.tmpDir); rerr != nil {
			err = errors.Join(err, rerr)
		}
		e.tmpDir = ""
	}
	return err
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func randomSecret() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// slogAdapter routes nats-server logs to slog (notices at debug level: the
// server is chatty at start).
// Fatal messages are kept: the embedded server does not exit on them, so
// StartEmbedded reports them instead of waiting in vain.
type slogAdapter struct {
	l     *slog.Logger
	fatal *fatalLog
}

type fatalLog struct {
	mu  sync.Mutex
	msg string
}

func (f *fatalLog) get() string { f.mu.Lock(); defer f.mu.Unlock(); return f.msg }

func (a slogAdapter) Noticef(f string, v ...any) { a.l.Debug(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Warnf(f string, v ...any)   { a.l.Warn(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Fatalf(f string, v ...any) {
	msg := fmt.Sprintf(f, v...)
	a.l.Error(msg)
	a.fatal.mu.Lock()
	if a.fatal.msg == "" {
		a.fatal.msg = msg
	}
	a.fatal.mu.Unlock()
}
func (a slogAdapter) Errorf(f string, v ...any) {
	msg := fmt.Sprintf(f, v...)
	if strings.Contains(msg, " - rid:") && (strings.Contains(msg, "authentication error") || strings.Contains(msg, "TLS route handshake error")) {
		a.l.Warn("nats: route refused: the peer did not present the cluster credentials (nats.cluster.user/password) or a certificate signed by nats.cluster.tls.ca", "reason", msg)
		return
	}
	a.l.Error(msg)
}
func (a slogAdapter) Debugf(f string, v ...any) { a.l.Debug(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Tracef(f string, v ...any) { a.l.Debug(fmt.Sprintf(f, v...)) }
