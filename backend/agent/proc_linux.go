package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"gseproc/model"
)

// clkTck is USER_HZ, the unit of /proc/<pid>/stat times (100 on every
// Linux architecture gseproc runs on).
const clkTck = 100

// procStat is what gseproc reads from /proc/<pid>/stat.
type procStat struct {
	PID       int
	State     byte   // R, S, D, Z, ...
	PPID      int    // parent
	PGRP      int    // process group
	Utime     uint64 // ticks
	Stime     uint64 // ticks
	Cutime    uint64 // ticks of its children it has waited for (and theirs)
	Cstime    uint64 // ticks
	Threads   int
	StartTick uint64 // ticks after boot
	RSSPages  uint64
}

// readStat parses /proc/<pid>/stat. A missing process is os.ErrNotExist.
// It reads with plain system calls into a buffer on the stack (open,
// read, close): an os.File costs a poller registration attempt, an fstat
// and a finalizer, and this runs several times per restart and for every
// process at each sample.
func readStat(pid int) (procStat, error) {
	if pid <= 0 {
		return procStat{}, os.ErrNotExist
	}
	var path [32]byte
	b := append(strconv.AppendInt(append(path[:0], "/proc/"...), int64(pid), 10), "/stat\x00"...)
	var buf [1024]byte
	n, err := readProc(b, buf[:])
	if err != nil {
		if errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.ENOENT) {
			err = os.ErrNotExist
		}
		return procStat{}, err
	}
	return parseStat(pid, buf[:n])
}

// readProc reads the /proc file at path (NUL-terminated) into buf (what
// does not fit is left unread) with raw system calls: open, read, close,
// none of which waits on /proc. A raw call leaves the goroutine's P as
// it is; a plain one (syscall.Syscall) marks it in a system call, and
// the first after the scheduler went idle wakes its monitor (sysmon),
// which then polls every 20 us for a millisecond or more: in a crash
// storm, where the reads come a few at a time between idle spells, those
// polls and their context switches were a sixth of the agent's cpu.
// Errors are *os.PathError as os.ReadFile's.
func readProc(path []byte, buf []byte) (int, error) {
	name := func() string { return string(path[:len(path)-1]) }
	var fd uintptr
	cwd := unix.AT_FDCWD // not a constant: a negative one does not convert
	for {
		r, _, errno := syscall.RawSyscall6(syscall.SYS_OPENAT, uintptr(cwd), uintptr(unsafe.Pointer(&path[0])),
			uintptr(syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK), 0, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return 0, &os.PathError{Op: "open", Path: name(), Err: errno}
		}
		fd = r
		break
	}
	defer syscall.RawSyscall(syscall.SYS_CLOSE, fd, 0, 0)
	n := 0
	for n < len(buf) {
		m, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[n])), uintptr(len(buf)-n))
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return n, &os.PathError{Op: "read", Path: name(), Err: errno}
		}
		if m == 0 {
			break
		}
		n += int(m)
	}
	return n, nil
}

// readSmall reads the file at path into buf (a command line: what does
// not fit is left unread) with open, read and close, plain system calls:
// reading another process's memory may wait on its locks; errors are
// *os.PathError as os.ReadFile's.
func readSmall(path string, buf []byte) (int, error) {
	fd, err := openRead(path)
	if err != nil {
		return 0, err
	}
	defer syscall.Close(fd)
	return readFd(fd, path, buf)
}

// openRead opens path for reading without waiting: O_NONBLOCK, so that a
// FIFO (a pid path is the process account's to write) opens at once
// rather than waiting for a writer; a regular or /proc file reads as
// without it.
func openRead(path string) (int, error) {
	return sysOpen(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
}

// sysOpen is open(2) of path, made again when a signal interrupts it;
// errors are *os.PathError as os.OpenFile's. The descriptor is the
// caller's, not on the runtime's poller (os.NewFile of it neither).
func sysOpen(path string, flags int, perm uint32) (int, error) {
	for {
		fd, err := syscall.Open(path, flags, perm)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}

// readFd reads fd until buf is full or the end of the file.
func readFd(fd int, path string, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return n, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m <= 0 {
			break
		}
		n += m
	}
	return n, nil
}

func parseStat(pid int, b []byte) (procStat, error) {
	// The comm field is in parentheses and may contain spaces and ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procStat{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	// f[k] is field k+3 (f[0] is the state), split on blanks in place.
	var f [22][]byte
	n := 0
	for rest := b[i+2:]; n < len(f); {
		j := 0
		for j < len(rest) && isBlank(rest[j]) {
			j++
		}
		rest = rest[j:]
		if len(rest) == 0 {
			break
		}
		j = 0
		for j < len(rest) && !isBlank(rest[j]) {
			j++
		}
		f[n], rest = rest[:j], rest[j:]
		n++
	}
	if n < len(f) {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, n+2)
	}
	u := func(k int) uint64 {
		var v uint64
		for _, c := range f[k-3] {
			if c < '0' || c > '9' {
				return 0 // as a failed ParseUint: a negative or odd field
			}
			v = v*10 + uint64(c-'0')
		}
		return v
	}
	return procStat{
		PID: pid, State: f[0][0], PPID: int(u(4)), PGRP: int(u(5)),
		Utime: u(14), Stime: u(15), Cutime: u(16), Cstime: u(17), Threads: int(u(20)), StartTick: u(22), RSSPages: u(24),
	}, nil
}

