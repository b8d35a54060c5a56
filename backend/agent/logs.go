//go:build linux

package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"gseproc/backend/logtail"
	"gseproc/model"
)

// LogsDir is the directory in DataDir holding the captured output of the
// processes the agent starts: one directory per process key.
const LogsDir = "logs"

// maxTails bounds the tail requests an agent serves at once; beyond it a
// request is refused (the asker tries again).
const maxTails = 64

// captureFiles are where one instance's stdout and stderr go.
type captureFiles struct{ stdout, stderr string }

// capture is where instance idx of process key prints, nil when capture
// is off.
func (a *Agent) capture(key string, idx int) *captureFiles {
	if !a.cfg.LogCapture {
		return nil
	}
	out, err := a.capturePath(key, idx, model.LogStdout)
	if err != nil {
		return nil
	}
	errp, _ := a.capturePath(key, idx, model.LogStderr)
	return &captureFiles{stdout: out, stderr: errp}
}

// capturePath names the captured stream of instance idx of process key:
// DataDir/logs/<dir>/<stream>.log, or <stream>.<idx>.log for idx > 1
// (captureDir, captureName).
func (a *Agent) capturePath(key string, idx int, s model.LogStream) (string, error) {
	dir, err := captureDir(key)
	if err != nil {
		return "", err
	}
	return filepath.Join(a.cfg.DataDir, LogsDir, dir, captureName(idx, s)), nil
}

// captureDir is the directory under DataDir/logs of process key: the key
// path-escaped (a name may hold '/' or be "..": the escape keeps it one
// directory entry under logs/), or a hash of it when that would be too
// long for a file name.
func captureDir(key string) (string, error) {
	if key == "" {
		return "", errors.New("no process key: no log directory")
	}
	dir := url.PathEscape(key)
	if len(dir) > 200 || strings.HasPrefix(dir, ".") {
		sum := sha256.Sum256([]byte(key))
		dir = "h-" + hex.EncodeToString(sum[:16])
	}
	return dir, nil
}

// captureName is the file of stream s of instance idx in its process's
// captureDir: <stream>.log, or <stream>.<idx>.log for idx > 1.
func captureName(idx int, s model.LogStream) string {
	if idx > 1 {
		return string(s) + "." + strconv.Itoa(idx) + ".log"
	}
	return string(s) + ".log"
}

// rotateSweepEvery: every so many checks, rotateLogs looks at every
// file under the logs directory, not only those of the processes the
// agent knows (a process it has forgotten, its definition gone with an
// agent restart, may still write).
const rotateSweepEvery = 10

// rotateLogs rotates every captured file over log_max_bytes: copied to
// .1 (the older ones moved up, those beyond log_keep dropped), then
// emptied in place; the process, appending, writes on at its start. What
// it writes between the copy and the emptying is lost (logrotate's
// copytruncate has the same gap): the price of never holding a pipe a
// process could die of when the agent restarts. check counts the calls:
// the whole logs directory is looked at every rotateSweepEvery-th
// (listing some 500 directories every sample was a tenth of the agent's
// cpu in a crash storm), the files of the processes the agent knows in
// between, each by one fstatat relative to the logs directory (opened
// once per check) of a name kept in its entry. A known file is looked at
// every check while it changed size at its last look, and less often
// while it does not: the interval doubles, up to the sweep's (rotLook).
// In a crash storm of 500 processes, an lstat of each of 1,000 files
// every 2 s (their full paths, escaped and joined again every time) was
// 4-7% of the agent's cpu, for files that mostly never grow.
func (a *Agent) rotateLogs(check int) {
	logs := filepath.Join(a.cfg.DataDir, LogsDir)
	if check%rotateSweepEvery == 0 {
		files, err := filepath.Glob(filepath.Join(logs, "*", "*.log"))
		if err != nil {
			return
		}
		for _, f := range files {
			if fi, err := os.Lstat(f); err == nil && fi.Mode().IsRegular() && fi.Size() > a.cfg.LogMaxBytes {
				a.rotateFile(f)
			}
		}
		return
	}
	type inst struct {
		dir string
		u   *unit
	}
	var due []inst
	a.mu.Lock()
	for key, e := range a.procs {
		for _, u := range e.units {
			if u.rot[0].next > check && u.rot[1].next > check {
				continue
			}
			if e.logDir == "" {
				dir, err := captureDir(key)
				if err != nil {
					break
				}
				e.logDir = dir
			}
			due = append(due, inst{e.logDir, u})
		}
	}
	a.mu.Unlock()
	if len(due) == 0 {
		return
	}
	dfd, err := sysOpen(logs, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return // nothing captured yet
	}
	defer syscall.Close(dfd)
	var name []byte // dir/file, NUL-terminated
	for _, d := range due {
		for i, s := range [...]model.LogStream{model.LogStdout, model.LogStderr} {
			look := &d.u.rot[i]
			if look.next > check {
				continue
			}
			name = append(append(append(name[:0], d.dir...), '/'), captureName(d.u.idx, s)...)
			size, ok := regularSizeAt(dfd, append(name, 0))
			if !ok {
				size = -1
			}
			look.saw(size, check)
			if size > a.cfg.LogMaxBytes {
				a.rotateFile(filepath.Join(logs, string(name)))
				look.saw(-1, check) // emptied: changed
			}
		}
	}
}

