package jsstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend/engine"
	"gseproc/model"
)

var _ engine.Fencer = (*Store)(nil)

// Fencing (engine.Fencer). A task's fence is the key <enc(task)>.fence.epoch
// of the results bucket (two tokens: no result filter "<enc(task)>.*"
// matches it). An engine that gets a task's lease (its creator needs no
// fence: its token is 0, "never fenced"; a resume or a takeover writes the
// fence) holds the fence's revision as its token. Every batch of its
// results is stored only after the fence is read back (from the stream
// leader) and found to be still its token, and a task update is that
// check plus a compare-and-set on the task key: once another engine has
// written the fence, the deposed owner's writes are refused
// (model.ErrConflict) and it abandons the task. A task update within
// fenceFresh of a results write of the task that found the fence still
// its own (a one-target task's result, then its end) trusts that read
// instead of making another.
//
// The result check is not atomic with the write: a batch already checked
// when the takeover happens is still stored. A per-message expectation on
// the fence (Nats-Expected-Last-Subject-Sequence-Subject) would be, but a
// replicated stream refuses concurrent messages expecting on one subject,
// so pipelined writes would be serialized; a takeover waits out a lease
// TTL, far longer than one batch write, and the successor's own results
// (written after its dispatches) come later and win.

// fenceKey is the results-bucket key whose revision fences taskID.
func fenceKey(taskID string) string { return enc(taskID) + ".fence.epoch" }

// Fence makes the caller taskID's only writer: it returns the token its
// writes carry from now on; writes with an older token are refused.
func (s *Store) Fence(ctx context.Context, taskID string) (uint64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	rev, err := do(s, ctx, s.streams.results, func(ctx context.Context) (uint64, error) { return s.on().results.Put(ctx, fenceKey(taskID), nil) })
	if err != nil {
		return 0, fmt.Errorf("fence task %s: %w", taskID, err)
	}
	return rev, nil
}

// fence returns taskID's fence token now (0: never fenced), read so that
// any store's last write of it shows (get: through the stream leader on a
// replicated bucket; with one replica the only copy is the leader's).
func (s *Store) fence(ctx context.Context, taskID string) (uint64, error) {
	e, err := s.get(ctx, s.on().results, fenceKey(taskID))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	}
	return e.Revision(), nil
}

// fenceFresh is how long after a fence read found it still a task's
// token a task update trusts it without reading it again (a third of the
// shortest lease TTL, 300 ms). A task of one target has its result stored
// and then, at once, its end: one fence read for both instead of one
// each. What is given up: a takeover waits out a lease TTL from the last
// renewal its engine saw, not from this read, so a read made just before
// a successor fences the task is trusted up to fenceFresh after; a
// deposed owner's task update can then be stored after the successor's
// fence, as a result batch checked before it can (see above). The update
// keeps its compare-and-set on the task key, which refuses it once the
// successor has rewritten the task; a successor that has not yet (its
// resume fences, then dispatches) overwrites it at its own next update.
const fenceFresh = 100 * time.Millisecond

// fenceSeen records that a fence read sent at sent found fence as
// taskID's token (for the task's index, when it has one): a token not the
// update's own makes it read the fence again.
func (s *Store) fenceSeen(taskID string, fence uint64, sent time.Time) {
	s.mu.Lock()
	if idx := s.index[taskID]; idx != nil && !sent.Before(idx.fenceAt) {
		idx.fence, idx.fenceAt = fence, sent
	}
	s.mu.Unlock()
}

// PutResultsFenced stores results of taskID as PutResults does, once the
// task's fence is found to be still fence (else model.ErrConflict).
func (s *Store) PutResultsFenced(ctx context.Context, taskID string, fence uint64, rs []model.Result) error {
	return s.PutResultsFencedMany(ctx, []engine.FencedResults{{TaskID: taskID, Fence: fence, Results: refs(rs)}})[0]
}

// refs are the addresses of rs's results.
func refs(rs []model.Result) []*model.Result {
	out := make([]*model.Result, len(rs))
	for i := range rs {
		out[i] = &rs[i]
	}
	return out
}

// fenceReads bounds the fence reads PutResultsFencedMany makes at once.
const fenceReads = 128

