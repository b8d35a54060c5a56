//go:build linux

package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gseproc/model"
)

// registryDelay is how long after the first change the registry is
// written: every change made meanwhile goes into the same write.
const registryDelay = 50 * time.Millisecond

// registrySupervisorDelay is how long after the first change a write is
// due when only the supervisor changed it on its own (a restart decided,
// a restart's new pid and count: persistSupervisedLocked). A crash loses
// at most these, and the next start recovers them from the processes
// themselves (doc.go); in a crash storm they are most of the changes, and
// writing them every registryDelay wrote the whole registry 20 times a
// second. A change an op makes (or waits for) is due in registryDelay.
const registrySupervisorDelay = time.Second

// registryRetry is the wait before a failed registry write is tried again.
const registryRetry = time.Second

// persistLocked records that the hosting registry changed. Nothing is
// written here: the registry writer (persister) writes the whole registry
// once, compact, registryDelay after the first change, whatever the number
// of changes meanwhile; an op waits for that write before it answers
// (waitPersisted).
func (a *Agent) persistLocked() {
	a.regWant++
	select {
	case a.regKick <- struct{}{}:
	default: // a write is already due
	}
}

// persistSupervisedLocked records a change the supervisor made on its own
// that the next start can recover from the processes if a crash loses it
// (a restart decided, a restart's new pid and count): written within
// registrySupervisorDelay, or with the next change an op makes.
//
// Only the first such change after a write wakes the writer (regLazyDue):
// the writer has a write due by then, which takes every later change
// made before it reads the registry (flush). A crash storm made two per
// restart, each a wake-up of the writer that found its write due already.
func (a *Agent) persistSupervisedLocked() {
	a.regWant++
	if a.regLazyDue {
		return
	}
	a.regLazyDue = true
	select {
	case a.regLazy <- struct{}{}:
	default:
	}
}

// persister writes the registry registryDelay after a change
// (registrySupervisorDelay after one of the supervisor's own), until the
// agent closes (Close writes what is left).
func (a *Agent) persister() {
	defer a.wg.Done()
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	var due time.Time // when the next write is due; zero: none
	dueIn := func(d time.Duration) {
		if at := time.Now().Add(d); due.IsZero() || at.Before(due) {
			due = at
			t.Reset(d)
		}
	}
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-a.regKick:
			dueIn(registryDelay)
		case <-a.regLazy:
			dueIn(registrySupervisorDelay)
		case <-t.C:
			due = time.Time{}
			if a.flush() != nil {
				dueIn(registryRetry)
			}
		}
	}
}

// flush writes the registry if it changed since the last write: the
// records are taken under the agent lock, encoded and written (kept.
// WriteFile: temp file, fsync, rename) outside it. Writes are one at a
// time, so a later state never lands before an earlier one.
func (a *Agent) flush() error {
	a.flushMu.Lock()
	defer a.flushMu.Unlock()
	a.mu.Lock()
	a.regLazyDue = false // a supervisor's change from now on is not in this write
	want := a.regWant
	if want == a.regDone {
		a.mu.Unlock()
		return nil
	}
	hosted := a.hostedLocked()
	a.mu.Unlock()

	b, err := a.regEnc.encode(hosted, time.Now().Unix())
	if err == nil {
		err = writeRegistry(a.regPath, b)
	}

	a.mu.Lock()
	a.regWrites++
	if err == nil {
		a.regDone = want
	}
	a.regErr = err
	close(a.regFlushed)
	a.regFlushed = make(chan struct{})
	a.mu.Unlock()
	if err != nil {
		a.log.Error("persist hosting registry (tried again in "+registryRetry.String()+")", "err", err)
	}
	return err
}

// waitPersisted waits until every registry change made so far is on disk
// (or ctx ends): an op answers only once what it changed would survive a
// crash of the agent. It returns the write's error when it failed.
func (a *Agent) waitPersisted(ctx context.Context) error {
	a.mu.Lock()
	want := a.regWant
	if a.regDone < want {
		// What is pending may be the supervisor's alone, due later: an
		// op waiting for it has it written in registryDelay.
		select {
		case a.regKick <- struct{}{}:
		default:
		}
	}
	for a.regDone < want {
		ch := a.regFlushed
		a.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		a.mu.Lock()
		if a.regDone < want && a.regErr != nil {
			err := a.regErr
			a.mu.Unlock()
			return err
		}
	}
	a.mu.Unlock()
	return nil
}

