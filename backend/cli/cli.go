// Package cli holds gseproc's subcommands. Each subcommand lives in its own
// file and is listed in commands below.
package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"gseproc/backend"
	"gseproc/backend/cli/clikit"
	"gseproc/model"
)

// command is one subcommand. run gets the arguments after the command name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, io Stdio) error
}

// commands lists every subcommand. The console is the default when the
// first argument is not a command name.
var commands = []command{
	{"console", "open the terminal console (the default)", runConsole},
	{"op", "send one operation (start, stop, status, register, unregister, restart, reload, kill)", runOp},
	{"task", "show a task, or pause, resume, abort (a roll) or cancel it", runTask},
	{"hosts", "list the fleet's hosts with their agent state", runHosts},
	{"procs", "list the process definitions", runProcs},
	{"apply", "create or replace process definitions from a JSON file", runApply},
	{"delete", "delete process definitions by namespace:name", runDelete},
	{"logs", "print a process's log on a host (its stdout, stderr or a file under log_path); -f follows it", runLogs},
	{"audit", "list the audit trail: who changed or operated what, and the outcome", runAudit},
	{"server", "serve the HTTP API (and the agents' NATS endpoint)", runServer},
	{"ssh", "serve the console over SSH, one operator and namespace set per key", runSSH},
	{"agent", "run the host agent on this machine", runAgent},
	{"demo", "tell a scenario's story on a simulated fleet in the console (or --headless)", runDemo},
	{"sim", "run a simulated fleet as agents over NATS; sim ACTION drives a simulated fleet live (offline, crash, flap ...)", runSim},
	{"bench", "measure a server and a simulated fleet: fan-out (fleet) or request rate (operate); gseproc beside s6, supervisord, pm2 and Ansible (compare); an idle agent's memory (agent)", runBench},
	{"nkey", "issue a NATS credential (nkey) bound to one host, a simulated fleet or a server", runNKey},
	{"version", "print the version", runVersion},
}

// Version is set at build time with -ldflags "-X gseproc/backend/cli.Version=...".
var Version = "dev"

// Main runs gseproc with args (without the program name) and returns the exit code.
func Main(ctx context.Context, args []string, io Stdio) int {
	cmd := "console"
	if len(args) > 0 {
		switch a := args[0]; {
		case a == "-h" || a == "--help" || a == "help":
			if len(args) > 1 {
				cmd, args = args[1], []string{"--help"}
				break
			}
			usage(io.Out)
			return 0
		case !strings.HasPrefix(a, "-"):
			cmd, args = a, args[1:]
		}
	}
	// --help is an answer, not an error: the usage goes to stdout (a bad
	// flag's message and usage still go to stderr).
	if wantsHelp(args) {
		io.Err = io.Out
	}
	// Every change a command makes is recorded under this operator.
	via := "cli"
	if cmd == "console" {
		via = "console"
	}
	ctx = backend.WithActor(ctx, model.Actor{Operator: operator(), Via: via})
	for _, c := range commands {
		if c.name != cmd {
			continue
		}
		return clikit.ExitCode(cmd, c.run(ctx, args, io), io.Err)
	}
	fmt.Fprintf(io.Err, "gseproc: unknown command %q\n\n", cmd)
	usage(io.Err)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "gseproc: operate and host processes across a fleet.\n\nUsage:\n  gseproc [console flags]       open the console (embedded engine, simulated fleet)\n  gseproc COMMAND [flags]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'gseproc COMMAND --help' for a command's flags.\nConfig: --config FILE, or $GSEPROC_CONFIG, or $XDG_CONFIG_HOME/gseproc/config.toml, or /etc/gseproc/config.toml.\n")
}

func runVersion(_ context.Context, args []string, io Stdio) error {
	fs := newFlags("version", "version", io)
	if pos, err := parseArgs(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usageError("version", "unexpected argument %q", pos[0])
	}
	fmt.Fprintln(io.Out, "gseproc", Version)
	return nil
}