// rotLook is when rotateLogs looks next at a captured file of a unit: at
// every check while the file changes size, and while it does not, every
// 2, 4, 8 ... checks, up to rotateSweepEvery (where the sweep of the
// whole directory looks at it anyway). Only the sampler goroutine
// (rotateLogs) reads or writes it.
type rotLook struct {
	size  int64 // at the last look; -1: missing or not a regular file
	next  int   // the check at which it is looked at next
	every int   // checks between two looks
}

// saw records a look at check that found size.
func (l *rotLook) saw(size int64, check int) {
	if l.every == 0 || size != l.size {
		l.every = 1
	} else {
		l.every = min(l.every*2, rotateSweepEvery)
	}
	l.size, l.next = size, check+l.every
}

// regularSizeAt is the size of the file name (NUL-terminated) relative
// to the directory dfd, not following a symbolic link; ok is false when
// it is missing or not a regular file.
func regularSizeAt(dfd int, name []byte) (size int64, ok bool) {
	var st unix.Stat_t
	for {
		_, _, errno := syscall.Syscall6(unix.SYS_NEWFSTATAT, uintptr(dfd), uintptr(unsafe.Pointer(&name[0])),
			uintptr(unsafe.Pointer(&st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			return 0, false
		}
		return st.Size, true
	}
}

func (a *Agent) rotateFile(f string) {
	if err := rotate(f, a.cfg.LogKeep); err != nil {
		a.log.Warn("rotate captured log", "file", f, "err", err)
	}
}

// rotate copies path to path.1 (path.i to path.i+1 first, the one past
// keep dropped) and empties path in place.
func rotate(path string, keep int) error {
	if keep > 0 {
		_ = os.Remove(path + "." + strconv.Itoa(keep))
		for i := keep - 1; i >= 1; i-- {
			_ = os.Rename(path+"."+strconv.Itoa(i), path+"."+strconv.Itoa(i+1))
		}
		if err := copyFile(path, path+".1"); err != nil {
			return err
		}
	}
	if err := os.Truncate(path, 0); err != nil {
		return fmt.Errorf("empty %s: %w", path, err)
	}
	return nil
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("rotate: %w", err)
	}
	defer src.Close()
	tmp := to + ".tmp"
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("rotate: %w", err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		os.Remove(tmp)
		return fmt.Errorf("rotate: copy %s: %w", from, err)
	}
	if err := dst.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rotate: %w", err)
	}
	if err := os.Rename(tmp, to); err != nil {
		return fmt.Errorf("rotate: %w", err)
	}
	return nil
}

// tail answers a tail request (see model.TailRequest): the captured
// stdout or stderr of one of the process's instances, or a file under
// its log_path (never outside it).
func (a *Agent) tail(ctx context.Context, req model.AgentRequest) model.AgentReply {
	refuse := func(code int, format string, args ...any) model.AgentReply {
		return model.AgentReply{Code: code, Message: fmt.Sprintf(format, args...)}
	}
	tr := *req.Tail
	v := &model.Validator{}
	tr.Validate(v, "tail")
	if err := v.Err(); err != nil {
		return refuse(model.CodeIllegalOp, "%s: %v", model.CodeText(model.CodeIllegalOp), err)
	}
	p := a.expand(normalize(req.Process))
	if err := p.Validate("process"); err != nil {
		return refuse(model.CodeIllegalOp, "%s: %v", model.CodeText(model.CodeIllegalOp), err)
	}
	select {
	case a.tails <- struct{}{}:
		defer func() { <-a.tails }()
	default:
		return refuse(model.CodeAgentAbnormal, "%d log tails already being served: try again", maxTails)
	}
	if !req.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, req.Deadline)
		defer cancel()
	}
	idx := max(tr.Instance, 1)
	src := &fileSource{running: func() bool { return a.running(p.Key(), idx, tr.Stream) }}
	switch tr.Stream {
	case model.LogStdout, model.LogStderr:
		path, err := a.capturePath(p.Key(), idx, tr.Stream)
		if err != nil {
			return refuse(model.CodeIllegalOp, "%v", err)
		}
		if _, err := os.Stat(path); err != nil {
			if !a.cfg.LogCapture {
				return refuse(model.CodeCommandFailed, "%s of %s: capture is off on this agent (agent.log_capture)", tr.Stream, p.Key())
			}
			return refuse(model.CodeCommandFailed, "%s of %s instance %d: nothing captured: the agent has not started it since capture began", tr.Stream, p.Key(), idx)
		}
		src.open = func() (*os.File, error) { return os.Open(path) }
		src.name = filepath.Base(path)
	case model.LogFile:
		root := p.Spec.Identity.LogPath
		if root == "" {
			return refuse(model.CodeCommandFailed, "%s has no log_path: no log files to tail", p.Key())
		}
		name, err := pickLogFile(root, tr.File)
		if err != nil {
			return refuse(model.CodeCommandFailed, "tail.file: %v", err)
		}
		src.name = name
		src.open = func() (*os.File, error) { return openUnder(root, name) }
		f, err := src.open()
		if err != nil {
			return refuse(model.CodeCommandFailed, "tail.file: %v", err)
		}
		f.Close()
	}
	c, err := logtail.Serve(ctx, src, tr, a.cfg.LogTailRate)
	if err != nil {
		return refuse(model.CodeCommandFailed, "tail %s of %s: %v", tr.Stream, p.Key(), err)
	}
	c.Path = src.name
	return model.AgentReply{Code: model.CodeSuccess, Tail: &c}
}

