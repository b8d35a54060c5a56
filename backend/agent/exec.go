//go:build linux

package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"gseproc/model"
)

// errShellExt is the result for a cmd_shell_ext this OS cannot run
// (model.Control.UnsupportedShell says it).
type errShellExt string

func (e errShellExt) Error() string { return string(e) }

// credential returns the SysProcAttr credential for the process's account:
// nil when no switch is needed; an error naming the account when it does
// not exist or the agent (not root) cannot switch to it.
func credential(p model.Process) (*syscall.Credential, error) {
	name := p.Spec.Identity.User
	if name == "" {
		return nil, nil // the agent's own account
	}
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if errors.As(err, &unknown) {
			return nil, fmt.Errorf("account %q: no such user on this host", name)
		}
		return nil, fmt.Errorf("account %q: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("account %q: uid %q gid %q are not numeric", name, u.Uid, u.Gid)
	}
	self := os.Geteuid()
	if int(uid) == self {
		return nil, nil
	}
	if self != 0 {
		return nil, fmt.Errorf("account %q: cannot switch to uid %d: the agent runs as uid %d, not root", name, uid, self)
	}
	var groups []uint32
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				groups = append(groups, uint32(n))
			}
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}, nil
}

// accountEnv is the login environment of the account commands switch to.
func accountEnv(name string) []string {
	u, err := user.Lookup(name)
	if err != nil {
		return nil
	}
	return []string{"HOME=" + u.HomeDir, "USER=" + u.Username, "LOGNAME=" + u.Username}
}

// child is a command the agent launched: sh -c CMD in its own process
// group. Its output goes to files, not a pipe, so a daemon it leaves
// behind neither blocks the wait nor dies of SIGPIPE (nor of an agent
// restart): an unlinked temporary file, or for a start command with
// capture on, the process's captured stdout and stderr files (opened for
// appending, so that a rotation that empties them in place is followed).
type child struct {
	cmd   *exec.Cmd
	pid   int
	pidfd int // -1 where pidfd_open is unavailable
	// pf is pidfd registered with the runtime's poller (nil where it is
	// refused): a wait for the exit parks the goroutine there. A wait in
	// poll(2) blocks its thread: the runtime hands the thread's P to
	// another, and sysmon, finding Ps taken back from system calls, wakes
	// every 20 us for a while after each; in a crash storm that spinning
	// cost more cpu than the launches.
	pf     *os.File // owns pidfd
	polled bool
	tick   uint64    // start time, 0: not read yet (startTick)
	outs   []outFile // what the command prints, in the order output reads them
	launch uint64    // uptime ticks just before the launch
	at     time.Time
	status int  // exit status, valid once exited
	exited bool // reaped
}

// outFile is a file a child prints to and where its output began.
type outFile struct {
	f    *os.File
	from int64
}

// launch starts cmd for p with sh -c in setup_path as the account; with
// capture (its stdout and stderr paths), the command and what it leaves
// running print there.
func launch(p model.Process, command string, env []string, capture *captureFiles) (*child, error) {
	if msg := p.Spec.Control.UnsupportedShell(); msg != "" {
		return nil, errShellExt(msg)
	}
	dir := p.Spec.Identity.SetupPath
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("setup_path %s: not a directory on this host", dir)
	}
	cred, err := credential(p)
	if err != nil {
		return nil, err
	}
	outs, err := openOutputs(capture, cred)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if cred != nil {
		cmd.Env = append(cmd.Env, accountEnv(p.Spec.Identity.User)...)
	}
	if null, err := devNull(); err == nil {
		cmd.Stdin = null // else exec opens /dev/null itself
	}
	cmd.Stdout, cmd.Stderr = outs[0].f, outs[len(outs)-1].f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	forks.enter() // the fork holds a P until the child execs (forkgate.go)
	c := &child{cmd: cmd, outs: outs, pidfd: -1, launch: uptimeTicks(), at: time.Now()}
	children.start() // an orphan reaper must not take it before its wait
	if err := cmd.Start(); err != nil {
		children.started(0)
		forks.leave()
		c.close()
		return nil, fmt.Errorf("run %q as %s: %w", command, p.Account(), err)
	}
	c.pid = cmd.Process.Pid
	children.started(c.pid)
	forks.leave()
	if fd, ok, err := pidfdOpen(c.pid); ok && err == nil {
		c.pidfd = fd
		c.pf, c.polled = pidfdFile(fd)
	}
	return c, nil
}

