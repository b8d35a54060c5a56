// Package sshconsole serves gseproc's console over SSH (`gseproc ssh`):
// each session runs the same bubbletea console the local command runs,
// through wish's bubbletea middleware, on the session's terminal.
//
// Who gets in is decided by public key alone (no passwords): each key of
// the authorized-keys file names its operator and the namespaces the
// operator may see and change. A session's console talks to the backend
// through backend.Restrict (nothing outside those namespaces is shown or
// changed) with the operator as the actor of every call, so the engine's
// audit trail records each action under that name, via "ssh".
//
// The host key is generated on first start (ed25519, mode 0600) and kept;
// a session without a key press for IdleTimeout is closed, saying why (the
// connection's own idle timeout, a minute later and kept alive by output
// alone, closes dead connections: it must never win the race against the
// key watcher, which would close the session without a word); window resizes reach the console as
// tea.WindowSizeMsg; at most MaxSessions sessions run at once.
//
// IdleTimeout and MaxSessions are the [ssh] section's, their defaults
// there, once (config.Default, filled by config.Load): New refuses them
// unset instead of defaulting them a second time.
package sshconsole

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/ssh"
	"github.com/charmbracelet/wish"
	"github.com/charmbracelet/wish/activeterm"
	bm "github.com/charmbracelet/wish/bubbletea"
	"github.com/muesli/termenv"
	gossh "golang.org/x/crypto/ssh"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/model"
	"gseproc/theme"
	"gseproc/ui"
)

// Options configure a Server.
type Options struct {
	Backend     backend.Backend
	Console     config.ConsoleConfig
	Keys        []Key
	HostKeyPath string
	IdleTimeout time.Duration
	MaxSessions int
	Log         *slog.Logger
	// Version is the SSH server version string ("SSH-2.0-gseproc_<v>").
	Version string
}

// Server is the SSH console server.
type Server struct {
	o        Options
	srv      *ssh.Server
	sessions atomic.Int64
	wg       sync.WaitGroup // the sessions' idle watchers
}

type ctxKey int

const (
	keyCtx ctxKey = iota
	sessionCtx
)

// session is what a session's middlewares share.
type session struct {
	key      Key
	model    *ui.Model
	lastKey  atomic.Int64 // unix nanoseconds of the last input
	timedOut atomic.Bool
}

// New builds the server; the host key is read from HostKeyPath, or
// generated there when the file does not exist.
func New(o Options) (*Server, error) {
	if o.Backend == nil {
		return nil, errors.New("ssh console: no backend")
	}
	if len(o.Keys) == 0 {
		return nil, errors.New("ssh console: no authorized key: nobody could log in")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.IdleTimeout <= 0 || o.MaxSessions < 1 {
		return nil, fmt.Errorf("ssh console: idle timeout %s and max sessions %d must be > 0 ([ssh] idle_timeout and max_sessions, filled by config.Load)", o.IdleTimeout, o.MaxSessions)
	}
	s := &Server{o: o}
	srv, err := wish.NewServer(
		wish.WithHostKeyPath(o.HostKeyPath),
		wish.WithPublicKeyAuth(s.authorize),
		wish.WithIdleTimeout(o.IdleTimeout+time.Minute),
		wish.WithVersion("gseproc_"+o.Version),
		wish.WithMiddleware(
			bm.MiddlewareWithProgramHandler(s.program, termenv.ANSI256),
			activeterm.Middleware(),
			s.admit,
		),
	)
	if err != nil {
		return nil, fmt.Errorf("ssh console: host key %s: %w", o.HostKeyPath, err)
	}
	s.srv = srv
	return s, nil
}

// HostKeyFingerprint is the SHA256 fingerprint of the host key, for
// operators to check on first connection.
func (s *Server) HostKeyFingerprint() string {
	if len(s.srv.HostSigners) == 0 {
		return ""
	}
	return gossh.FingerprintSHA256(s.srv.HostSigners[0].PublicKey())
}

// Serve serves on ln until ctx ends, then closes every session.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(ln) }()
	select {
	case err := <-errc:
		s.wg.Wait()
		return fmt.Errorf("ssh console: serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	err := s.srv.Close()
	<-errc
	s.wg.Wait()
	if err != nil {
		return fmt.Errorf("ssh console: close: %w", err)
	}
	return nil
}

// authorize admits a public key of the file and remembers whose it is.
func (s *Server) authorize(ctx ssh.Context, key ssh.PublicKey) bool {
	wire := key.Marshal()
	for _, k := range s.o.Keys {
		if bytes.Equal(k.Key.Marshal(), wire) {
			ctx.SetValue(keyCtx, k)
			return true
		}
	}
	s.o.Log.Warn("ssh: key refused", "remote", ctx.RemoteAddr().String(), "user", ctx.User(),
		"fingerprint", gossh.FingerprintSHA256(key))
	return false
}

// admit is the outermost middleware: it bounds the sessions, logs each
// one, watches its idleness and closes its console when it ends.
func (s *Server) admit(next ssh.Handler) ssh.Handler {
	return func(sess ssh.Session) {
		k, ok := sess.Context().Value(keyCtx).(Key)
		if !ok { // cannot happen: only public keys are accepted
			_ = sess.Exit(1)
			return
		}
		if n := s.sessions.Add(1); n > int64(s.o.MaxSessions) {
			s.sessions.Add(-1)
			wish.Fatalln(sess, fmt.Sprintf("gseproc: %d sessions are open, the most [ssh] max_sessions allows; try again later", s.o.MaxSessions))
			return
		}
		defer s.sessions.Add(-1)
		st := &session{key: k}
		st.lastKey.Store(time.Now().UnixNano())
		sess.Context().SetValue(sessionCtx, st)
		log := s.o.Log.With("operator", k.Operator, "remote", sess.RemoteAddr().String(), "fingerprint", k.Fingerprint)
		log.Info("ssh: session opened", "namespaces", k.Namespaces, "read_only", k.ReadOnly)
		start := time.Now()

		stop := make(chan struct{})
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.watchIdle(sess, st, stop)
		}()
		next(sess)
		close(stop)
		if st.model != nil {
			st.model.Close()
		}
		log.Info("ssh: session closed", "duration", time.Since(start).Round(time.Millisecond), "idle_timeout", st.timedOut.Load())
		_ = sess.Exit(0)
	}
}

// idle reports whether a session whose last key press was at last has
// been idle for longer than limit at now.
func idle(last, now time.Time, limit time.Duration) bool { return now.Sub(last) > limit }

// watchIdle closes the session once it has had no key press for
// IdleTimeout, or returns when stop closes.
func (s *Server) watchIdle(sess ssh.Session, st *session, stop <-chan struct{}) {
	every := max(s.o.IdleTimeout/4, 50*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-sess.Context().Done():
			return
		case now := <-t.C:
			if idle(time.Unix(0, st.lastKey.Load()), now, s.o.IdleTimeout) {
				st.timedOut.Store(true)
				_, _ = fmt.Fprintf(sess.Stderr(), "\r\ngseproc: no key pressed for %s: session closed\r\n", s.o.IdleTimeout)
				_ = sess.Close()
				return
			}
		}
	}
}

