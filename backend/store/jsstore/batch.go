package jsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend"
	"gseproc/backend/engine"
	"gseproc/model"
)

// Batched writes (engine.BatchStore): many results, statuses or events are
// published without waiting for each acknowledgement in turn, up to
// pubWindow at a time; the call returns once every one is acknowledged
// (stored), so a batch is exactly as durable as the same writes made one
// by one. A publish that fails or goes unacknowledged is made again
// synchronously, as do() would (each write here is safe to repeat).

// pubWindow bounds the acknowledgements awaited at once per batch.
const pubWindow = 1000

type pubMsg struct {
	subject string
	data    []byte
	what    string // for errors
	del     bool   // a KV delete of the subject's key (data unused)
	msgID   string // Nats-Msg-Id: the stream keeps one message per id within its duplicates window
}

// msg is m as published: a KV delete is a message carrying the
// KV-Operation header, as KeyValue.Delete publishes it.
func (m pubMsg) msg() *nats.Msg {
	msg := &nats.Msg{Subject: m.subject, Data: m.data}
	if m.del || m.msgID != "" {
		msg.Header = nats.Header{}
	}
	if m.del {
		msg.Data = nil
		msg.Header.Set("KV-Operation", "DEL")
	}
	if m.msgID != "" {
		msg.Header.Set(jetstream.MsgIDHeader, m.msgID)
	}
	return msg
}

