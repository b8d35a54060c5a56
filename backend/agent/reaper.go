//go:build linux

package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// children is the set of this process's children that an owner will wait
// for (commands the agent launched, until reaped), and the reaper of every
// other child: the orphans a subreaper or pid 1 inherits (a daemon whose
// shell exited). It is one per process, as a process's children are,
// whatever the number of agents in it: a reaper that knew only its own
// agent's commands could take another agent's child from it.
var children = newChildSet()

type childSet struct {
	// gate is held shared by a launch from before its fork until its pid
	// is registered, and exclusively by the reaper while it reaps: so the
	// reaper never sees a command's child it does not know yet.
	gate sync.RWMutex
	mu   sync.Mutex
	// own counts the launches of each pid not waited for yet: a count,
	// not a set, because a pid freed by one command's wait can be a new
	// launch's before that wait is forgotten (waited), and forgetting it
	// then must not leave the new command's child to the reaper.
	own map[int]int
	// users counts the agents that run the reaper; the first starts it,
	// the last stops it (and waits for it).
	users  int
	stop   context.CancelFunc
	done   chan struct{}
	reaped uint64 // orphans reaped, for tests and the log
}

func newChildSet() *childSet { return &childSet{own: map[int]int{}} }

// start registers a launch: call before the fork, then started with its
// pid (or 0 when the fork failed).
func (k *childSet) start() { k.gate.RLock() }

func (k *childSet) started(pid int) {
	if pid > 0 {
		k.mu.Lock()
		k.own[pid]++
		k.mu.Unlock()
	}
	k.gate.RUnlock()
}

// waited forgets one launch of pid once its owner has waited for it.
func (k *childSet) waited(pid int) {
	k.mu.Lock()
	if k.own[pid] <= 1 {
		delete(k.own, pid)
	} else {
		k.own[pid]--
	}
	k.mu.Unlock()
}

func (k *childSet) owned(pid int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.own[pid] > 0
}

// shouldReap reports whether this process inherits orphans: it is pid 1
// or a child subreaper.
func shouldReap() bool {
	if os.Getpid() == 1 {
		return true
	}
	var v int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0); err != nil {
		return false
	}
	return v != 0
}

// use starts the reaper for one more agent (the first starts it); the
// returned func stops it for that agent (the last stops it and waits).
func (k *childSet) use() func() {
	k.mu.Lock()
	k.users++
	if k.users == 1 {
		ctx, cancel := context.WithCancel(context.Background())
		k.stop, k.done = cancel, make(chan struct{})
		go k.run(ctx, k.done)
	}
	k.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			k.mu.Lock()
			k.users--
			var done chan struct{}
			if k.users == 0 {
				k.stop()
				done = k.done
			}
			k.mu.Unlock()
			if done != nil {
				<-done
			}
		})
	}
}

// reapSweep is how often the reaper sweeps for orphans to reap.
const reapSweep = time.Second

// run reaps orphans in a sweep every reapSweep (and once at its start).
//
// It does not wake at each SIGCHLD, a deliberate choice: a hosted
// process, the orphan that matters, is reaped by its watcher the moment
// it exits (reapExited, through its pidfd), and a command's shell by its
// owner, so a SIGCHLD almost never leaves the reaper anything to do; yet
// each one woke the runtime's signal goroutine and the reaper, whose peek
// (waitid P_ALL) walks every child of the agent. In a crash storm of 500
// processes (two SIGCHLD per restart, some 500 children) that was a tenth
// of the agent's cpu, for nothing. What is left to the sweep, an orphan
// no watcher knows (a daemon's own helper that exits), stays a zombie at
// most reapSweep: it holds a pid and a process table entry, no memory,
// and the detection of a hosted process's exit does not depend on it.
func (k *childSet) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(reapSweep)
	defer t.Stop()
	k.reap(true)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			k.reap(true)
		}
	}
}

// reap waits for every exited child that no owner waits for. It peeks at
// the next exited child (waitid WNOWAIT) and reaps it unless it is a
// command's; when a command's child is first in line, full lists the
// children (/proc/self/task/*/children) and reaps the orphans among them.
//
// Without full, the gate is taken only when there may be something to
// reap: a peek that finds no exited child, or a command's first in line,
// leaves the launches alone. The peek is repeated under the gate, where
// an unowned pid is surely an orphan.
func (k *childSet) reap(full bool) int {
	if !full {
		if pid := peekExited(unix.P_ALL, 0); pid <= 0 || k.owned(pid) {
			return 0
		}
	}
	k.gate.Lock()
	defer k.gate.Unlock()
	n := 0
	for {
		pid := peekExited(unix.P_ALL, 0)
		if pid <= 0 {
			break // no child, or none exited
		}
		if k.owned(pid) {
			if full {
				n += k.reapListed()
			}
			break
		}
		var ws unix.WaitStatus
		if got, _ := unix.Wait4(pid, &ws, unix.WNOHANG, nil); got != pid {
			break
		}
		n++
	}
	k.mu.Lock()
	k.reaped += uint64(n)
	k.mu.Unlock()
	return n
}

