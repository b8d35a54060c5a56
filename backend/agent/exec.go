//go:build linux

package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
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
// group. Its output goes to an unlinked temporary file, not a pipe, so a
// daemon it leaves behind neither blocks the wait nor dies of SIGPIPE.
type child struct {
	cmd    *exec.Cmd
	pid    int
	pidfd  int // -1 where pidfd_open is unavailable
	tick   uint64
	out    *os.File
	launch uint64 // uptime ticks just before the launch
	at     time.Time
	status int  // exit status, valid once exited
	exited bool // reaped
}

// launch starts cmd for p with sh -c in setup_path as the account.
func launch(p model.Process, command string, env []string) (*child, error) {
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
	out, err := os.CreateTemp("", "gseproc-out-*")
	if err != nil {
		return nil, fmt.Errorf("capture output: %w", err)
	}
	os.Remove(out.Name())
	if cred != nil {
		// The command's account must be able to write its output.
		_ = out.Chown(int(cred.Uid), int(cred.Gid))
	}
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if cred != nil {
		cmd.Env = append(cmd.Env, accountEnv(p.Spec.Identity.User)...)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	c := &child{cmd: cmd, out: out, pidfd: -1, launch: uptimeTicks(), at: time.Now()}
	children.start() // an orphan reaper must not take it before its wait
	if err := cmd.Start(); err != nil {
		children.started(0)
		out.Close()
		return nil, fmt.Errorf("run %q as %s: %w", command, p.Account(), err)
	}
	c.pid = cmd.Process.Pid
	children.started(c.pid)
	if st, err := readStat(c.pid); err == nil {
		c.tick = st.StartTick
	}
	if fd, ok, err := pidfdOpen(c.pid); ok && err == nil {
		c.pidfd = fd
	}
	return c, nil
}

// poll waits up to d for the child to exit and reaps it when it has.
func (c *child) poll(d time.Duration) bool {
	if c.exited {
		return true
	}
	if c.pidfd >= 0 {
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
	if c.pidfd >= 0 {
		unix.Close(c.pidfd)
		c.pidfd = -1
	}
}

// output returns the tail of what the command printed (limit bytes).
func (c *child) output(limit int) string {
	if c.out == nil {
		return ""
	}
	fi, err := c.out.Stat()
	if err != nil {
		return ""
	}
	off := fi.Size() - int64(limit)
	if off < 0 {
		off = 0
	}
	b := make([]byte, fi.Size()-off)
	n, _ := c.out.ReadAt(b, off)
	s := strings.ToValidUTF8(string(b[:n]), "?")
	if off > 0 {
		s = "..." + s
	}
	return strings.TrimSpace(s)
}

// close releases the output file and the pidfd (the child keeps running
// if alive; poll then falls back to /proc).
func (c *child) close() {
	if c.out != nil {
		c.out.Close()
		c.out = nil
	}
	if c.pidfd >= 0 {
		unix.Close(c.pidfd)
		c.pidfd = -1
	}
}

// run launches command and waits for it to finish within timeout or ctx;
// on timeout the command's process group is killed. It returns the exit
// status and the output tail.
func (a *Agent) run(ctx context.Context, p model.Process, command string, env []string, timeout time.Duration, limit int) (int, string, error) {
	c, err := launch(p, command, env)
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
