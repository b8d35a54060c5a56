//go:build linux

package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// argvMatch names the supervised process by its whole command line: the
// program's base name and its arguments, e.g. sleep 86401.123456 (a
// number no other process on the machine carries).
type argvMatch struct {
	prog string
	args []string
}

func (m argvMatch) String() string {
	s := m.prog
	for _, a := range m.args {
		s += " " + a
	}
	return s
}

// matches reports whether a NUL-separated /proc cmdline is m's.
func (m argvMatch) matches(cmdline []byte) bool {
	f := bytes.Split(bytes.TrimSuffix(cmdline, []byte{0}), []byte{0})
	if len(f) != 1+len(m.args) || filepath.Base(string(f[0])) != m.prog {
		return false
	}
	for i, a := range m.args {
		if string(f[1+i]) != a {
			return false
		}
	}
	return true
}

// pidMatches reads pid's command line and matches it.
func (m argvMatch) pidMatches(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && m.matches(b)
}

// findProcs lists the live processes whose command line is m's.
func findProcs(m argvMatch) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		if m.pidMatches(pid) && !zombie(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// zombie reports whether pid has exited and waits for its parent.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

// restartClock times one kill -9 of a supervised process until its
// replacement has exec'ed, the same way whatever the supervisor.
type restartClock interface {
	// killToExec SIGKILLs old and waits (until ctx ends) for a process
	// other than old whose command line is m's; it returns the time
	// between the two and the new pid.
	killToExec(ctx context.Context, old int, m argvMatch) (time.Duration, int, error)
	// method says what the figure spans and how it is taken.
	method() string
	close()
}

// newRestartClock uses the kernel's process events (the netlink process
// connector: needs root) when it can, timing the old process's exit to
// the new one's exec with the kernel's own timestamps; else it polls
// /proc every millisecond from the kill.
func newRestartClock() restartClock {
	if c, err := openProcEvents(); err == nil {
		return c
	}
	return pollClock{every: time.Millisecond}
}

// pollClock polls /proc for the new process.
type pollClock struct{ every time.Duration }

func (pollClock) method() string { return "kill to exec seen (1 ms /proc poll)" }
func (pollClock) close()         {}

func (c pollClock) killToExec(ctx context.Context, old int, m argvMatch) (time.Duration, int, error) {
	before := map[int]bool{}
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			if pid, err := strconv.Atoi(e.Name()); err == nil && pid != old {
				before[pid] = true
			}
		}
	}
	t0 := time.Now()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		return 0, 0, fmt.Errorf("kill -9 %d: %w", old, err)
	}
	for {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return 0, 0, fmt.Errorf("read /proc: %w", err)
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == old || before[pid] {
				continue
			}
			// A new process not yet exec'ed shows its parent's command
			// line: looked at again on the next round.
			if m.pidMatches(pid) {
				return time.Since(t0), pid, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("no new %q after kill -9 %d: %w", m, old, ctx.Err())
		case <-time.After(c.every):
		}
	}
}

// procEvents is a netlink process-connector socket: the kernel sends an
// event, with its monotonic timestamp, for every exec and exit.
type procEvents struct{ fd int }

// Process connector constants (linux/connector.h, linux/cn_proc.h).
const (
	cnIdxProc       = 1
	cnValProc       = 1
	procCnMcastOn   = 1
	procEventExec   = 0x00000002
	procEventExit   = 0x80000000
	cnMsgLen        = 20 // struct cn_msg without its data
	procEventHdrLen = 16 // what, cpu, timestamp_ns
)

func openProcEvents() (*procEvents, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, fmt.Errorf("process events: socket: %w", err)
	}
	fail := func(what string, err error) (*procEvents, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("process events: %s: %w", what, err)
	}
	// A busy machine execs a lot: room for bursts (root may force it).
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}); err != nil {
		return fail("bind", err)
	}
	msg := make([]byte, unix.NLMSG_HDRLEN+cnMsgLen+4)
	le := binary.LittleEndian
	le.PutUint32(msg[0:], uint32(len(msg)))
	le.PutUint16(msg[4:], unix.NLMSG_DONE)
	le.PutUint32(msg[12:], uint32(os.Getpid()))
	cn := msg[unix.NLMSG_HDRLEN:]
	le.PutUint32(cn[0:], cnIdxProc)
	le.PutUint32(cn[4:], cnValProc)
	le.PutUint16(cn[16:], 4)
	le.PutUint32(cn[cnMsgLen:], procCnMcastOn)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fail("listen", err)
	}
	// Only root receives the events: make sure one arrives (ours).
	w := &procEvents{fd: fd}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := exec1(); err != nil {
		return fail("probe exec", err)
	}
	for {
		ev, err := w.next(ctx)
		if err != nil {
			return fail("no event for a probe exec (not root?)", err)
		}
		if ev.what == procEventExec {
			return w, nil
		}
	}
}

