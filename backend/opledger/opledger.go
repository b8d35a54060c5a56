// Package opledger makes an operation on a host run at most once per
// operation id: the engine gives every dispatch of a task to a target the
// same id (model.OpID), also when another server resumes the task, and the
// host's agent (or the simulator) passes each op that changes something
// through a Ledger, which runs it the first time and answers every repeat
// with the recorded outcome.
//
// A Ledger keeps the last Keep outcomes. On disk (the real agent) it is a
// file of JSON lines in the agent's data dir: a "begin" line, synced before
// the op runs, and a "done" line with the outcome after. A begin without
// its done line is an op the agent was running when it died: its outcome
// is unknown, and a repeat is answered so (code 117), never run again. The
// file is rewritten compactly (temporary file, rename) when it holds twice
// Keep lines. In memory (the simulator) nothing survives the process.
package opledger

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"gseproc/model"
)

// DefaultKeep is how many outcomes a ledger keeps unless told otherwise:
// far more than the ops a host sees while a task can still be resumed.
const DefaultKeep = 10000

// Outcome is what an op answered: its code, message and output.
type Outcome struct {
	Code    int    `json:"code"`
	Message string `json:"msg,omitempty"`
	Output  string `json:"out,omitempty"`
	// Cancelled: the op was stopped by a cancel of its task.
	Cancelled bool `json:"cancelled,omitempty"`
}

// Interrupted is the outcome of an op that was running when the agent
// died: not known, and not run again.
func Interrupted(id string) Outcome {
	return Outcome{Code: model.CodeAgentAbnormal, Message: fmt.Sprintf(
		"%s: operation %s was running when the agent stopped; its outcome is unknown and it is not run again (check the status)",
		model.CodeText(model.CodeAgentAbnormal), id)}
}

// Ledger records the outcomes of op ids.
type Ledger struct {
	path string
	keep int

	mu    sync.Mutex
	ops   map[string]*op
	order []string // ids in the order they began, oldest first
	f     *os.File
	lines int // lines in f
	// Begin lines are synced in groups (syncTo), outside mu: written is
	// how many lines were written so far, synced how many of them are on
	// disk; syncMu lets one fsync run at a time, for every line before it.
	written, synced uint64
	syncMu          sync.Mutex
}

type op struct {
	done    bool
	outcome Outcome
	wait    chan struct{} // closed when the op ends (done or not run)
}

// line is one record of the file.
type line struct {
	ID      string   `json:"id"`
	At      int64    `json:"at"`
	Outcome *Outcome `json:"outcome,omitempty"` // nil: begin
	NotRun  bool     `json:"not_run,omitempty"` // it began but did nothing: forgotten
}

// New returns a ledger in memory keeping keep outcomes (DefaultKeep when
// keep <= 0).
func New(keep int) *Ledger {
	if keep <= 0 {
		keep = DefaultKeep
	}
	return &Ledger{keep: keep, ops: map[string]*op{}}
}

// Open loads the ledger at path (created when missing) and keeps it there.
func Open(path string, keep int) (*Ledger, error) {
	l := New(keep)
	l.path = path
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("op ledger %s: %w", path, err)
	default:
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var ln line
			if json.Unmarshal(sc.Bytes(), &ln) != nil || ln.ID == "" {
				continue // a line cut short by a crash
			}
			o := l.ops[ln.ID]
			if ln.NotRun {
				l.dropLocked(ln.ID) // as forget did
				continue
			}
			if o == nil {
				o = &op{wait: closed}
				l.ops[ln.ID] = o
				l.order = append(l.order, ln.ID)
			}
			if ln.Outcome != nil {
				o.done, o.outcome = true, *ln.Outcome
			}
		}
		err := sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("op ledger %s: %w", path, err)
		}
		for _, id := range l.order {
			if o := l.ops[id]; !o.done {
				o.done, o.outcome = true, Interrupted(id)
			}
		}
		l.trimLocked()
	}
	if err := l.rewriteLocked(); err != nil {
		return nil, err
	}
	return l, nil
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Do runs the op id once. The first call runs run; run reports whether it
// ran at all (false: nothing was done, e.g. its deadline had passed, and
// nothing is recorded). A call for an id already done returns the recorded
// outcome and repeat = true; a call for an id in flight waits for it, or
// for ctx. An empty id is not recorded: run runs.
func (l *Ledger) Do(ctx context.Context, id string, run func() (Outcome, bool)) (out Outcome, repeat bool, err error) {
	if id == "" {
		out, _ = run()
		return out, false, nil
	}
	for {
		l.mu.Lock()
		o := l.ops[id]
		if o == nil {
			break // l.mu held
		}
		l.mu.Unlock()
		select {
		case <-o.wait:
		case <-ctx.Done():
			return Outcome{}, true, fmt.Errorf("operation %s is still running: %w", id, ctx.Err())
		}
		l.mu.Lock()
		if o.done {
			out := o.outcome
			l.mu.Unlock()
			return out, true, nil
		}
		l.mu.Unlock() // it did not run: try to be the one that runs it
	}
	o := &op{wait: make(chan struct{})}
	l.ops[id] = o
	l.order = append(l.order, id)
	werr := l.appendLocked(line{ID: id, At: time.Now().Unix()})
	seq := l.written
	l.mu.Unlock()
	if werr == nil {
		werr = l.syncTo(seq)
	}
	if werr != nil {
		l.forget(id, o)
		return Outcome{}, false, fmt.Errorf("operation %s not run: %w", id, werr)
	}

	out, ran := run()
	if !ran {
		l.forget(id, o)
		return out, false, nil
	}
	l.mu.Lock()
	o.done, o.outcome = true, out
	close(o.wait)
	// Not synced: a process crash keeps it (the page cache); should the
	// machine die first, a repeat says the outcome is unknown.
	_ = l.appendLocked(line{ID: id, At: time.Now().Unix(), Outcome: &out})
	l.trimLocked()
	l.mu.Unlock()
	return out, false, nil
}