// running reports whether the process whose log s is may still write to
// it: instance idx for stdout and stderr, any instance for its files.
func (a *Agent) running(key string, idx int, s model.LogStream) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.procs[key]
	if !ok {
		return false
	}
	for _, u := range e.units {
		if (s == model.LogFile || u.idx == idx) && (u.state.Up() || u.state == model.ProcBackoff) {
			return true
		}
	}
	return false
}

// pickLogFile is the file a tail of stream file reads, relative to root
// (the log_path): name when given (checked: relative, no ".."), "" when
// root is itself a file, else the newest regular file directly in root.
func pickLogFile(root, name string) (string, error) {
	if err := model.CheckLogFile(name); err != nil {
		return "", err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return "", fmt.Errorf("log_path %s: %w", root, err)
	}
	if !fi.IsDir() {
		if name != "" {
			return "", fmt.Errorf("log_path %s is a file, not a directory: leave the file empty", root)
		}
		return "", nil
	}
	if name != "" {
		return filepath.Clean(name), nil
	}
	d, err := os.Open(root)
	if err != nil {
		return "", fmt.Errorf("log_path %s: %w", root, err)
	}
	defer d.Close()
	ents, err := d.ReadDir(4096)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("log_path %s: %w", root, err)
	}
	var newest string
	var at time.Time
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err == nil && (newest == "" || info.ModTime().After(at)) {
			newest, at = e.Name(), info.ModTime()
		}
	}
	if newest == "" {
		return "", fmt.Errorf("log_path %s holds no regular file", root)
	}
	return newest, nil
}

// openUnder opens name under the directory root, never outside it:
// the kernel resolves it beneath root (openat2 RESOLVE_BENEATH), so
// neither ".." nor a symlink (anywhere on the way) can leave it. On a
// kernel without openat2 the resolved path is checked instead. name ""
// opens root itself (a log_path that is a file), beneath its own
// directory: the process's account, which often owns that directory,
// cannot swap the file for a symlink to one the agent (root) would then
// serve. Only a regular file is opened (never a FIFO or device, which
// could block or never end).
func openUnder(root, name string) (*os.File, error) {
	if name == "" {
		root, name = filepath.Split(filepath.Clean(root))
	}
	if err := model.CheckLogFile(name); err != nil {
		return nil, err
	}
	dir, err := os.Open(root)
	if err != nil {
		return nil, fmt.Errorf("log_path %s: %w", root, err)
	}
	defer dir.Close()
	fd, err := unix.Openat2(int(dir.Fd()), name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case err == nil:
		return openRegular(name, func() (*os.File, error) { return os.NewFile(uintptr(fd), filepath.Join(root, name)), nil })
	case errors.Is(err, unix.EXDEV):
		return nil, fmt.Errorf("%q resolves outside log_path %s (through a symlink): refused", name, root)
	case errors.Is(err, unix.ENOSYS):
		return openResolved(root, name)
	}
	return nil, fmt.Errorf("%s under log_path %s: %w", name, root, err)
}

// openResolved is openUnder on a kernel without openat2: name resolved
// (symlinks followed) must stay under root resolved.
func openResolved(root, name string) (*os.File, error) {
	r, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("log_path %s: %w", root, err)
	}
	full, err := filepath.EvalSymlinks(filepath.Join(r, name))
	if err != nil {
		return nil, fmt.Errorf("%s under log_path %s: %w", name, root, err)
	}
	if !strings.HasPrefix(full, r+string(filepath.Separator)) {
		return nil, fmt.Errorf("%q resolves outside log_path %s (to %s): refused", name, root, full)
	}
	return openRegular(name, func() (*os.File, error) {
		return os.OpenFile(full, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	})
}

// openRegular opens and keeps the file only when it is a regular one.
func openRegular(name string, open func() (*os.File, error)) (*os.File, error) {
	f, err := open()
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%s): refused", name, fi.Mode().Type())
	}
	return f, nil
}

// fileSource is a log on disk, opened again for every read (a rotation
// or replacement is seen at once).
type fileSource struct {
	name    string
	open    func() (*os.File, error)
	running func() bool
}

func (s *fileSource) Running() bool { return s.running() }

func (s *fileSource) Open() (logtail.Reader, error) {
	f, err := s.open()
	if err != nil {
		return nil, err
	}
	return fileReader{f}, nil
}

type fileReader struct{ *os.File }

func (r fileReader) Stat() (int64, uint64, error) {
	fi, err := r.File.Stat()
	if err != nil {
		return 0, 0, err
	}
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	return fi.Size(), ino, nil
}
