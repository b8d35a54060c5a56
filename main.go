// Command gseproc operates and hosts processes on a fleet of hosts: an HTTP
// API server, a task engine, a host agent, an agent simulator and a terminal
// console, in one binary. With no arguments it opens the console on the
// embedded engine and a simulated fleet. `gseproc agent` runs
// gseproc-agent (backend/agent/cmd/gseproc-agent) when it is installed
// beside gseproc.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"gseproc/backend/cli"
)

func main() {
	// `gseproc agent` is gseproc-agent, the agent's own small binary, when
	// it is installed beside this one with the same version.
	cli.ExecAgent(os.Args[1:], os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