// reapListed reaps the zombies among this process's children that no
// owner waits for. k.gate is held.
func (k *childSet) reapListed() int {
	n := 0
	for _, pid := range childPids() {
		if k.owned(pid) {
			continue
		}
		// One wait4 per child (0 while it runs), not a /proc read.
		var ws unix.WaitStatus
		if got, _ := unix.Wait4(pid, &ws, unix.WNOHANG, nil); got == pid {
			n++
		}
	}
	return n
}

// childPids lists this process's children, from the children file of
// each of its threads (/proc/self/task/*/children).
func childPids() []int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// reapExited reaps pid, a process a watcher saw exit (its pidfd became
// readable), when it is a child of this process that no owner waits for:
// an orphan a subreaper or pid 1 inherited is reaped at once, not at the
// next sweep. The pid cannot be another process meanwhile: an exited
// child stays a zombie until it is reaped. It does nothing when this
// process runs no reaper (its children are then all owned).
//
// With pidfd (the watcher's, -1: none) it reaps through it (waitid
// P_PIDFD, Linux 5.4): that names the very process watched, never a
// launch's child that took its pid after someone else reaped it, so no
// launch is held back (in a crash storm every exit took the gate, and
// the launches and the exits behind them queued for seconds). Without,
// it takes the gate.
func (k *childSet) reapExited(pid, pidfd int) bool {
	k.mu.Lock()
	running := k.users > 0
	k.mu.Unlock()
	if !running || pid <= 0 || k.owned(pid) {
		return false
	}
	if pidfd >= 0 {
		var info unix.Siginfo
		err := waitidNoHang(unix.P_PIDFD, pidfd, &info, 0)
		if err == 0 && siginfoPid(&info) == pid {
			k.mu.Lock()
			k.reaped++
			k.mu.Unlock()
			return true
		}
		if err != unix.EINVAL { // EINVAL: no P_PIDFD here; else not ours, or reaped
			return false
		}
	}
	// Not a child of this process (ECHILD), or a command's: nothing to
	// take, and no launch to hold back. Only an unowned exited child
	// needs the gate (a launch's child could have that pid, exited and
	// not registered yet).
	if got := peekExited(unix.P_PID, pid); got != pid || k.owned(pid) {
		return false
	}
	k.gate.Lock()
	defer k.gate.Unlock()
	if k.owned(pid) {
		return false
	}
	var ws unix.WaitStatus
	if got, _ := unix.Wait4(pid, &ws, unix.WNOHANG, nil); got != pid {
		return false
	}
	k.mu.Lock()
	k.reaped++
	k.mu.Unlock()
	return true
}

// peekExited is the pid of an exited child of this process (idtype
// P_ALL, or P_PID id), left unreaped (WNOWAIT); 0 when none has exited
// or there is no such child.
func peekExited(idtype, id int) int {
	var info unix.Siginfo
	if waitidNoHang(idtype, id, &info, unix.WNOWAIT) != 0 {
		return 0
	}
	return siginfoPid(&info)
}

// waitidNoHang is waitid(idtype, id, info, WEXITED|WNOHANG|flags) as a
// raw system call: with WNOHANG it never waits, and a raw call does not
// wake the scheduler's monitor as a plain one does (readProc).
func waitidNoHang(idtype, id int, info *unix.Siginfo, flags int) syscall.Errno {
	for {
		_, _, errno := syscall.RawSyscall6(syscall.SYS_WAITID, uintptr(idtype), uintptr(id), uintptr(unsafe.Pointer(info)),
			uintptr(unix.WEXITED|unix.WNOHANG|flags), 0, 0)
		if errno != syscall.EINTR {
			return errno
		}
	}
}

// siginfoPid is si_pid of a waitid answer: the first field of the union
// after si_signo, si_errno and si_code, aligned to a pointer; 0 when no
// child had exited (WNOHANG).
func siginfoPid(info *unix.Siginfo) int {
	b := (*[unsafe.Sizeof(unix.Siginfo{})]byte)(unsafe.Pointer(info))
	off := 12
	if unsafe.Sizeof(uintptr(0)) == 8 {
		off = 16
	}
	return int(int32(binary.NativeEndian.Uint32(b[off : off+4])))
}