func isBlank(c byte) bool { return c == ' ' || c == '\n' || c == '\t' }

// alive reports whether pid is a live (non-zombie) process, with its stat.
func alive(pid int) (procStat, bool) {
	st, err := readStat(pid)
	if err != nil || st.State == 'Z' || st.State == 'X' || st.State == 'x' {
		return st, false
	}
	return st, true
}

// uptimeTicks is now in /proc/<pid>/stat's clock: ticks since boot.
func uptimeTicks() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return uint64(ts.Sec)*clkTck + uint64(ts.Nsec)/(1e9/clkTck)
}

// tickTime converts a start tick to wall time.
func tickTime(tick uint64) time.Time {
	now := uptimeTicks()
	return time.Now().Add(-time.Duration(int64(now)-int64(tick)) * (time.Second / clkTck)).Truncate(10 * time.Millisecond)
}

// readCmdline is pid's command line, its arguments joined by spaces, at
// most model.MaxCmdline bytes (a longer one clipped, ending in "..."). A
// status op reads it: into a buffer on the stack (readSmall), the one
// string made being the answer. It was read whole, however long: a
// process's own (megabytes of arguments) went into every heartbeat.
func readCmdline(pid int) string {
	var path [40]byte
	p := append(strconv.AppendInt(append(path[:0], "/proc/"...), int64(pid), 10), "/cmdline"...)
	var buf [model.MaxCmdline + 1]byte
	n, err := readSmall(string(p), buf[:])
	if err != nil {
		return ""
	}
	b := buf[:n]
	if n > model.MaxCmdline {
		b = append(b[:model.MaxCmdline-3], "..."...)
	}
	for i, c := range b {
		if c == 0 {
			b[i] = ' '
		}
	}
	return string(bytes.TrimSpace(b))
}

// hasEnv reports whether pid's environment holds every one of vars
// (NAME=value); false when it cannot be read.
func hasEnv(pid int, vars ...string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	have := map[string]bool{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		have[string(kv)] = true
	}
	for _, v := range vars {
		if !have[v] {
			return false
		}
	}
	return true
}

// machine holds the figures limits are relative to.
type machine struct {
	ncpu     int
	memTotal uint64 // bytes
	pageSize uint64
	selfPGRP int
}

func readMachine() machine {
	m := machine{ncpu: 1, pageSize: uint64(os.Getpagesize()), selfPGRP: syscall.Getpgrp()}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err == nil && set.Count() > 0 {
		m.ncpu = set.Count()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				f := strings.Fields(rest)
				if len(f) > 0 {
					kb, _ := strconv.ParseUint(f[0], 10, 64)
					m.memTotal = kb * 1024
				}
			}
		}
	}
	return m
}

// procTable is one read of /proc: every process's stat, and the sums of
// each process group. One sample of all hosted processes reads it once.
type procTable struct {
	procs  map[int]procStat
	groups map[int]groupSum
}

type groupSum struct {
	ticks, rssPages uint64
	threads         int
}

// readProcTable reads /proc/<pid>/stat of every process once.
func readProcTable() (procTable, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return procTable{}, fmt.Errorf("read /proc: %w", err)
	}
	t := procTable{procs: make(map[int]procStat, len(ents)), groups: map[int]groupSum{}}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue
		}
		g := t.groups[st.PGRP]
		g.ticks += st.ticks()
		if st.State == 'Z' {
			// Not a process any more, but its ticks are its group's
			// until its parent reaps it (and counts them).
			t.groups[st.PGRP] = g
			continue
		}
		t.procs[pid] = st
		g.rssPages += st.RSSPages
		g.threads += st.Threads
		t.groups[st.PGRP] = g
	}
	return t, nil
}

