//go:build linux

package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"gseproc/model"
)

// TestProcTableSumsTheGroup: one read of /proc gives each process group's
// sums; a process in its own group is counted with its whole group, one in
// the agent's group alone.
func TestProcTableSumsTheGroup(t *testing.T) {
	t.Parallel()
	cmd := startGroup(t, "", "sleep 30 & sleep 30 & wait")
	m := readMachine()
	var tab procTable
	waitSeeing(t, slowBox, "the shell and its two sleeps", func() (bool, string) {
		var err error
		if tab, err = readProcTable(); err != nil {
			t.Fatal(err)
		}
		n := groupMembers(tab, cmd.Process.Pid)
		return n == 3, fmt.Sprintf("%d members in the group", n)
	})
	_, rss, threads, err := tab.groupUsage(cmd.Process.Pid, m)
	if err != nil || threads != 3 || rss == 0 {
		t.Fatalf("group of 3: threads %d rss %d err %v", threads, rss, err)
	}
	self := syscall.Getpid()
	_, _, threads, err = tab.groupUsage(self, m)
	if st := tab.procs[self]; err != nil || threads != st.Threads {
		t.Fatalf("the agent's own group counts the process alone: %d vs %d (%v)", threads, st.Threads, err)
	}
	if _, _, _, err := tab.groupUsage(1<<30, m); err == nil {
		t.Fatal("a pid not in the table")
	}
}

// startGroup starts sh -c script in dir (the test's own when empty), the
// leader of a process group of its own, which is killed, and the shell
// waited for, when the test ends.
func startGroup(t *testing.T, dir, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return cmd
}

// groupMembers counts the processes of group pgrp in tab (zombies are
// not in it).
func groupMembers(tab procTable, pgrp int) int {
	n := 0
	for _, st := range tab.procs {
		if st.PGRP == pgrp {
			n++
		}
	}
	return n
}