// exec1 runs a process that execs, so that an exec event follows.
func exec1() error {
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		return err
	}
	_, err = p.Wait()
	return err
}

func (w *procEvents) method() string {
	return "exit to exec (kernel timestamps)"
}

func (w *procEvents) close() { unix.Close(w.fd) }

type procEvent struct {
	what      uint32
	pid, tgid int
	ts        time.Duration // CLOCK_MONOTONIC
}

// errLost is a receive queue overflow: events were lost.
var errLost = errors.New("process events lost (receive queue overflow)")

// next returns the next exec or exit event of a whole process.
func (w *procEvents) next(ctx context.Context) (procEvent, error) {
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(w.fd, buf, 0)
		switch {
		case errors.Is(err, unix.EAGAIN):
			wait := 100 * time.Millisecond
			if d, ok := ctx.Deadline(); ok {
				wait = min(wait, time.Until(d))
			}
			if ctx.Err() != nil {
				return procEvent{}, ctx.Err()
			}
			fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
			_, _ = unix.Poll(fds, int(max(wait, time.Millisecond)/time.Millisecond))
			continue
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOBUFS):
			return procEvent{}, errLost
		case err != nil:
			return procEvent{}, fmt.Errorf("process events: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			ev, ok := parseProcEvent(m.Data)
			if ok {
				return ev, nil // one event per message from the connector
			}
		}
	}
}

// parseProcEvent decodes a cn_msg holding a proc_event: exec and exit of
// whole processes (a thread's exit is skipped).
func parseProcEvent(b []byte) (procEvent, bool) {
	le := binary.LittleEndian
	if len(b) < cnMsgLen+procEventHdrLen+8 {
		return procEvent{}, false
	}
	e := b[cnMsgLen:]
	ev := procEvent{
		what: le.Uint32(e[0:]),
		ts:   time.Duration(le.Uint64(e[8:])),
		pid:  int(int32(le.Uint32(e[16:]))),
		tgid: int(int32(le.Uint32(e[20:]))),
	}
	if (ev.what != procEventExec && ev.what != procEventExit) || ev.pid != ev.tgid {
		return procEvent{}, false
	}
	return ev, true
}

func monotonic() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}

// settleExecs is how long after the first matching exec a later exec of
// the same pid is waited for: a run script (sh, then exec sleep) execs
// twice, and the command line read at the first may already be the
// second's.
const settleExecs = 30 * time.Millisecond

func (w *procEvents) killToExec(ctx context.Context, old int, m argvMatch) (time.Duration, int, error) {
	// What is queued happened before the kill.
	drain, cancel := context.WithTimeout(ctx, 0)
	for range 1 << 16 {
		if _, err := w.next(drain); err != nil && !errors.Is(err, errLost) {
			break
		}
	}
	cancel()
	t0 := monotonic()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		return 0, 0, fmt.Errorf("kill -9 %d: %w", old, err)
	}
	var exited, execed time.Duration
	newPid := 0
	wctx := ctx
	for {
		ev, err := w.next(wctx)
		if err != nil {
			if newPid != 0 && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				break // no later exec of the new pid
			}
			return 0, 0, fmt.Errorf("after kill -9 %d: %w", old, err)
		}
		switch {
		case ev.what == procEventExit && ev.pid == old:
			exited = ev.ts
		case ev.what == procEventExec && newPid == 0 && ev.pid != old && m.pidMatches(ev.pid):
			newPid, execed = ev.pid, ev.ts
			var stop context.CancelFunc
			wctx, stop = context.WithTimeout(ctx, settleExecs)
			defer stop()
		case ev.what == procEventExec && ev.pid == newPid:
			execed = ev.ts
		}
	}
	if exited == 0 || exited > execed {
		exited = t0 // the exit event was lost: from the kill
	}
	return execed - exited, newPid, nil
}
