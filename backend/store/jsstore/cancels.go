package jsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend/engine"
)

var _ engine.CancelBoard = (*Store)(nil)

// RequestCancel records that taskID is to be cancelled: a Put of its key
// in the cancels bucket, the task id as the value (a key may be a digest).
// A repeat is harmless.
func (s *Store) RequestCancel(ctx context.Context, taskID string) error {
	if err := s.check(); err != nil {
		return err
	}
	if _, err := do(s, ctx, s.streams.cancels, func(ctx context.Context) (uint64, error) { return s.on().cancels.Put(ctx, enc(taskID), []byte(taskID)) }); err != nil {
		return fmt.Errorf("request cancel of %s: %w", taskID, err)
	}
	return nil
}

// CancelRequested reports whether a cancel of taskID is recorded.
func (s *Store) CancelRequested(ctx context.Context, taskID string) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	_, err := s.get(ctx, s.on().cancels, enc(taskID)) // a cancel asked of another server is seen
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read cancel of %s: %w", taskID, err)
	}
	return true, nil
}

// WatchCancels sends the task id of every cancel recorded from the call
// on, until ctx ends.
func (s *Store) WatchCancels(ctx context.Context) (<-chan string, error) {
	return watchNew(s, ctx, "cancels", func(b *bound) jetstream.KeyValue { return b.cancels },
		func(v []byte) (string, bool) { return string(v), true })
}

// watchNew sends decode(value) of every key of the bucket pick chooses
// written from the call on (a KV watch of new values, started again from
// where it was should it end, on the connection in use then), until ctx
// ends; a value decode refuses (false) is skipped.
func watchNew[T any](s *Store, ctx context.Context, what string, pick func(*bound) jetstream.KeyValue, decode func([]byte) (T, bool)) (<-chan T, error) {
	return watchEntries(s, ctx, what, pick, func(e jetstream.KeyValueEntry) (T, bool) { return decode(e.Value()) })
}

// watchEntries is watchNew with decode given the whole entry (its
// revision too).
func watchEntries[T any](s *Store, ctx context.Context, what string, pick func(*bound) jetstream.KeyValue, decode func(jetstream.KeyValueEntry) (T, bool)) (<-chan T, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	w, err := do(s, ctx, kvName(pick(s.on())), func(context.Context) (jetstream.KeyWatcher, error) {
		return pick(s.on()).WatchAll(ctx, jetstream.UpdatesOnly(), jetstream.IgnoreDeletes())
	})
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", what, err)
	}
	out := make(chan T, 64)
	go func() {
		defer close(out)
		var high uint64
		for {
		read:
			for {
				// ctx ends the read too: a watcher whose connection closed
				// first may never close its channel.
				select {
				case <-ctx.Done():
					_ = w.Stop()
					return
				case e, ok := <-w.Updates():
					if !ok {
						break read
					}
					if e == nil {
						continue
					}
					high = max(high, e.Revision())
					v, ok := decode(e)
					if !ok {
						continue
					}
					select {
					case out <- v:
					case <-ctx.Done():
					}
				}
			}
			_ = w.Stop()
			for ctx.Err() == nil {
				if w, err = pick(s.on()).WatchAll(ctx, jetstream.ResumeFromRevision(high+1), jetstream.IgnoreDeletes()); err == nil {
					break
				}
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
			if ctx.Err() != nil {
				return
			}
		}
	}()
	return out, nil
}