// BenchmarkReadProcTable is the cost of one sample's read of /proc (it
// was paid once per hosted process in its own group before).
func BenchmarkReadProcTable(b *testing.B) {
	for b.Loop() {
		if _, err := readProcTable(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWaitGoneParksInThePoller: waitGone returns when the process exits
// and, for a live one, when its context ends; a thousand watches do not
// take a thread each (the pidfd waits in the runtime's poller).
func TestWaitGoneParksInThePoller(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pid := cmd.Process.Pid
	st, live := alive(pid)
	if !live {
		t.Fatal("sleep not running")
	}

	// A context that ends: the wait ends with it.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := waitGone(ctx, pid, st.StartTick, 20*time.Millisecond); err == nil {
		t.Fatal("waitGone of a live process returned nil before its context ended")
	}

	// Many waits on the live process, then its exit ends them all.
	const n = 200
	threads0 := threadCount(t)
	done := make(chan error, n)
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	for range n {
		go func() { done <- waitGone(ctx2, pid, st.StartTick, 20*time.Millisecond) }()
	}
	time.Sleep(300 * time.Millisecond) // let them park
	if _, ok, _ := pidfdOpen(pid); ok {
		// Not a thread per wait: far fewer new threads than waits.
		if grown := threadCount(t) - threads0; grown > n/4 {
			t.Errorf("%d waits on a pidfd took %d more threads", n, grown)
		}
	}
	if fd, ok, err := pidfdOpen(pid); ok && err == nil {
		// Non-blocking from the open where the kernel can (no fcntl
		// before the poller takes it), and readable only once it exits.
		if pidfdUnsupported.nonblock != 0 {
			if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK == 0 {
				t.Errorf("pidfd flags %#x (%v): not non-blocking", fl, err)
			}
		}
		if pidfdReadable(uintptr(fd)) {
			t.Error("the pidfd of a live process is readable")
		}
		defer unix.Close(fd)
		defer func() {
			if !pidfdReadable(uintptr(fd)) {
				t.Error("the pidfd of an exited process is not readable")
			}
		}()
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatalf("waitGone after the exit: %v", err)
		}
	}
}

// threadCount is this process's thread count.
func threadCount(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestPidFileSeen: a pid file remembered as read is seen unchanged until
// it is rewritten (same size, same inode, in place), and a file written
// just before its read is not remembered at all.
func TestPidFileSeen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "p.pid")
	if err := os.WriteFile(path, []byte("12345\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pid, fi, err := readPidFileInfo(path)
	if err != nil || pid != 12345 {
		t.Fatalf("read: %d %v", pid, err)
	}
	if s := seePidFile(fi, fi.ModTime().Add(pidFileQuiet/2)); s.ok {
		t.Fatal("a file written just before its read was remembered")
	}
	s := seePidFile(fi, fi.ModTime().Add(time.Second))
	if !s.same(path) {
		t.Fatal("an unchanged file was not seen the same")
	}
	// Rewritten in place with a pid of the same length and its mtime set
	// back to what was read (touch -r, cp -p): only ctime tells.
	time.Sleep(pidFileQuiet)
	if err := os.WriteFile(path, []byte("23456\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if s.same(path) {
		t.Fatal("a pid file rewritten with its mtime set back was seen the same")
	}
	// Read again, then rewritten in place with a pid of the same length.
	if _, fi, err = readPidFileInfo(path); err != nil {
		t.Fatal(err)
	}
	if s = seePidFile(fi, time.Now().Add(time.Second)); !s.same(path) {
		t.Fatal("an unchanged file was not seen the same")
	}
	time.Sleep(pidFileQuiet)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("54321\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if s.same(path) {
		t.Fatal("a rewritten pid file was seen the same")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if s.same(path) {
		t.Fatal("a removed pid file was seen the same")
	}
}

// TestParseStat: /proc/<pid>/stat's fields after the command name (which
// may hold blanks and ')'), read without allocating; a line cut short is
// refused, a field that is not a count (negative) reads 0.
func TestParseStat(t *testing.T) {
	t.Parallel()
	tail := " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	for _, c := range []struct {
		name string
		line string
		want procStat
		bad  bool
	}{
		{"plain", "42 (sleep) S 1 42 42 0 -1 4194304 100 0 0 0 7 3 0 0 20 0 1 0 123456 2236416 128" + tail,
			procStat{PID: 42, State: 'S', PPID: 1, PGRP: 42, Utime: 7, Stime: 3, Threads: 1, StartTick: 123456, RSSPages: 128}, false},
		{"comm with blanks and parens", "42 (a) b) (c\td) R 7 8 9 0 -1 0 0 0 0 0 11 12 0 0 20 0 4 0 99 0 5" + tail,
			procStat{PID: 42, State: 'R', PPID: 7, PGRP: 8, Utime: 11, Stime: 12, Threads: 4, StartTick: 99, RSSPages: 5}, false},
		{"zombie, negative field", "42 (z) Z 1 -3 42 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 5 0 0",
			procStat{PID: 42, State: 'Z', PPID: 1, Utime: 1, Stime: 2, Threads: 1, StartTick: 5}, false},
		{"cut short", "42 (sleep) S 1 42 42 0 -1 4194304 100 0 0 0 7 3 0 0 20 0 1 0 123456 2236416", procStat{}, true},
		{"no comm", "42 sleep S 1", procStat{}, true},
		{"nothing after comm", "42 (sleep)", procStat{}, true},
	} {
		got, err := parseStat(42, []byte(c.line))
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("%s: got %+v, %v; want %+v (refused: %v)", c.name, got, err, c.want, c.bad)
		}
	}
	// This process, read for real: itself, running, started before now.
	st, err := readStat(os.Getpid())
	if err != nil || st.PID != os.Getpid() || st.PPID != os.Getppid() || st.Threads < 1 ||
		st.StartTick == 0 || st.StartTick > uptimeTicks() {
		t.Fatalf("readStat(self): %+v, %v", st, err)
	}
	if _, err := readStat(1 << 30); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("readStat of no process: %v, want os.ErrNotExist", err)
	}
}

// BenchmarkReadStat is one read of /proc/<pid>/stat (several per restart).
func BenchmarkReadStat(b *testing.B) {
	pid := os.Getpid()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readStat(pid); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReadCmdline: a process's command line, its arguments joined by
// spaces, read whole up to model.MaxCmdline, allocating the path (twice: a string,
// then its C form), the answer's string, and one more at most (the race
// detector's). Not parallel: AllocsPerRun.
func TestReadCmdline(t *testing.T) {
	// sleep adds up its arguments: "0" and 3,000 zeros (longer than the
	// stack buffer) keep it alive. Letters (as before) made it refuse them
	// and exit at once: the command line was read only by a look fast
	// enough to come before that, which a loaded machine's did not (a
	// minute of "").
	long := strings.Repeat("0", 3000)
	for _, arg := range []string{"0", long} {
		cmd := exec.Command("sleep", "300", arg)
		if err := cmd.Start(); err == nil {
			// Start returns once the exec is under way: the new command
			// line is set a moment later.
			got := readCmdline(cmd.Process.Pid)
			for deadline := time.Now().Add(time.Minute); got == "" && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
				got = readCmdline(cmd.Process.Pid)
			}
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if got != "sleep 300 "+arg {
				t.Fatalf("command line %.60q, want %.60q", got, "sleep 300 "+arg)
			}
		} else {
			t.Fatal(err)
		}
	}
	if got := readCmdline(1 << 30); got != "" {
		t.Fatalf("command line of no process: %q", got)
	}
	pid := os.Getpid()
	if n := testing.AllocsPerRun(100, func() { _ = readCmdline(pid) }); n > 4 {
		t.Fatalf("readCmdline: %.0f allocations", n)
	}
}

// TestReadCmdlineClipped: a command line longer than model.MaxCmdline
// (here 100,000 bytes of arguments) is clipped to it, ending in "...": it
// was read whole into every heartbeat's status.
func TestReadCmdlineClipped(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("0", 100_000) // sleep adds up its arguments: 0
	cmd := exec.Command("sleep", "300", long)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var got string
	// Start returns once the exec is under way: the new command line is
	// set a moment later.
	waitSeeing(t, slowBox, "sleep's command line", func() (bool, string) {
		got = readCmdline(cmd.Process.Pid)
		return strings.HasPrefix(got, "sleep 300 0"), fmt.Sprintf("%.40q", got)
	})
	want := ("sleep 300 " + long)[:model.MaxCmdline-3] + "..."
	if got != want {
		t.Fatalf("command line of %d bytes %.40q...%q, want %d bytes ending in ...", len(got), got, got[max(0, len(got)-10):], len(want))
	}
}

// TestPidFileNotRegular: a pid path that is not a regular file (a FIFO
// the process's account put there, a device) is refused at once, naming
// the path; opening a FIFO for reading used to wait for a writer, with no
// end, in the start check or in Run's adoption under the agent lock.
func TestPidFileNotRegular(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "p.pid")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Frees a read still waiting for a writer (the old behaviour).
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	type read struct {
		pid int
		fi  os.FileInfo
		err error
	}
	got := make(chan read, 1)
	go func() {
		pid, fi, err := readPidFileInfo(path)
		got <- read{pid, fi, err}
	}()
	select {
	case r := <-got:
		if r.err == nil || r.pid != 0 || r.fi != nil || !strings.Contains(r.err.Error(), path) || !strings.Contains(r.err.Error(), "not a regular file") {
			t.Fatalf("a FIFO as pid file: pid %d, info %v, err %v; want refused, naming it", r.pid, r.fi, r.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("reading a FIFO as pid file did not return within a minute")
	}
	if pid, _, err := readPidFileInfo("/dev/null"); err == nil || pid != 0 || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("/dev/null as pid file: %d %v; want refused", pid, err)
	}
}

// TestGroupTicksKeepReapedMembers: a process group's cpu ticks do not fall
// when a member exits: a child that spun, then was reaped by the shell
// (which then execs a sleep), stays counted in the group's ticks (its
// reaper's cutime and cstime), as does a zombie not reaped yet.
func TestGroupTicksKeepReapedMembers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := startGroup(t, dir, `sh -c 'while [ ! -e stop ]; do :; done'; exec sleep 60`)
	m := readMachine()
	members := func(tab procTable) int { return groupMembers(tab, cmd.Process.Pid) }
	var spun uint64
	eventually(t, 60*time.Second, "the child spinning for 5 ticks", func() bool {
		tab, err := readProcTable()
		if err != nil {
			t.Fatal(err)
		}
		if spun, _, _, err = tab.groupUsage(cmd.Process.Pid, m); err != nil {
			t.Fatal(err)
		}
		return members(tab) == 2 && spun >= 5
	})
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the child reaped, the shell a sleep", func() bool {
		tab, err := readProcTable()
		if err != nil {
			t.Fatal(err)
		}
		st, ok := tab.procs[cmd.Process.Pid]
		if !ok || members(tab) != 1 {
			return false
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(st.PID), "cmdline"))
		if !strings.HasPrefix(string(cmdline), "sleep") {
			return false
		}
		ticks, _, _, err := tab.groupUsage(cmd.Process.Pid, m)
		if err != nil {
			t.Fatal(err)
		}
		if ticks < spun {
			t.Fatalf("the group's ticks fell from %d to %d when its spinning member exited", spun, ticks)
		}
		return true
	})
}