// hostedView is a hosted entry as the registry records it, taken under
// the agent lock; the records are built (and sorted) outside it.
type hostedView struct {
	key          string // p.Key(), made once (entry.key)
	p            *model.Process
	pGen         uint64 // p's generation (entry.pGen)
	lastOp       model.OpType
	registerTime int64
	instances    []instanceRecord
}

// hostedLocked takes what the registry records of every hosted process.
// The definitions are shared, not copied (entry.pReg, never changed):
// copying 500 of them by value at every write, and sorting the copies,
// was most of the writer's cpu in a crash storm bar the write itself.
func (a *Agent) hostedLocked() []hostedView {
	out := make([]hostedView, 0, len(a.procs))
	for _, e := range a.procs {
		if !e.hosted {
			continue
		}
		v := hostedView{key: e.key, p: e.pReg, pGen: e.pGen, lastOp: e.lastOp, registerTime: e.registerTime, instances: make([]instanceRecord, len(e.units))}
		for i, u := range e.units {
			v.instances[i] = instanceRecord{PID: u.pid, StartTick: u.tick, State: u.state,
				Held: u.held, Done: u.done, Restarts: u.restarts}
		}
		out = append(out, v)
	}
	return out
}

func sortHosted(hosted []hostedView) {
	slices.SortFunc(hosted, func(x, y hostedView) int { return strings.Compare(x.key, y.key) })
}

func (v hostedView) record(now int64) procRecord {
	return recordOf(*v.p, v.lastOp, now, &hostedRecord{Process: *v.p, RegisterTime: v.registerTime, Instances: v.instances})
}

// regEncoder encodes the registry as json.Marshal of the whole file
// (registryFile) would, byte for byte, keeping each record's encoding from
// the write before and encoding again only the records whose content
// changed: in a crash storm a write a second re-encoded all 500 records
// for the few that changed. A record's encoding is kept in two parts
// around its timestamp, which every write stamps anew. Only the registry
// writer uses it (Agent.flush, under flushMu).
type regEncoder struct {
	recs    map[string]*encodedRecord // by process key
	buf     []byte
	encoded int // records encoded, not taken from recs (tests)
}

// encodedRecord is a record's encoding and what it was made from.
type encodedRecord struct {
	pGen         uint64
	lastOp       model.OpType
	registerTime int64
	instances    []instanceRecord
	head, tail   []byte // before and after the timestamp's digits
}

// fresh reports whether r encodes v: the same definition (by
// generation) and the same op, register time and instances.
func (r *encodedRecord) fresh(v hostedView) bool {
	return r.pGen == v.pGen && v.pGen != 0 && r.lastOp == v.lastOp && r.registerTime == v.registerTime &&
		slices.Equal(r.instances, v.instances)
}

// timestampKey precedes a record's timestamp in its encoding: the first
// such text in it is the record's own (every field before it is a
// string, where a quote is escaped, or a number).
var timestampKey = []byte(`"timestamp":`)

// encode returns the registry file of hosted (sorted here) stamped now;
// the bytes are the encoder's until its next call.
func (r *regEncoder) encode(hosted []hostedView, now int64) ([]byte, error) {
	sortHosted(hosted)
	if r.recs == nil {
		r.recs = map[string]*encodedRecord{}
	}
	seen := make(map[string]struct{}, len(hosted))
	b := append(r.buf[:0], `{"proc":[`...)
	for i, v := range hosted {
		key := v.key
		seen[key] = struct{}{}
		rec := r.recs[key]
		if rec == nil || !rec.fresh(v) {
			enc, err := json.Marshal(v.record(0))
			if err != nil {
				return nil, fmt.Errorf("encode hosting registry: %w", err)
			}
			at := bytes.Index(enc, timestampKey)
			if at < 0 {
				return nil, fmt.Errorf("encode hosting registry: no timestamp in the record of %s", key)
			}
			at += len(timestampKey)
			rec = &encodedRecord{pGen: v.pGen, lastOp: v.lastOp, registerTime: v.registerTime,
				instances: slices.Clone(v.instances), head: enc[:at], tail: enc[at+1:]} // +1: the "0"
			r.recs[key] = rec
			r.encoded++
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, rec.head...)
		b = strconv.AppendInt(b, now, 10)
		b = append(b, rec.tail...)
	}
	b = append(b, "]}\n"...)
	for key := range r.recs {
		if _, ok := seen[key]; !ok {
			delete(r.recs, key)
		}
	}
	r.buf = b
	return b, nil
}