// ticks is the cpu time of the process and of the children it reaped:
// a sum that only grows while the process lives, whichever of its
// children come and go (a child's ticks move into its reaper's cutime
// and cstime when it is reaped).
func (st procStat) ticks() uint64 { return st.Utime + st.Stime + st.Cutime + st.Cstime }

// groupUsage sums cpu ticks, rss pages and threads of pid's process group
// (when the group is not the agent's own) or of pid alone. The ticks
// count the children the members reaped and the members not reaped yet
// (zombies): a member that exits leaves its ticks counted, so the sum
// does not fall when one does. It did, and the sampler then kept the
// previous sample's cpu: a shell forking a sleep 20 times a second, one
// clock tick charged to one sleep, read 5% of the machine on that sample
// and again on the next, the next sleep having none.
func (t procTable) groupUsage(pid int, m machine) (ticks, rssPages uint64, threads int, err error) {
	st, ok := t.procs[pid]
	if !ok {
		return 0, 0, 0, os.ErrNotExist
	}
	if st.PGRP <= 1 || st.PGRP == m.selfPGRP {
		return st.ticks(), st.RSSPages, st.Threads, nil
	}
	g := t.groups[st.PGRP]
	return g.ticks, g.rssPages, g.threads, nil
}

// readPidFile returns the pid in path and the file's modification time.
func readPidFile(path string) (int, time.Time, error) {
	pid, fi, err := readPidFileInfo(path)
	if fi == nil {
		return pid, time.Time{}, err
	}
	return pid, fi.ModTime(), err
}

// readPidFileInfo returns the pid in path and what the file was when it
// was read (its fstat before the read; nil when it could not be opened or
// is not a regular file, which is refused unread: a FIFO or a device
// there is no pid file, and reading one may not end).
// Plain system calls, as readStat: a start check reads it several times.
func readPidFileInfo(path string) (int, os.FileInfo, error) {
	fd, err := openRead(path)
	if err != nil {
		return 0, nil, err
	}
	defer syscall.Close(fd)
	fi := &statInfo{name: path}
	if err := syscall.Fstat(fd, &fi.st); err != nil {
		return 0, nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if fi.st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0, nil, fmt.Errorf("pid file %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	var buf [64]byte
	n, _ := readFd(fd, path, buf[:])
	s := strings.TrimSpace(string(buf[:n]))
	if i := strings.IndexAny(s, " \t\n"); i >= 0 {
		s = s[:i]
	}
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		return 0, fi, fmt.Errorf("pid file %s: %q is not a pid", path, s)
	}
	return pid, fi, nil
}

// statInfo is an os.FileInfo from an fstat (Sys: *syscall.Stat_t).
type statInfo struct {
	name string
	st   syscall.Stat_t
}

func (fi *statInfo) Name() string       { return filepath.Base(fi.name) }
func (fi *statInfo) Size() int64        { return fi.st.Size }
func (fi *statInfo) ModTime() time.Time { return time.Unix(fi.st.Mtim.Unix()) }
func (fi *statInfo) IsDir() bool        { return fi.st.Mode&syscall.S_IFMT == syscall.S_IFDIR }
func (fi *statInfo) Sys() any           { return &fi.st }
func (fi *statInfo) Mode() os.FileMode {
	m := os.FileMode(fi.st.Mode & 0o777)
	switch fi.st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		m |= os.ModeDir
	case syscall.S_IFLNK:
		m |= os.ModeSymlink
	case syscall.S_IFIFO:
		m |= os.ModeNamedPipe
	case syscall.S_IFSOCK:
		m |= os.ModeSocket
	case syscall.S_IFCHR:
		m |= os.ModeDevice | os.ModeCharDevice
	case syscall.S_IFBLK:
		m |= os.ModeDevice
	}
	return m
}

// errUnchanged: the pid file is as it was when last read.
var errUnchanged = errors.New("pid file unchanged")

// pidFileSeen is a pid file a start check read and found naming no
// process of this start (not running, or started before it): while the
// file stays the same (inode, size, modification time) the verdict
// stands, and the check stats it instead of reading it and /proc again.
// ctime is compared as well as mtime: anyone may set mtime back (touch -r,
// cp -p, a restore), nobody can set ctime, and every write, rename onto
// or utimes of the file moves it. Only a file changed well before it was
// read is remembered: the kernel stamps both from a coarse clock (one
// tick, at most 10 ms), so a rewrite within the same tick as the write
// read would look unchanged.
type pidFileSeen struct {
	ok    bool
	ino   uint64
	size  int64
	mtime int64 // ns
	ctime int64 // ns
}

// pidFileQuiet is how long before its read a pid file must have been
// written to be remembered: several ticks of the coarse clock.
const pidFileQuiet = 50 * time.Millisecond