// devNull is /dev/null opened once for reading, every command's stdin:
// an exec.Cmd without a Stdin opens (and registers with the poller, and
// closes) its own at every launch. One per process, as the children are.
var devNull = sync.OnceValues(func() (*os.File, error) { return os.Open(os.DevNull) })

// startTick is the child's start time (/proc/<pid>/stat), read at the
// first call: only a command that is itself the process a unit tracks
// (a job's run, a start_cmd that execs its process) needs it, not a
// shell that starts a daemon (a /proc read per launch before). Only
// until the child is reaped: a zombie keeps its pid, a reaped one's may
// be another process's.
func (c *child) startTick() uint64 {
	if c.tick == 0 && !c.exited {
		if st, err := readStat(c.pid); err == nil {
			c.tick = st.StartTick
		}
	}
	return c.tick
}

// pidfdFile makes pidfd fd an os.File, which owns it from then on,
// registered with the runtime's poller where it takes it (polled).
func pidfdFile(fd int) (f *os.File, polled bool) {
	if pidfdUnsupported.nonblock == 0 { // else opened so (pidfdOpen), or a dup of one
		_ = unix.SetNonblock(fd, true) // os.NewFile registers a non-blocking fd
	}
	f = os.NewFile(uintptr(fd), "pidfd")
	return f, f.SetReadDeadline(time.Time{}) == nil
}

// openOutputs opens where a command prints: capture's stdout and stderr
// files, or one unlinked temporary file for both.
func openOutputs(capture *captureFiles, cred *syscall.Credential) ([]outFile, error) {
	own := func(f *os.File) {
		if cred != nil {
			// The command's account must be able to write its output.
			_ = f.Chown(int(cred.Uid), int(cred.Gid))
		}
	}
	if capture == nil {
		out, err := os.CreateTemp("", "gseproc-out-*")
		if err != nil {
			return nil, fmt.Errorf("capture output: %w", err)
		}
		os.Remove(out.Name())
		own(out)
		return []outFile{{f: out}}, nil
	}
	var outs []outFile
	for _, path := range []string{capture.stdout, capture.stderr} {
		f, err := openCapture(path)
		if err != nil {
			for _, o := range outs {
				o.f.Close()
			}
			return nil, fmt.Errorf("capture output: %w", err)
		}
		own(f)
		var from int64
		if fi, err := f.Stat(); err == nil {
			from = fi.Size()
		}
		outs = append(outs, outFile{f: f, from: from})
	}
	return outs, nil
}

