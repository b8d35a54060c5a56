package jsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend"
	"gseproc/model"
)

// registry is the in-memory index of the procs bucket, kept current by one
// KV watch for the store's life: Processes answers from it, never listing
// the bucket (one consumer whatever the request rate). To read its writes,
// and another server's, Processes first learns the stream's last sequence
// and waits until the watch has delivered it. That probe (a stream info,
// which carries no message) is shared: callers arriving while one is in
// flight join the next, sent when it returns, so there is at most one at
// a time whatever the rate, and each caller's was sent after it arrived.
type registry struct {
	probeMu sync.Mutex
	probing bool   // a probe is in flight
	next    *probe // the probe the next callers join (sent when the one in flight returns)

	mu      sync.Mutex
	defs    map[string]model.ProcessDef // KV key -> definition (Rev = revision)
	bad     map[string]error            // KV key -> why it could not be decoded
	sorted  []model.ProcessDef          // by process key; nil when stale
	rev     uint64                      // highest revision delivered
	ready   bool                        // the watch's first snapshot is in
	changed chan struct{}               // closed and replaced on every change
}

// probe is one stream info request shared by the callers that joined it.
type probe struct {
	done chan struct{}
	last uint64
	err  error
}

// lastSeq returns the procs stream's last sequence as of a moment after
// the call began (see registry).
func (s *Store) lastProcSeq(ctx context.Context) (uint64, error) {
	r := s.reg
	r.probeMu.Lock()
	if r.next == nil {
		r.next = &probe{done: make(chan struct{})}
	}
	p := r.next
	if !r.probing {
		// Added under s.mu unless closed, so Close's Wait counts it.
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			r.probeMu.Unlock()
			return 0, errors.New("jsstore: closed")
		}
		s.wg.Add(1)
		s.mu.Unlock()
		r.probing, r.next = true, nil
		go func() {
			defer s.wg.Done()
			s.runProbes(p)
		}()
	}
	r.probeMu.Unlock()
	// The probe has the store's patience; a caller with a bound of its own
	// (an API call) waits as do would: until JetStream is judged
	// unreachable (judge), and no longer than an attempt past its start or
	// its bound.
	bound, bounded := backend.StoreDeadline(ctx)
	if !bounded {
		select {
		case <-p.done:
			return p.last, p.err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if err := backend.StoreDown(ctx); err != nil {
		return 0, err // an earlier call of the request found the store down
	}
	start := time.Now()
	jctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	stop := s.judge(start, bound, []string{s.streams.procs}, abort)
	defer stop()
	hard := time.NewTimer(time.Until(maxTime(bound, start.Add(attemptTimeout))))
	defer hard.Stop()
	var err error
	select {
	case <-p.done:
		return p.last, p.err
	case <-jctx.Done():
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		err = unavailable(time.Since(start), context.Cause(jctx))
	case <-hard.C:
		err = unavailable(time.Since(start), context.DeadlineExceeded)
	}
	backend.MarkStoreDown(ctx, err)
	return 0, err
}

// maxTime is the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// runProbes sends p, then each probe joined meanwhile, until none is waiting.
func (s *Store) runProbes(p *probe) {
	r := s.reg
	for p != nil {
		p.last, p.err = do(s, s.ctx, s.streams.procs, func(ctx context.Context) (uint64, error) {
			st, err := s.kvStream(ctx, s.on().procs)
			if err != nil {
				return 0, err
			}
			info, err := st.Info(ctx)
			if err != nil {
				return 0, err
			}
			return info.State.LastSeq, nil
		})
		close(p.done)
		r.probeMu.Lock()
		p, r.next = r.next, nil
		if p == nil {
			r.probing = false
		}
		r.probeMu.Unlock()
	}
}

func newRegistry() *registry {
	return &registry{defs: map[string]model.ProcessDef{}, bad: map[string]error{}, changed: make(chan struct{})}
}

// applyEntry records one watch delivery into defs and bad (reg.mu held,
// or maps not shared yet); its hosts are packed by t (hostTexts.pack).
func applyEntry(defs map[string]model.ProcessDef, bad map[string]error, e jetstream.KeyValueEntry, t *hostTexts) {
	d, put, err := decodeEntry(e, defs, t)
	recordEntry(defs, bad, e.Key(), d, put, err)
}

// decodeEntry is the definition e puts (put false for a delete or purge),
// or why it could not be decoded, its hosts packed by t against defs
// (read only: the watch's goroutine is the index's only writer).
func decodeEntry(e jetstream.KeyValueEntry, defs map[string]model.ProcessDef, t *hostTexts) (d model.ProcessDef, put bool, err error) {
	if e.Operation() != jetstream.KeyValuePut {
		return d, false, nil
	}
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		return d, true, fmt.Errorf("decode %s: %w", e.Key(), err)
	}
	d.Rev = e.Revision()
	d.Hosts = t.pack(d.Hosts, defs)
	return d, true, nil
}

