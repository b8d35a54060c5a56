// Package clikit is what gseproc's commands share with the agent's own
// binary (gseproc-agent, built from backend/agent/cmd/gseproc-agent): the
// streams a command uses, exit codes, flag sets and their parsing, the NATS
// client flags, loading the config and building the logger. It imports no
// more than config and logging, so the agent's binary stays small.
package clikit

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"gseproc/backend/config"
	"gseproc/backend/logging"
)

// Stdio are the streams a command uses.
type Stdio struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// ExitError carries a specific exit code (e.g. 1 when some host failed).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the exit code of command cmd's error err, which it reports
// on w: 0 for none or --help, an ExitError's code, else 1.
func ExitCode(cmd string, err error, w io.Writer) int {
	var ee *ExitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		if ee.Err != nil {
			fmt.Fprintf(w, "gseproc %s: %v\n", cmd, ee.Err)
		}
		return ee.Code
	default:
		fmt.Fprintf(w, "gseproc %s: %v\n", cmd, err)
		return 1
	}
}

// WantsHelp reports whether args ask for help (-h, -help or --help
// before a "--").
func WantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// NewFlags makes a FlagSet whose usage names the command and its synopsis.
func NewFlags(name, synopsis string, io Stdio) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Err)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: gseproc %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// MultiFlag is a repeatable string flag.
type MultiFlag []string

func (m *MultiFlag) String() string     { return strings.Join(*m, ",") }
func (m *MultiFlag) Set(s string) error { *m = append(*m, s); return nil }

// UsageError is a bad command line: exit code 2.
func UsageError(cmd, format string, args ...any) error {
	return &ExitError{Code: 2, Err: fmt.Errorf(format+"\n(run 'gseproc %s --help' for the flags)", append(args, cmd)...)}
}

// ParseArgs parses flags wherever they are among the arguments (Go's flag
// package stops at the first positional one) and returns the positionals.
// A bad flag (already reported by fs) is exit code 2; --help is
// flag.ErrHelp.
func ParseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &ExitError{Code: 2}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// ParseList parses the flags of command cmd, which takes no positional
// argument.
func ParseList(cmd string, fs *flag.FlagSet, args []string) error {
	pos, err := ParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return UsageError(cmd, "unexpected argument %q", pos[0])
	}
	return nil
}

// LoadConfig loads the config file (path, or the usual places when "") and
// prints its warnings (unknown keys) to io.Err.
func LoadConfig(path string, io Stdio) (config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return cfg, err
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(io.Err, "warning:", w)
	}
	return cfg, nil
}

// NewLogger builds the slog logger of cfg: level debug, info, warn or error
// (default info), format text or json, to cfg.File when set (appended;
// falling back to w when it cannot be opened) or else to w.
func NewLogger(cfg config.LogConfig, w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Level)); err != nil || cfg.Level == "" {
		level = slog.LevelInfo
	}
	var fileErr error
	if cfg.File != "" {
		f, err := os.OpenFile(cfg.File, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
		if err != nil {
			fileErr = err
		} else {
			w = f // the process's lifetime: closed on exit
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if strings.EqualFold(cfg.Format, "json") {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	// A failure that repeats (a route to a dead node is retried 4 times a
	// second) is written once per 30 s, with how often it repeated.
	l := slog.New(logging.RateLimit(h, slog.LevelWarn, 30*time.Second))
	if fileErr != nil {
		l.Warn("log file unusable, logging here instead", "file", cfg.File, "err", fileErr)
	}
	return l
}

// NATSClientFlags are the connection flags of the commands that connect to
// NATS as a client (agent, sim). Each overrides its [nats] key only when
// given.
type NATSClientFlags struct {
	urls, user, password, seed, creds string
	tlsCA, tlsCert, tlsKey            string
}

// Register adds the flags to fs.
func (n *NATSClientFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&n.urls, "nats", "", "NATS `URL`s to connect to, comma-separated (default [nats] urls, else nats://"+config.DefaultNATSListen+")")
	fs.StringVar(&n.user, "user", "", "NATS `user` (overrides [nats] user)")
	fs.StringVar(&n.password, "password", "", "NATS `password` (overrides [nats] password)")
	fs.StringVar(&n.seed, "nkey-seed", "", "NATS nkey seed `FILE` (overrides [nats] nkey_seed_file)")
	fs.StringVar(&n.tlsCA, "tls-ca", "", "trust NATS servers whose certificate `FILE` (PEM CA) signed (overrides [nats.tls] ca)")
	fs.StringVar(&n.tlsCert, "tls-cert", "", "present the client certificate `FILE` (PEM) to NATS (overrides [nats.tls] cert)")
	fs.StringVar(&n.tlsKey, "tls-key", "", "key `FILE` of --tls-cert (overrides [nats.tls] key)")
	fs.StringVar(&n.creds, "creds", "", "NATS credentials `FILE` (user JWT and seed, for decentralised JWT auth; overrides [nats] creds_file)")
}

// Load loads the config at path (see LoadConfig) and writes into its
// [nats] section the flags that were set on the command line. It returns
// the config and the names of every flag set, for the command's own
// overrides.
func (n *NATSClientFlags) Load(fs *flag.FlagSet, path string, io Stdio) (config.Config, map[string]bool, error) {
	cfg, err := LoadConfig(path, io)
	if err != nil {
		return cfg, nil, &ExitError{Code: 2, Err: err}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["nats"] {
		cfg.NATS.URLs = strings.Split(n.urls, ",")
	}
	if set["user"] {
		cfg.NATS.User = n.user
	}
	if set["password"] {
		cfg.NATS.Password = n.password
	}
	if set["nkey-seed"] {
		cfg.NATS.NKeySeedFile = n.seed
	}
	if set["creds"] {
		cfg.NATS.CredsFile = n.creds
	}
	if set["tls-ca"] {
		cfg.NATS.TLS.CA = n.tlsCA
	}
	if set["tls-cert"] {
		cfg.NATS.TLS.Cert = n.tlsCert
	}
	if set["tls-key"] {
		cfg.NATS.TLS.Key = n.tlsKey
	}
	return cfg, set, nil
}