// forget drops an op that did not run and wakes its waiters.
func (l *Ledger) forget(id string, o *op) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ops[id] == o {
		l.dropLocked(id)
	}
	close(o.wait)
	// A begin line without an end would read as interrupted.
	_ = l.appendLocked(line{ID: id, At: time.Now().Unix(), NotRun: true})
}

// dropLocked forgets id: its record and its listing, the last (an id is
// listed once: a not-run drops it, Open replays the same), so that order
// and ops hold the same ids.
func (l *Ledger) dropLocked(id string) {
	if _, ok := l.ops[id]; !ok {
		return
	}
	delete(l.ops, id)
	for i := len(l.order) - 1; i >= 0; i-- {
		if l.order[i] == id {
			l.order = append(l.order[:i], l.order[i+1:]...)
			return
		}
	}
}

// Len is the number of ids recorded.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ops)
}

// trimLocked drops the oldest finished outcomes beyond keep.
func (l *Ledger) trimLocked() {
	for len(l.order) > l.keep {
		id := l.order[0]
		if o := l.ops[id]; o != nil && !o.done {
			break // still running: it is kept until it ends
		}
		delete(l.ops, id)
		l.order = l.order[1:]
	}
	if l.f != nil && l.lines > 2*l.keep {
		// On failure the appends go on to the old file; the next trim
		// tries again.
		_ = l.rewriteLocked()
	}
}

// appendLocked writes one line (to the page cache: syncTo makes it
// durable).
func (l *Ledger) appendLocked(ln line) error {
	if l.f == nil {
		return nil
	}
	b, _ := json.Marshal(ln)
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("op ledger %s: write: %w", l.path, err)
	}
	l.lines++
	l.written++
	return nil
}

// syncTo makes the first seq lines written durable. One fsync runs at a
// time, outside mu, and covers every line written before it began: ops
// that begin together share it (group commit) instead of queueing one
// fsync each behind the ledger's lock.
func (l *Ledger) syncTo(seq uint64) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if l.synced >= seq || l.f == nil {
		l.mu.Unlock()
		return nil
	}
	f, upto := l.f, l.written
	l.mu.Unlock()
	err := f.Sync()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.synced >= seq {
		return nil // a rewrite synced it meanwhile (and closed f)
	}
	if err != nil {
		return fmt.Errorf("op ledger %s: sync: %w", l.path, err)
	}
	l.synced = upto
	return nil
}

// rewriteLocked writes what is kept to a fresh file and appends there.
func (l *Ledger) rewriteLocked() error {
	if l.path == "" {
		return nil
	}
	dir := filepath.Dir(l.path)
	tmp, err := os.CreateTemp(dir, ".ops-*.tmp")
	if err != nil {
		return fmt.Errorf("op ledger %s: %w", l.path, err)
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriter(tmp)
	n := 0
	now := time.Now().Unix()
	for _, id := range l.order {
		o := l.ops[id]
		ln := line{ID: id, At: now}
		if o.done {
			out := o.outcome
			ln.Outcome = &out
		}
		b, _ := json.Marshal(ln)
		_, _ = w.Write(append(b, '\n'))
		n++
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("op ledger %s: %w", l.path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("op ledger %s: %w", l.path, err)
	}
	if err := os.Rename(tmp.Name(), l.path); err != nil {
		tmp.Close()
		return fmt.Errorf("op ledger %s: %w", l.path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f, l.lines = tmp, n
	l.synced = l.written // all in the new file, synced
	return nil
}

// Close releases the file.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
