// Command gseproc-agent is gseproc's host agent alone: `gseproc-agent
// [flags]` is `gseproc agent [flags]` (backend/agent/agentcmd), and
// `gseproc-agent version` prints its version. It links the agent, the
// client side of the transport and the config, not the engine, the
// server, the NATS server or the console, so an idle agent maps a few MB
// of code rather than the whole of gseproc's; `gseproc agent` execs it
// when it is installed beside gseproc with the same version (make build
// and make package build both).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"gseproc/backend/agent/agentcmd"
	"gseproc/backend/cli/clikit"
)

// version is set at build time with -ldflags "-X main.version=...", to
// gseproc's version: `gseproc agent` execs this binary only when they match.
var version = "dev"

func main() {
	args := os.Args[1:]
	if len(args) == 1 && args[0] == "version" {
		fmt.Println("gseproc-agent", version)
		return
	}
	io := clikit.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}
	if clikit.WantsHelp(args) {
		io.Err = io.Out // --help is an answer, as in gseproc
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := clikit.ExitCode("agent", agentcmd.Run(ctx, args, io), os.Stderr)
	stop()
	os.Exit(code)
}