func seePidFile(fi os.FileInfo, readAt time.Time) pidFileSeen {
	if fi == nil {
		return pidFileSeen{}
	}
	st, isStat := fi.Sys().(*syscall.Stat_t)
	if !isStat || readAt.Sub(fi.ModTime()) < pidFileQuiet ||
		readAt.Sub(time.Unix(0, st.Ctim.Nano())) < pidFileQuiet {
		return pidFileSeen{}
	}
	return pidFileSeen{ok: true, ino: st.Ino, size: fi.Size(), mtime: fi.ModTime().UnixNano(), ctime: st.Ctim.Nano()}
}

// same reports whether path is still the file seen.
func (s pidFileSeen) same(path string) bool {
	if !s.ok {
		return false
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return false
	}
	return st.Ino == s.ino && st.Size == s.size && st.Mtim.Nano() == s.mtime && st.Ctim.Nano() == s.ctime
}

// signalGroup sends sig to pid's process group, or to pid alone when the
// group is the agent's own (never signal ourselves) or unknown.
func signalGroup(pid int, sig syscall.Signal, m machine) error {
	if pid <= 1 {
		return fmt.Errorf("refusing to signal pid %d", pid)
	}
	pgid, err := syscall.Getpgid(pid)
	if err == nil && pgid > 1 && pgid != m.selfPGRP {
		if err := syscall.Kill(-pgid, sig); err == nil || !errors.Is(err, syscall.ESRCH) {
			return err
		}
	}
	return syscall.Kill(pid, sig)
}

var pidfdUnsupported struct {
	once     sync.Once
	no       bool
	nonblock int // PIDFD_NONBLOCK where the kernel takes it (5.10), else 0
}

// pidfdOpen opens a pidfd for pid, non-blocking where the kernel can
// (pidfdFile then sets no flag); ok is false where the kernel lacks
// pidfd_open (the caller then polls /proc).
func pidfdOpen(pid int) (fd int, ok bool, err error) {
	pidfdUnsupported.once.Do(func() {
		fd, err := unix.PidfdOpen(os.Getpid(), unix.PIDFD_NONBLOCK)
		if err == nil {
			pidfdUnsupported.nonblock = unix.PIDFD_NONBLOCK
		} else if fd, err = unix.PidfdOpen(os.Getpid(), 0); err != nil {
			pidfdUnsupported.no = true
			return
		}
		unix.Close(fd)
	})
	if pidfdUnsupported.no {
		return -1, false, nil
	}
	fd, err = unix.PidfdOpen(pid, pidfdUnsupported.nonblock)
	if err != nil {
		return -1, true, err
	}
	return fd, true, nil
}

// waitPidfd waits until the process behind pidfd fd exits or ctx ends
// (then ctx.Err()). The goroutine parks in the runtime's poller (epoll):
// a pidfd is readable once its process has exited, so a thousand
// watched processes cost no thread each. Where the poller refuses the
// fd, it sleeps in poll(2) on the pidfd and an eventfd that ctx's end
// writes. fd stays the caller's (a dup of it is parked).
func waitPidfd(ctx context.Context, fd, pid int) error {
	if dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0); err == nil {
		f, polled := pidfdFile(dup)
		gone, err := false, error(nil)
		if polled {
			gone, err = parkPidfd(ctx, f, time.Time{})
		}
		f.Close()
		switch {
		case !polled || err != nil:
			// Not pollable here: the poll(2) below.
		case gone:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		}
	}
	return pollPidfd(ctx, fd, pid)
}

