//go:build !unix

package bench

import (
	"os"
	"syscall"
)

// ownGroup: no process groups here; the child is stopped by itself.
func ownGroup() *syscall.SysProcAttr { return nil }

// signalGroup ends the child: there is no SIGTERM to send, so a graceful
// stop (kill false) ends it as a kill does.
func signalGroup(p *os.Process, _ bool) error { return p.Kill() }
