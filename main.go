// Command gseproc operates and hosts processes on a fleet of hosts: an HTTP
// API server, a task engine, a host agent, an agent simulator and a terminal
// console, in one binary. With no arguments it opens the console on the
// embedded engine and a simulated fleet. `gseproc agent` runs
// gseproc-agent (backend/agent/cmd/gseproc-agent) when it is installed
// beside gseproc.
//
// GSEPROC_CLI_CPU_PROFILE=FILE writes a CPU profile of the command's run
// to FILE (`gseproc bench fleet --profile` profiles its op clients so: a
// short-lived command serves no pprof endpoint). The processes the command
// starts do not inherit it: they would write over the same file.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"gseproc/backend/cli"
)

func main() {
	// `gseproc agent` is gseproc-agent, the agent's own small binary, when
	// it is installed beside this one with the same version.
	cli.ExecAgent(os.Args[1:], os.Stderr)
	stopProfile := cpuProfile(os.Getenv(cpuProfileEnv))
	_ = os.Unsetenv(cpuProfileEnv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	stopProfile()
	os.Exit(code)
}

// cpuProfileEnv names the file the command's CPU profile is written to.
const cpuProfileEnv = "GSEPROC_CLI_CPU_PROFILE"

// cpuProfile starts a CPU profile written to path ("": none) and returns
// what ends it. A profile that cannot be written is said on stderr, and
// the command runs anyway.
func cpuProfile(path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gseproc: %s: %v\n", cpuProfileEnv, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "gseproc: %s: %v\n", cpuProfileEnv, err)
		_ = f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "gseproc: %s: %v\n", cpuProfileEnv, err)
		}
	}
}