// recordEntry records a decoded delivery of key (decodeEntry's) into defs
// and bad.
func recordEntry(defs map[string]model.ProcessDef, bad map[string]error, key string, d model.ProcessDef, put bool, err error) {
	delete(bad, key)
	switch {
	case !put:
		delete(defs, key)
	case err != nil:
		delete(defs, key)
		bad[key] = err
	default:
		defs[key] = d
	}
}

// notifyLocked wakes the waiters; reg.mu held.
func (r *registry) notifyLocked() {
	r.sorted = nil
	close(r.changed)
	r.changed = make(chan struct{})
}

// follow keeps the index current until ctx ends: a watch that ends (the
// connection lost its consumer) is started again, and its snapshot
// replaces the index once complete.
func (s *Store) follow(ctx context.Context) {
	for ctx.Err() == nil {
		_ = s.followOnce(ctx) // ended: the next watch starts over from a snapshot
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *Store) followOnce(ctx context.Context) error {
	w, err := s.on().procs.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch registry: %w", err)
	}
	defer func() { _ = w.Stop() }()
	r := s.reg
	// Until the first "initial values done" marker, deliveries build a
	// fresh snapshot; readers keep the previous one meanwhile.
	fresh, freshBad := map[string]model.ProcessDef{}, map[string]error{}
	var freshRev uint64
	live := false
	// The hosts' addresses are shared while deliveries come, the table
	// dropped after regIdle without one (hostTexts).
	var texts hostTexts
	idle := time.NewTimer(regIdle)
	defer idle.Stop()
	// The loop also ends with ctx: the watcher closes its channel when it
	// is stopped, but not when its connection closed first (a Store.Close
	// that found the watch mid-read waited on it forever).
	for {
		var e jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-idle.C:
			texts.drop()
			continue
		case u, ok := <-w.Updates():
			if !ok {
				return errors.New("registry watch ended")
			}
			e = u
		}
		idle.Reset(regIdle)
		if e == nil {
			if !live {
				r.mu.Lock()
				r.defs, r.bad, r.rev, r.ready = fresh, freshBad, max(r.rev, freshRev), true
				r.notifyLocked()
				r.mu.Unlock()
				live = true
			}
			continue
		}
		if !live {
			applyEntry(fresh, freshBad, e, &texts)
			freshRev = max(freshRev, e.Revision())
			continue
		}
		// Decoded before the lock: readers wait only for the change.
		d, put, err := decodeEntry(e, r.defs, &texts)
		r.mu.Lock()
		recordEntry(r.defs, r.bad, e.Key(), d, put, err)
		r.rev = max(r.rev, e.Revision())
		r.notifyLocked()
		r.mu.Unlock()
	}
}

// snapshot waits until the index holds every write the stream had when
// it was called and returns the definitions sorted by key. The slice is
// the caller's (shared: the index's own, see SharedProcesses); the
// definitions' hosts and labels are shared with the index and must not be
// modified.
func (s *Store) snapshot(ctx context.Context, shared bool) ([]model.ProcessDef, error) {
	// A request's later read waits for what its first one probed
	// (backend.WithRegistryRead), the first for a probe of its own.
	last, probed := backend.RegistryReadRev(ctx)
	if !probed {
		var err error
		if last, err = s.lastProcSeq(ctx); err != nil {
			return nil, err
		}
	}
	r := s.reg
	start := time.Now()
	stall := time.NewTimer(attemptTimeout)
	defer stall.Stop()
	for {
		r.mu.Lock()
		if r.ready && r.rev >= last {
			defer r.mu.Unlock()
			if !probed {
				backend.SetRegistryReadRev(ctx, last)
			}
			for _, err := range r.bad {
				return nil, err
			}
			if r.sorted == nil {
				r.sorted = make([]model.ProcessDef, 0, len(r.defs))
				for _, d := range r.defs {
					r.sorted = append(r.sorted, d)
				}
				slices.SortFunc(r.sorted, func(a, b model.ProcessDef) int { return strings.Compare(a.Process.Key(), b.Process.Key()) })
			}
			if shared {
				return r.sorted, nil
			}
			return slices.Clone(r.sorted), nil
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
			stall.Reset(attemptTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-stall.C:
			err := fmt.Errorf("registry index behind the bucket (revision %d not delivered): %w", last, errStalled)
			if _, bounded := backend.StoreWait(ctx); bounded {
				err = unavailable(time.Since(start), err)
				backend.MarkStoreDown(ctx, err)
				return nil, err
			}
			return nil, err
		}
	}
}
