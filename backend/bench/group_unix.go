//go:build unix

package bench

import (
	"os"
	"syscall"
)

// ownGroup puts a child in its own process group, so stopping it stops
// what it started too.
func ownGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// signalGroup sends the child's group SIGTERM, or SIGKILL when kill.
func signalGroup(p *os.Process, kill bool) error {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	return syscall.Kill(-p.Pid, sig)
}