// publishAll stores every message of msgs, pubWindow at a time.
func (s *Store) publishAll(ctx context.Context, msgs []pubMsg) error {
	p := s.publishEach(ctx, msgs)
	if p.stop != nil && ctx.Err() != nil && errors.Is(p.stop, ctx.Err()) {
		return ctx.Err()
	}
	var errs []error
	for _, err := range p.failed {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if rest := len(msgs) - p.from; p.stop != nil && rest > 0 {
		errs = append(errs, fmt.Errorf("%d more writes not tried", rest))
	}
	return errors.Join(errs...)
}

// published is what publishEach did: failed[i] is why msgs[i] was not
// stored (failed is nil when every message tried was); stop, when not
// nil, ended it early (ctx ended, or the caller's store bound was spent)
// and msgs[from:] were not tried or not waited for.
type published struct {
	failed []error
	stop   error
	from   int
}

// publishEach stores every message of msgs, pubWindow at a time, and says
// which failed.
func (s *Store) publishEach(ctx context.Context, msgs []pubMsg) published {
	var p published
	fail := func(i int, err error) {
		if p.failed == nil {
			p.failed = make([]error, len(msgs))
		}
		p.failed[i] = err
	}
	_, bounded := backend.StoreWait(ctx)
	for start := 0; start < len(msgs); start += pubWindow {
		part := msgs[start:min(start+pubWindow, len(msgs))]
		futs := make([]jetstream.PubAckFuture, len(part))
		for i, m := range part {
			f, err := s.on().js.PublishMsgAsync(m.msg())
			if err == nil {
				futs[i] = f
			}
		}
		timer := time.NewTimer(attemptTimeout)
		for i, f := range futs {
			if f != nil {
				select {
				case <-f.Ok():
					continue
				case <-f.Err():
				case <-timer.C:
					timer.Reset(0) // the window is up: the rest are retried as they come
				case <-ctx.Done():
					timer.Stop()
					p.stop, p.from = ctx.Err(), start+i
					return p
				}
			}
			m := part[i]
			if _, err := do(s, ctx, func(ctx context.Context) (*jetstream.PubAck, error) { return s.on().js.PublishMsg(ctx, m.msg()) }); err != nil {
				fail(start+i, fmt.Errorf("%s: %w", m.what, err))
				if bounded && errors.Is(err, model.ErrUnavailable) {
					// The caller's bound is spent: the rest would wait as long each.
					timer.Stop()
					p.stop, p.from = err, start+i+1
					return p
				}
			}
		}
		timer.Stop()
	}
	p.from = len(msgs)
	return p
}

// kvSubject is the subject a KV Put of key in kv publishes to.
func kvSubject(kv jetstream.KeyValue, key string) string { return "$KV." + kv.Bucket() + "." + key }

// resultSize is room for a result's JSON (a status op's is about 700
// bytes): one allocation, not the appends' doubling from nothing.
const resultSize = 1024

// PutResults stores many results as PutResult does, pipelined.
func (s *Store) PutResults(ctx context.Context, rs []model.Result) error {
	if err := s.check(); err != nil {
		return err
	}
	var errs []error
	msgs := make([]pubMsg, 0, len(rs))
	for _, r := range rs {
		m, err := s.resultMsg(ctx, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		msgs = append(msgs, m)
	}
	errs = append(errs, s.publishAll(ctx, msgs))
	return errors.Join(errs...)
}

// resultMsg is r as PutResult stores it: under its target's index in its
// task.
func (s *Store) resultMsg(ctx context.Context, r model.Result) (pubMsg, error) {
	idx, err := s.targetIndex(ctx, r.TaskID)
	if err != nil {
		return pubMsg{}, fmt.Errorf("put result of task %s: %w", r.TaskID, err)
	}
	i, ok := idx.targets[model.Target{Host: r.Host, ProcKey: r.ProcKey}.Pair()]
	if !ok {
		return pubMsg{}, fmt.Errorf("put result of task %s: %s %s is not a target: %w", r.TaskID, r.Host, r.ProcKey, model.ErrNotFound)
	}
	if r.State == "" {
		r.State = model.StatePending
	}
	data, err := model.AppendResultJSON(make([]byte, 0, resultSize), &r)
	if err != nil {
		return pubMsg{}, fmt.Errorf("put result of task %s: %w", r.TaskID, err)
	}
	return pubMsg{subject: kvSubject(s.on().results, enc(r.TaskID)+"."+strconv.Itoa(i)), data: data,
		what: fmt.Sprintf("put result of task %s for %s %s", r.TaskID, r.Host, r.ProcKey)}, nil
}

// PutProcStatuses stores many last known statuses as PutProcStatus does, pipelined.
func (s *Store) PutProcStatuses(ctx context.Context, sts []engine.HostStatus) error {
	if err := s.check(); err != nil {
		return err
	}
	var errs []error
	msgs := make([]pubMsg, 0, len(sts))
	for _, x := range sts {
		if x.Status.ProcKey == "" {
			errs = append(errs, fmt.Errorf("put status on %s: proc key is empty", x.Host))
			continue
		}
		key, err := statusKey(x.Host, x.Status.ProcKey)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		data, err := json.Marshal(statusRec{x.Host, x.Status})
		if err != nil {
			errs = append(errs, fmt.Errorf("put status on %s: %w", x.Host, err))
			continue
		}
		msgs = append(msgs, pubMsg{subject: kvSubject(s.on().status, key), data: data,
			what: fmt.Sprintf("put status of %s on %s", x.Status.ProcKey, x.Host)})
	}
	errs = append(errs, s.publishAll(ctx, msgs))
	return errors.Join(errs...)
}

// AppendEvents adds many events in order, as AppendEvent does, pipelined.
// An event with an ID is kept once: appended again within
// EventDuplicates (by another server, or after a redelivery), the stream
// drops the copy.
func (s *Store) AppendEvents(ctx context.Context, evs []model.Event) error {
	if err := s.check(); err != nil {
		return err
	}
	msgs := make([]pubMsg, 0, len(evs))
	for _, e := range evs {
		data, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("append event: %w", err)
		}
		// Under its id: the same event appended twice (by two servers,
		// or again after a redelivery) is kept once.
		msgs = append(msgs, pubMsg{subject: s.eventsSubject, data: data, what: "append event", msgID: e.ID})
	}
	return s.publishAll(ctx, msgs)
}
