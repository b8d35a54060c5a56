//go:build !windows

// Package cputime reads the CPU time the process has used: what the
// benchmarks report besides wall time, which on a loaded machine is
// mostly waiting.
package cputime

import (
	"syscall"
	"time"
)

// Self is the CPU time (user and system) this process has used so far.
func Self() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