// pollPidfd is waitPidfd where the runtime's poller refuses the pidfd:
// it sleeps in poll(2) on the pidfd and an eventfd that ctx's end
// writes, with no wake-ups until the process exits or the wait is
// cancelled.
func pollPidfd(ctx context.Context, fd, pid int) error {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_, _ = unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
		close(fired)
	})
	defer func() {
		if !stop() {
			<-fired // the write must land before the fd number can be reused
		}
		unix.Close(efd)
	}()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(efd), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("poll pidfd of %d: %w", pid, err)
		}
		if fds[0].Revents != 0 {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// pidWatch is a pidfd of a process that was live when it was opened
// (openPidWatch), with that process's stat: the start check opens it at
// its look at the pid file and hands it to the process's watcher, which
// waits on it, so that a restart opens one pidfd and reads /proc/<pid>/
// stat once for the process it starts, not again in the watcher (and
// the watcher parks on it as it is, not on a dup). A later look of the
// check at the same pid asks the pidfd whether the process has exited
// (a poll), not /proc.
type pidWatch struct {
	pid    int
	st     procStat // read after the open: the process the pidfd names
	fd     int      // owned by f once f is made
	f      *os.File // fd registered with the runtime's poller (wait), nil before
	polled bool
}

// openPidWatch opens a pidfd for pid and reads pid's stat after it, so
// that a live stat is the process the pidfd names: w is that pidfd,
// nil when the process is not live (closed then) or the pidfd could not
// be opened for another reason than its exit (st and live are then
// /proc's alone, as where pidfd_open is missing).
func openPidWatch(pid int) (w *pidWatch, st procStat, live bool) {
	fd, ok, err := pidfdOpen(pid)
	if ok && errors.Is(err, unix.ESRCH) {
		return nil, procStat{}, false
	}
	st, live = alive(pid)
	if !ok || err != nil {
		return nil, st, live
	}
	if !live {
		unix.Close(fd)
		return nil, st, false
	}
	return &pidWatch{pid: pid, st: st, fd: fd}, st, true
}

// exited reports whether the process has exited: the pidfd is readable.
func (w *pidWatch) exited() bool { return pidfdReadable(uintptr(w.fd)) }

// wait waits until the process exits (nil) or ctx ends (ctx.Err()),
// parked in the runtime's poller on the pidfd itself, or in poll(2)
// where the poller refuses it.
func (w *pidWatch) wait(ctx context.Context) error {
	if w.f == nil {
		w.f, w.polled = pidfdFile(w.fd)
	}
	for w.polled {
		gone, err := parkPidfd(ctx, w.f, time.Time{})
		switch {
		case err != nil:
			return pollPidfd(ctx, w.fd, w.pid) // not pollable after all
		case gone:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		}
	}
	return pollPidfd(ctx, w.fd, w.pid)
}

// close closes the pidfd.
func (w *pidWatch) close() {
	if w.f != nil {
		w.f.Close()
	} else {
		unix.Close(w.fd)
	}
	w.fd, w.f = -1, nil
}

// waitGone blocks until pid (with start tick startTick, 0 = any) has
// exited or ctx ends. It uses a pidfd, which becomes readable the moment
// the process exits (child or not); it polls /proc every poll only where
// pidfd_open is unavailable. It returns ctx.Err() when ctx ended first.
func waitGone(ctx context.Context, pid int, startTick uint64, poll time.Duration) error {
	w, err := waitGoneWatch(ctx, pid, startTick, poll)
	if w != nil {
		w.close()
	}
	return err
}

// waitGoneWatch is waitGone that also returns the pidfd it waited on
// (nil: none), left open for the caller to close: it names that very
// process even once its pid is someone else's (reapExited reaps through
// it).
func waitGoneWatch(ctx context.Context, pid int, startTick uint64, poll time.Duration) (*pidWatch, error) {
	fd, ok, err := pidfdOpen(pid)
	if ok && err != nil {
		return nil, nil // ESRCH: already gone
	}
	if ok {
		// The pid may have been reused between the caller's check and the
		// open: verify the process the pidfd names is the one we meant.
		if st, live := alive(pid); !live || (startTick != 0 && st.StartTick != startTick) {
			unix.Close(fd)
			return nil, nil
		}
		w := &pidWatch{pid: pid, fd: fd}
		return w, w.wait(ctx)
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		st, live := alive(pid)
		if !live || (startTick != 0 && st.StartTick != startTick) {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// pidfdReadable reports whether pidfd fd is readable now: its process has
// exited.
// A raw ppoll with a zero timeout: it never waits, and does not wake the
// scheduler's monitor as a plain system call does (readProc).
func pidfdReadable(fd uintptr) bool {
	pfd := unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	var zero unix.Timespec
	for {
		n, _, errno := syscall.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		return errno == 0 && n > 0 && pfd.Revents != 0
	}
}

// parkPidfd waits, parked in the runtime's poller, until the process of
// pidfd f (pidfdFile, polled) has exited (gone), ctx ends or deadline
// passes (zero: none). err: f cannot be waited on so.
func parkPidfd(ctx context.Context, f *os.File, deadline time.Time) (gone bool, err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return false, err
	}
	if err := f.SetReadDeadline(deadline); err != nil {
		return false, err
	}
	if ctx.Done() != nil {
		fired := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			_ = f.SetReadDeadline(time.Unix(1, 0))
			close(fired)
		})
		defer func() {
			if !stop() {
				<-fired // its deadline set before the next wait sets its own
			}
		}()
	}
	_ = rc.Read(func(fd uintptr) bool { // until readable, or the deadline
		gone = pidfdReadable(fd)
		return gone
	})
	return gone, nil
}
