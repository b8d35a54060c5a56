// Package bench measures gseproc as an operator runs it: the real server
// (JetStream store) and a simulated fleet (`gseproc sim --nats`), each in
// its own process, driven by the real op client or by a bounded load of
// API calls. `gseproc bench fleet` and `gseproc bench operate` print the
// figures; `make bench-fleet` and `make bench-operate` run them. `gseproc
// bench agent` (the end of `make bench`) measures a real `gseproc agent`
// process idling with a few hosted processes; `gseproc bench compare`
// (`make compare`) times kill -9 to running again under gseproc's agent
// and the supervisors installed here (s6, supervisord, pm2), and one
// command on N hosts through gseproc and Ansible. Every process it starts
// listens on 127.0.0.1 only and is stopped before it returns, the
// processes hosted for it included; every load is bounded in count and in
// time.
package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// child is a process started by the harness. Its output lines are kept
// (bounded) and can be waited for.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	mu     sync.Mutex
	lines  []string
	seen   chan struct{}  // closed and replaced on every new line
	counts map[string]int // lines containing each watched text

	// gc reads the runtime's collection trace the child prints when
	// started with one (startChildEnv with gcTraceEnv); its lines are not
	// kept among lines.
	gc *gcTrace
}

// maxLines bounds the output kept per child.
const maxLines = 2000

// startChild runs bin args with its output captured; stop ends it.
// Lines containing one of watch are counted (count), all of them.
func startChild(name string, watch []string, bin string, args ...string) (*child, error) {
	return startChildEnv(name, watch, nil, bin, args...)
}

// startChildEnv is startChild with env added to this process's
// environment; with gcTraceEnv among it, the child's collection trace is
// read (child.gc).
func startChildEnv(name string, watch, env []string, bin string, args ...string) (*child, error) {
	c := &child{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{}), seen: make(chan struct{}), counts: map[string]int{}}
	if len(env) > 0 {
		c.cmd.Env = append(os.Environ(), env...)
		if slices.Contains(env, gcTraceEnv()) {
			c.gc = &gcTrace{}
		}
	}
	c.cmd.SysProcAttr = ownGroup()
	// Stdout and stderr apart: the runtime writes a collection's trace
	// line to stderr in pieces, and a line on stdout written meanwhile
	// landed inside it on a shared pipe ("gc 2gseproc server listening
	// on ..."), so neither was found.
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	c.cmd.Stdout, c.cmd.Stderr = outW, errW
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	read := func(r *io.PipeReader) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if c.gc != nil && c.gc.line(sc.Text()) {
				continue
			}
			c.mu.Lock()
			for _, w := range watch {
				if strings.Contains(sc.Text(), w) {
					c.counts[w]++
				}
			}
			if len(c.lines) < maxLines {
				c.lines = append(c.lines, sc.Text())
			}
			close(c.seen)
			c.seen = make(chan struct{})
			c.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, r)
	}
	go read(outR)
	go read(errR)
	go func() {
		c.err = c.cmd.Wait()
		_ = outW.Close()
		_ = errW.Close()
		close(c.done)
	}()
	return c, nil
}

// waitLine waits for a line starting with prefix and returns the rest.
func (c *child) waitLine(ctx context.Context, prefix string) (string, error) {
	for i := 0; ; {
		c.mu.Lock()
		for ; i < len(c.lines); i++ {
			if rest, ok := strings.CutPrefix(c.lines[i], prefix); ok {
				c.mu.Unlock()
				return strings.TrimSpace(rest), nil
			}
		}
		seen := c.seen
		c.mu.Unlock()
		select {
		case <-seen:
		case <-c.done:
			return "", fmt.Errorf("%s exited (%v) before printing %q:\n%s", c.name, c.err, prefix, c.output())
		case <-ctx.Done():
			return "", fmt.Errorf("%s: no %q line: %w\n%s", c.name, prefix, ctx.Err(), c.output())
		}
	}
}

// count is the number of lines so far containing watched text w.
func (c *child) count(w string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[w]
}

// output is the last lines the child printed.
func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.lines[max(0, len(c.lines)-20):], "\n")
}