// PutResultsFencedMany stores each set of results as PutResultsFenced
// does, the sets together: every set's fence is read (fenceReads at a
// time, each through the stream leader), then the results of the sets
// whose fence is still theirs are published together and their
// acknowledgements awaited (publishEach). A set's results are stored only
// after its own fence was read back, as one by one; the engine's writer,
// which stores a batch of results of many tasks (one each, for tasks of
// one target), waits two round trips instead of two per task.
func (s *Store) PutResultsFencedMany(ctx context.Context, sets []engine.FencedResults) []error {
	errs := make([]error, len(sets))
	if err := s.check(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for i, set := range sets {
		for _, r := range set.Results {
			if r.TaskID != set.TaskID {
				errs[i] = fmt.Errorf("put results of task %s: a result of task %s among them", set.TaskID, r.TaskID)
				break
			}
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, fenceReads)
	for i, set := range sets {
		if errs[i] != nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			sent := time.Now()
			now, err := s.fence(ctx, set.TaskID)
			if err == nil {
				s.fenceSeen(set.TaskID, now, sent)
			}
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("put results of task %s: read its fence: %w", set.TaskID, err)
			case now != set.Fence:
				errs[i] = fmt.Errorf("put results of task %s: a newer owner fenced the task (fence %d, ours %d): %w", set.TaskID, now, set.Fence, model.ErrConflict)
			}
		})
	}
	wg.Wait()
	var msgs []pubMsg
	var of []int // the set of each message
	for i, set := range sets {
		if errs[i] != nil {
			continue
		}
		ms, err := s.resultMsgs(ctx, set.Results)
		for _, m := range ms {
			msgs = append(msgs, m)
			of = append(of, i)
		}
		errs[i] = err
	}
	p := s.publishEach(ctx, msgs, false)
	defer s.recyclePacks(msgs, p)
	for j, err := range p.failed {
		if err != nil {
			errs[of[j]] = errors.Join(errs[of[j]], err)
		}
	}
	if p.stop != nil {
		for j := p.from; j < len(msgs); j++ {
			if i := of[j]; errs[i] == nil || !errors.Is(errs[i], p.stop) {
				errs[i] = errors.Join(errs[i], fmt.Errorf("%s: not stored: %w", msgs[j].desc(), p.stop))
			}
		}
	}
	return errs
}

// UpdateTaskFenced stores t as UpdateTask does, unless the task's fence is
// no longer fence (model.ErrConflict): a compare-and-set on the task key
// after the fence is checked, repeated when the key changed meanwhile.
// The first compare is at the revision this store wrote last, when it
// knows it (the task's index): if the key is still there, nobody wrote it
// since; if not, the key is read, as it is when the revision is unknown.
func (s *Store) UpdateTaskFenced(ctx context.Context, fence uint64, t model.Task) error {
	if err := s.check(); err != nil {
		return err
	}
	tk := enc(t.ID)
	s.mu.Lock()
	idx := s.index[t.ID]
	var rev uint64
	var inline []byte // the targets the record holds, kept (taskRecord)
	checked := false  // the fence as of fenceFresh ago (fenceSeen)
	if idx != nil {
		rev, inline = idx.rev, idx.inline
		checked = idx.fence == fence && time.Since(idx.fenceAt) < fenceFresh
	}
	s.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if rev == 0 || attempt > 0 {
			e, err := do(s, ctx, s.streams.tasks, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.leaderGet(ctx, s.on().tasks, tk) })
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				return fmt.Errorf("update task %s: %w", t.ID, model.ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("update task %s: %w", t.ID, err)
			}
			if inline, err = inlineOf(e.Value()); err != nil {
				return fmt.Errorf("update task %s: decode: %w", t.ID, err)
			}
			rev = e.Revision()
		}
		data, err := taskRecord(&t, inline)
		if err != nil {
			return fmt.Errorf("update task %s: %w", t.ID, err)
		}
		if !checked || attempt > 0 {
			now, err := s.fence(ctx, t.ID)
			if err != nil {
				return fmt.Errorf("update task %s: read its fence: %w", t.ID, err)
			}
			if now != fence {
				return fmt.Errorf("update task %s: a newer owner fenced the task (fence %d, ours %d): %w", t.ID, now, fence, model.ErrConflict)
			}
		}
		newRev, err := do(s, ctx, s.streams.tasks, func(ctx context.Context) (uint64, error) { return s.on().tasks.Update(ctx, tk, data, rev) })
		switch {
		case err == nil:
			if idx != nil {
				s.mu.Lock()
				idx.rev = newRev
				s.mu.Unlock()
			}
			s.forgetIndex(t)
			return nil
		case !errors.Is(err, jetstream.ErrKeyRevisionMismatch) || attempt >= 10:
			return fmt.Errorf("update task %s: %w", t.ID, err)
		}
	}
}
