package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/term"
	"github.com/muesli/termenv"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/node"
	"gseproc/model"
	"gseproc/theme"
	"gseproc/ui"
)

// consoleFlags are the console's command-line options.
type consoleFlags struct {
	config, server, ns, op, theme string
	labels                        multiFlag
	noColor, readOnly             bool
	sim                           simFlags
}

// parseConsoleFlags parses and checks the flags; the opening labels and op
// come back parsed.
func parseConsoleFlags(args []string, sio Stdio) (consoleFlags, map[string]string, *model.OpType, error) {
	var f consoleFlags
	fs := newFlags("console", "[console] [--config FILE] [--server URL] [--ns NS [--label KEY=VALUE]... [--op OP]] [--theme dark|light|ansi16|mono] [--no-color] [--read-only]", sio)
	fs.StringVar(&f.config, "config", "", "config file (default: $GSEPROC_CONFIG, then the usual places)")
	fs.StringVar(&f.server, "server", "", "use the gseproc servers at `URL[,URL...]` (servers of one cluster: the others when one fails; default [server.client] servers) instead of the embedded engine and simulated fleet")
	fs.StringVar(&f.ns, "ns", "", "open on this namespace")
	fs.Var(&f.labels, "label", "open on the hosts whose processes carry KEY=VALUE (repeatable; needs --ns)")
	fs.StringVar(&f.op, "op", "", "open the op picker on this op: start, stop, status, register, unregister, restart, reload, kill (needs --ns)")
	fs.StringVar(&f.theme, "theme", "", "colour theme: dark, light, ansi16 (the terminal's 16 colours) or mono (default: [console] theme)")
	fs.BoolVar(&f.noColor, "no-color", false, "no colour at all (NO_COLOR in the environment does the same)")
	fs.BoolVar(&f.readOnly, "read-only", false, "refuse every change: only status runs, the process editor is off")
	f.sim.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, nil, nil, err
		}
		return f, nil, nil, &ExitError{Code: 2}
	}
	if fs.NArg() > 0 {
		return f, nil, nil, &ExitError{Code: 2, Err: fmt.Errorf("unexpected argument %q (see gseproc console --help)", fs.Arg(0))}
	}
	var labels map[string]string
	for _, l := range f.labels {
		k, v, err := model.ParseLabel(l)
		if err != nil {
			return f, nil, nil, &ExitError{Code: 2, Err: fmt.Errorf("--label: want KEY=VALUE, got %q", l)}
		}
		if labels == nil {
			labels = map[string]string{}
		}
		labels[k] = v
	}
	var op *model.OpType
	if f.op != "" {
		o, err := model.ParseOp(f.op)
		if err != nil {
			return f, nil, nil, &ExitError{Code: 2, Err: fmt.Errorf("--op: %w", err)}
		}
		op = &o
	}
	if (labels != nil || op != nil) && f.ns == "" {
		return f, nil, nil, &ExitError{Code: 2, Err: errors.New("--label and --op need --ns (the namespace to open on)")}
	}
	if f.theme != "" {
		if _, err := theme.New(f.theme, nil, false); err != nil {
			return f, nil, nil, &ExitError{Code: 2, Err: fmt.Errorf("--theme: %w", err)}
		}
	}
	return f, labels, op, nil
}

// runConsole opens the terminal console: on the embedded engine and a
// simulated fleet, or on a server with --server. It needs a terminal on
// stdin and stdout, and logs to [log] file or nowhere (never to the
// terminal it draws on).
func runConsole(ctx context.Context, args []string, sio Stdio) error {
	f, labels, op, err := parseConsoleFlags(args, sio)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(f.config, sio)
	if err != nil {
		return err
	}
	if f.theme != "" {
		cfg.Console.Theme = f.theme
	}
	in, out, err := terminal(sio)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}

	// The console logs to [log] file or nowhere: never to its own terminal.
	log := newLogger(cfg.Log, io.Discard)
	if f.readOnly {
		cfg.Engine.ReadOnly = true
	}
	f.sim.apply(&cfg)
	if node.Embedded(cfg, f.server) {
		// Embedded, the console's process holds the engine, its memory
		// store and the simulated fleet: a server's heap (some 300 MB
		// live after an op over 100,000 hosts), paced as the server's is
		// (with Go's default the RSS was about three times that).
		defer node.PaceMemoryWithin(ctx, log, cfg.Server.MemoryCeiling)()
	}
	be, closeBackend, err := node.OpenBackend(ctx, cfg, f.server, Version, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := closeBackend(); err != nil {
			log.Warn("close backend", "err", err)
		}
	}()
	o := ui.Options{Namespace: f.ns, Labels: labels, Op: op}
	if node.Embedded(cfg, f.server) {
		// What the heap grew to during an op over 100,000 hosts is given
		// back once its watch ends (RSS after it 446 -> 292 MB).
		o.ReleaseMemory = debug.FreeOSMemory
	}
	return runConsoleOn(ctx, be, cfg, f, in, out, o)
}

// runConsoleOn runs the console on be until the operator quits: the
// theme and colours of cfg and f, the opening screen of o.
func runConsoleOn(ctx context.Context, be backend.Backend, cfg config.Config, f consoleFlags, in, out *os.File, o ui.Options) error {
	noColor := f.noColor || os.Getenv("NO_COLOR") != ""
	r := lipgloss.NewRenderer(out)
	if noColor {
		// Attributes (bold, reverse) stay: NO_COLOR is about colour.
		r.SetColorProfile(termenv.ANSI)
		lipgloss.SetColorProfile(termenv.Ascii)
	} else {
		lipgloss.SetColorProfile(r.ColorProfile())
	}
	th, err := theme.New(cfg.Console.Theme, r, noColor)
	if err != nil {
		return err
	}
	o.Backend, o.Config, o.Theme, o.ReadOnly, o.Warnings, o.Operator = be, cfg.Console, th, f.readOnly, cfg.Warnings, operator()
	o.Copy = termenv.NewOutput(out).Copy // c copies with OSC 52
	m, err := ui.New(ctx, o)
	if err != nil {
		return err
	}
	defer m.Close()
	opts := []tea.ProgramOption{tea.WithAltScreen(), tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out)}
	if cfg.Console.Mouse {
		opts = append(opts, tea.WithMouseCellMotion())
	}
	if _, err := tea.NewProgram(m, opts...).Run(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("console: %w", err)
	}
	return nil
}

// terminal returns stdin and stdout when both are terminals, and a clear
// error otherwise (CI and pipes have none: the console must not hang there).
func terminal(sio Stdio) (*os.File, *os.File, error) {
	in, okIn := sio.In.(*os.File)
	out, okOut := sio.Out.(*os.File)
	switch {
	case !okIn || !term.IsTerminal(in.Fd()):
		return nil, nil, errors.New("the console needs a terminal, but stdin is not one; for scripts and CI use 'gseproc op', 'gseproc hosts' or 'gseproc procs'")
	case !okOut || !term.IsTerminal(out.Fd()):
		return nil, nil, errors.New("the console needs a terminal, but stdout is not one; for scripts and CI use 'gseproc op', 'gseproc hosts' or 'gseproc procs'")
	}
	return in, out, nil
}