// stop ends the child: SIGTERM to its group, SIGKILL after a grace (on
// a system without process groups, a kill at once).
func (c *child) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = signalGroup(c.cmd.Process, false)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = signalGroup(c.cmd.Process, true)
		<-c.done
	}
}

// usage is a process's resource use as /proc reports it.
type usage struct {
	RSS, PeakRSS int64         // bytes
	CPU          time.Duration // user + system
}

// procStatus reads /proc/<pid>/status: each field's first number (kB
// for the memory fields), by name.
func procStatus(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return nil, err
	}
	fields := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		f := strings.Fields(v)
		if !ok || len(f) == 0 {
			continue
		}
		if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			fields[k] = n
		}
	}
	return fields, nil
}

// readUsage reads pid's resident set (now and peak) and CPU time.
func readUsage(pid int) (usage, error) {
	var u usage
	status, err := procStatus(pid)
	if err != nil {
		return u, fmt.Errorf("read usage of %d: %w", pid, err)
	}
	u.RSS, u.PeakRSS = status["VmRSS"]<<10, status["VmHWM"]<<10
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return u, fmt.Errorf("read usage of %d: %w", pid, err)
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return u, errors.New("read usage: /proc stat without a command name")
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return u, errors.New("read usage: short /proc stat")
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	u.CPU = time.Duration(utime+stime) * time.Second / clockTicks
	return u, nil
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// mb formats bytes as MB.
func mb(n int64) string { return fmt.Sprintf("%.0f MB", float64(n)/(1<<20)) }

// gcTraceEnv is the environment entry that makes a Go child print a line
// per collection (GODEBUG=gctrace=1), added to the GODEBUG this process has.
func gcTraceEnv() string {
	if v := os.Getenv("GODEBUG"); v != "" {
		return "GODEBUG=" + v + ",gctrace=1"
	}
	return "GODEBUG=gctrace=1"
}

// gcTrace sums up a Go process's collection trace: the collections since
// the last take, the largest live heap one of them found (what the
// process held at its peak, as the collector saw it; a heap profile read
// now and then misses most of them) and the largest the heap grew to
// (with the runtime's own memory, what sets the RSS). Collections forced
// (a heap profile taken with gc=1) are left out.
type gcTrace struct {
	mu         sync.Mutex
	n          int
	live, heap int64 // MB
	cpu        time.Duration
}

// gcLine matches a collection's line: "gc 45 @15.423s 13%: ... ms cpu,
// 504->537->372 MB, 559 MB goal, ...": the heap at its start, at its end,
// and live.
var gcLine = regexp.MustCompile(`^gc \d+ @.* ([0-9.+/]+) ms cpu, (\d+)->(\d+)->(\d+) MB, \d+ MB goal`)

// gcCPU is the CPU time of a collection from its trace's "a+b/c/d+e ms
// cpu" (the stop-the-world phases, the mark's assists, background and
// idle work).
func gcCPU(f string) time.Duration {
	var ms float64
	for p := range strings.FieldsFuncSeq(f, func(r rune) bool { return r == '+' || r == '/' }) {
		v, _ := strconv.ParseFloat(p, 64)
		ms += v
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// line takes one line of the child's output, and reports whether it was
// the collection trace's.
func (g *gcTrace) line(s string) bool {
	if !strings.HasPrefix(s, "gc ") {
		return false
	}
	m := gcLine.FindStringSubmatch(s)
	if m == nil {
		return false
	}
	if strings.Contains(s, "(forced)") {
		return true
	}
	start, _ := strconv.ParseInt(m[2], 10, 64)
	end, _ := strconv.ParseInt(m[3], 10, 64)
	live, _ := strconv.ParseInt(m[4], 10, 64)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
	g.cpu += gcCPU(m[1])
	g.live = max(g.live, live)
	g.heap = max(g.heap, start, end)
	return true
}

// take is what the collections since the last take found (MB) and
// their CPU time, and starts again.
func (g *gcTrace) take() (n int, live, heap int64, cpu time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, live, heap, cpu = g.n, g.live, g.heap, g.cpu
	g.n, g.live, g.heap, g.cpu = 0, 0, 0, 0
	return n, live, heap, cpu
}