// openCapture opens a captured stream's file for appending, creating it
// (and its directory, when that is missing) as needed. It opens with a
// plain open(2) and os.NewFile: os.OpenFile tries each file on the
// runtime's poller (four fcntl and an epoll_ctl for a regular file, two
// files per launch), and the directory is made only when the open finds
// it missing, not looked up at every launch. A symbolic link there is
// refused (O_NOFOLLOW, as the log reader's open): the file is made the
// command's account's (openOutputs), which a link would do to its target.
func openCapture(path string) (*os.File, error) {
	const flags = syscall.O_RDWR | syscall.O_CREAT | syscall.O_APPEND | syscall.O_CLOEXEC | syscall.O_NOFOLLOW
	fd, err := sysOpen(path, flags, 0o640)
	if errors.Is(err, syscall.ENOENT) {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, err
		}
		fd, err = sysOpen(path, flags, 0o640)
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// poll waits up to d for the child to exit and reaps it when it has.
func (c *child) poll(d time.Duration) bool {
	if c.exited {
		return true
	}
	if c.polled {
		if !c.exitedWithin(context.Background(), d) {
			return false
		}
	} else if c.pidfd >= 0 {
		fds := []unix.PollFd{{Fd: int32(c.pidfd), Events: unix.POLLIN}}
		n, _ := unix.Poll(fds, int(d/time.Millisecond))
		if n <= 0 {
			return false
		}
	} else {
		// No pidfd: our unreaped child shows as a zombie once it exits.
		deadline := time.Now().Add(d)
		for {
			if _, live := alive(c.pid); !live {
				break
			}
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	c.reap()
	return true
}

// wait waits up to d, or until ctx ends, for the child to exit, and reaps
// it when it has; it reports whether it has exited. The goroutine parks
// in the runtime's poller (waitPidfd), not in poll(2).
func (c *child) wait(ctx context.Context, d time.Duration) bool {
	if c.exited {
		if d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}
		return true
	}
	if c.pidfd < 0 || d <= 0 {
		// No pidfd: poll's /proc look, in short steps so that ctx's end
		// is seen soon; the caller comes back.
		return c.poll(min(max(d, 0), 50*time.Millisecond))
	}
	if c.polled {
		if !c.exitedWithin(ctx, d) {
			return false
		}
		return c.poll(0)
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if waitPidfd(wctx, c.pidfd, c.pid) != nil {
		return false
	}
	return c.poll(0)
}

// exitedWithin waits up to d (0: only looks), or until ctx ends, for
// the child to exit, parked in the runtime's poller on its pidfd (which
// is readable once the process has exited); c.polled must hold.
func (c *child) exitedWithin(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		rc, err := c.pf.SyscallConn()
		if err != nil {
			return false
		}
		gone := false
		_ = rc.Control(func(fd uintptr) { gone = pidfdReadable(fd) })
		return gone
	}
	gone, _ := parkPidfd(ctx, c.pf, time.Now().Add(d))
	return gone
}

// reap collects the exit status of a child that has exited.
func (c *child) reap() {
	if c.exited {
		return
	}
	err := c.cmd.Wait()
	children.waited(c.pid)
	c.exited = true
	c.status = 0
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			c.status = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				c.status = 128 + int(ws.Signal())
			}
		} else {
			c.status = -1
		}
	}
	c.closePidfd()
}

// closePidfd closes the child's pidfd, if open.
func (c *child) closePidfd() {
	if c.pf != nil {
		c.pf.Close()
		c.pf, c.polled = nil, false
	} else if c.pidfd >= 0 {
		unix.Close(c.pidfd)
	}
	c.pidfd = -1
}

// output returns the tail of what the command printed (limit bytes):
// its stdout then its stderr when captured apart.
func (c *child) output(limit int) string {
	var b []byte
	cut := false
	for _, o := range c.outs {
		if o.f == nil {
			continue
		}
		fi, err := o.f.Stat()
		if err != nil {
			continue
		}
		from := o.from
		if fi.Size() < from { // rotated (emptied in place) meanwhile
			from = 0
		}
		if fi.Size()-from > int64(limit) {
			from, cut = fi.Size()-int64(limit), true
		}
		part := make([]byte, fi.Size()-from)
		n, _ := o.f.ReadAt(part, from)
		b = append(b, part[:n]...)
	}
	if len(b) > limit {
		b, cut = b[len(b)-limit:], true
	}
	s := strings.ToValidUTF8(string(b), "?")
	if cut {
		s = "..." + s
	}
	return strings.TrimSpace(s)
}

// close releases the output files and the pidfd (the child keeps running
// if alive; poll then falls back to /proc).
func (c *child) close() {
	for i := range c.outs {
		if c.outs[i].f != nil {
			c.outs[i].f.Close()
			c.outs[i].f = nil
		}
	}
	c.closePidfd()
}

// run launches command and waits for it to finish within timeout or ctx;
// on timeout the command's process group is killed. It returns the exit
// status and the output tail.
func (a *Agent) run(ctx context.Context, p model.Process, command string, env []string, timeout time.Duration, limit int) (int, string, error) {
	c, err := launch(p, command, env, nil)
	if err != nil {
		return -1, "", err
	}
	defer a.reap(c) // reaped by now, but for a killed one slow to exit
	deadline := time.Now().Add(timeout)
	for !c.poll(50 * time.Millisecond) {
		if ctx.Err() != nil || time.Now().After(deadline) {
			_ = syscall.Kill(-c.pid, syscall.SIGKILL)
			c.poll(time.Second)
			why := fmt.Sprintf("timed out after %s (op_timeout)", timeout.Round(time.Millisecond))
			if ctx.Err() != nil {
				why = fmt.Sprintf("stopped (process group %d killed): %v", c.pid, context.Cause(ctx))
			}
			return -1, c.output(limit), fmt.Errorf("command %q %s", command, why)
		}
	}
	return c.status, c.output(limit), nil
}
