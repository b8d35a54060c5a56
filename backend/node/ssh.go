package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/sshconsole"
)

// SSH is the console served over SSH, as StartSSH built it: listening, not
// yet serving.
type SSH struct {
	srv *sshconsole.Server
	ln  net.Listener
}

// StartSSH builds the SSH console of cfg.SSH and cfg.Console on be, for the
// operators of keys (sshconsole.LoadAuthorizedKeys), and listens on
// [ssh] listen. Serve serves it; a failed StartSSH has closed what it had.
func StartSSH(cfg config.Config, keys []sshconsole.Key, be backend.Backend, version string, log *slog.Logger) (*SSH, error) {
	srv, err := sshconsole.New(sshconsole.Options{Backend: be, Console: cfg.Console, Keys: keys, HostKeyPath: cfg.SSH.HostKey,
		IdleTimeout: cfg.SSH.IdleTimeout.D(), MaxSessions: cfg.SSH.MaxSessions, Log: log, Version: version})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.SSH.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.SSH.Listen, err)
	}
	return &SSH{srv: srv, ln: ln}, nil
}

// Addr is where the console listens.
func (s *SSH) Addr() net.Addr { return s.ln.Addr() }

// HostKeyFingerprint is the SHA256 fingerprint of the host key, for the
// operators to check.
func (s *SSH) HostKeyFingerprint() string { return s.srv.HostKeyFingerprint() }

// Serve serves the console until ctx ends, then closes it and its sessions.
func (s *SSH) Serve(ctx context.Context) error { return s.srv.Serve(ctx, s.ln) }