// program builds the console of one session: restricted to the key's
// namespaces, every call made as its operator.
func (s *Server) program(sess ssh.Session) *tea.Program {
	st, ok := sess.Context().Value(sessionCtx).(*session)
	if !ok {
		return nil
	}
	pty, _, ok := sess.Pty()
	if !ok {
		return nil // activeterm refuses it
	}
	k := st.key
	ctx := backend.WithActor(sess.Context(), model.Actor{Operator: k.Operator, Via: "ssh"})
	env := sshEnv(append(sess.Environ(), "TERM="+pty.Term))
	r := lipgloss.NewRenderer(sess, termenv.WithEnvironment(env), termenv.WithUnsafe(), termenv.WithColorCache(true))
	noColor := env.Getenv("NO_COLOR") != "" || pty.Term == "dumb"
	th, err := theme.New(s.o.Console.Theme, r, noColor)
	if err != nil {
		wish.Fatalln(sess, "gseproc: theme:", err)
		return nil
	}
	m, err := ui.New(ctx, ui.Options{
		Backend:  backend.Restrict(s.o.Backend, backend.AllowNamespaces(k.Namespaces)),
		Config:   s.o.Console,
		Theme:    th,
		ReadOnly: k.ReadOnly,
		Operator: k.Operator,
		Copy:     termenv.NewOutput(sess, termenv.WithEnvironment(env)).Copy,
	})
	if err != nil {
		wish.Fatalln(sess, "gseproc: console:", err)
		return nil
	}
	st.model = m
	in := &touchReader{r: sess, last: &st.lastKey}
	opts := []tea.ProgramOption{tea.WithInput(in), tea.WithOutput(sess), tea.WithAltScreen(), tea.WithContext(ctx)}
	if s.o.Console.Mouse {
		opts = append(opts, tea.WithMouseCellMotion())
	}
	return tea.NewProgram(m, opts...)
}

// touchReader records when input last arrived.
type touchReader struct {
	r    io.Reader
	last *atomic.Int64
}

func (t *touchReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// sshEnv is a session's environment for termenv.
type sshEnv []string

func (e sshEnv) Environ() []string { return e }

func (e sshEnv) Getenv(k string) string {
	v := ""
	for _, kv := range e { // the last one wins, as TERM is appended last
		if name, val, ok := strings.Cut(kv, "="); ok && name == k {
			v = val
		}
	}
	return v
}
