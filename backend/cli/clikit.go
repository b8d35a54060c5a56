package cli

import (
	"flag"
	"io"
	"log/slog"

	"gseproc/backend/cli/clikit"
	"gseproc/backend/config"
)

// What every command shares with the agent's own binary lives in clikit;
// these are its names here.
type (
	// Stdio are the streams a command uses.
	Stdio = clikit.Stdio
	// ExitError carries a specific exit code (e.g. 1 when some host failed).
	ExitError = clikit.ExitError
	multiFlag = clikit.MultiFlag
)

func newFlags(name, synopsis string, io Stdio) *flag.FlagSet {
	return clikit.NewFlags(name, synopsis, io)
}

func usageError(cmd, format string, args ...any) error {
	return clikit.UsageError(cmd, format, args...)
}

func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) { return clikit.ParseArgs(fs, args) }

func parseList(cmd string, fs *flag.FlagSet, args []string) error {
	return clikit.ParseList(cmd, fs, args)
}

func wantsHelp(args []string) bool { return clikit.WantsHelp(args) }

func loadConfig(path string, io Stdio) (config.Config, error) { return clikit.LoadConfig(path, io) }

func newLogger(cfg config.LogConfig, w io.Writer) *slog.Logger { return clikit.NewLogger(cfg, w) }
