package jsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/s2"
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
	what    string // for errors (see desc)
	// status, when what is "", is the status m writes: what names it is
	// made only when an error needs it (not a Sprintf for each of the
	// 100,000 statuses of a first op over a fleet).
	status *engine.HostStatus
	del    bool   // a KV delete of the subject's key (data unused)
	msgID  string // Nats-Msg-Id: the stream keeps one message per id within its duplicates window
	// create: stored only if its subject has no message yet (a KV
	// Create of a key never written: Nats-Expected-Last-Subject-Sequence
	// 0); repeated after its acknowledgement was lost, it is refused.
	create bool
	// expect (with expectSet): stored only if its subject's last
	// message is at that stream sequence (a KV write at a revision).
	expect    uint64
	expectSet bool
	// purge: a KV purge of the subject's key (data unused): a marker that
	// replaces every earlier message of the key, as KeyValue.Purge.
	purge bool
	// pack: data is a result pack's buffer (packBuf), reusable once the
	// message is stored (recyclePacks).
	pack bool
}

// desc is what m writes, for errors.
func (m *pubMsg) desc() string {
	if m.what == "" && m.status != nil {
		return fmt.Sprintf("put status of %s on %s", m.status.Status.ProcKey, m.status.Host)
	}
	return m.what
}

// headed reports whether m is published with headers (msg): plain data
// otherwise.
func (m *pubMsg) headed() bool {
	return m.del || m.purge || m.msgID != "" || m.create || m.expectSet
}

// msg is m as published: a KV delete is a message carrying the
// KV-Operation header, as KeyValue.Delete publishes it.
func (m pubMsg) msg() *nats.Msg {
	msg := &nats.Msg{Subject: m.subject, Data: m.data}
	if m.headed() {
		msg.Header = nats.Header{}
	}
	switch {
	case m.create:
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	case m.expectSet:
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(m.expect, 10))
	}
	switch {
	case m.purge:
		msg.Data = nil
		msg.Header.Set("KV-Operation", "PURGE")
		msg.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	case m.del:
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
	return s.publishEach(ctx, msgs, false).err(ctx, msgs)
}

// err is publishAll's error for msgs published (p).
func (p published) err(ctx context.Context, msgs []pubMsg) error {
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

// streamsOf are the streams msgs are stored in, each once.
func (s *Store) streamsOf(msgs []pubMsg) []string {
	var on []string
	for _, m := range msgs {
		if n := s.streamOf(m.subject); !slices.Contains(on, n) {
			on = append(on, n)
		}
	}
	return on
}

// published is what publishEach did: failed[i] is why msgs[i] was not
// stored (failed is nil when every message tried was); stop, when not
// nil, ended it early (ctx ended, or the caller's store bound was spent)
// and msgs[from:] were not tried or not waited for.
type published struct {
	failed []error
	stop   error
	from   int
	// seqs[i] is the stream sequence msgs[i] was stored at (when
	// publishEach was asked for them).
	seqs []uint64
	// unsettled: a message was published again while its pipelined
	// publish was still unanswered (its window's time was up). Kept from
	// when the client library's asynchronous publish could still send
	// that first message again (a no-responders retry) after the window:
	// the pipelined publish (acks.go) is a core publish, copied by the
	// client before it returns, and is not sent again; recyclePacks still
	// reuses no buffer then (a rare case: the window timed out).
	unsettled bool
}

// errOf is why msgs[i], of the msgs published (p), was not stored (nil:
// it was): its own failure, or the stop that ended publishEach before it
// was tried or its acknowledgement awaited.
func (p published) errOf(msgs []pubMsg, i int) error {
	switch {
	case p.stop != nil && i >= p.from:
		return fmt.Errorf("%s: not stored: %w", msgs[i].desc(), p.stop)
	case p.failed != nil:
		return p.failed[i]
	}
	return nil
}

// publishEach stores every message of msgs, pubWindow at a time, and says
// which failed (and, with seqs, where each was stored).
func (s *Store) publishEach(ctx context.Context, msgs []pubMsg, seqs bool) published {
	var p published
	if seqs {
		p.seqs = make([]uint64, len(msgs))
	}
	fail := func(i int, err error) {
		if p.failed == nil {
			p.failed = make([]error, len(msgs))
		}
		p.failed[i] = err
	}
	// With the caller's bound (an API call), the acknowledgements are
	// awaited as do awaits an answer: an earlier call of the request that
	// found the store down fails this one at once, and the check (judge)
	// ends the wait as soon as JetStream is found unreachable, within the
	// bound; when JetStream answers, the wait keeps its attemptTimeout.
	t0 := time.Now()
	wait := ctx
	bound, bounded := backend.StoreDeadline(ctx)
	if bounded && len(msgs) > 0 {
		if err := backend.StoreDown(ctx); err != nil {
			p.stop = err
			return p
		}
		pctx, abort := context.WithCancelCause(ctx)
		stop := s.judge(t0, bound, s.streamsOf(msgs), abort)
		defer func() {
			stop()
			abort(nil)
		}()
		wait = pctx
	}
	for start := 0; start < len(msgs); start += pubWindow {
		part := msgs[start:min(start+pubWindow, len(msgs))]
		// Published with a reply subject of the store's acker: each
		// answer is settled there (acks.go); a message not sent, or
		// answered with anything but its stored sequence, or not within
		// attemptTimeout, is published again synchronously below.
		b := s.on()
		acks := b.acks()
		w, err := acks.open(len(part))
		if err != nil {
			w = nil // every message of the window goes the synchronous way
		}
		if w != nil {
			nc := b.js.Conn()
			for i := range part {
				m := &part[i]
				var err error
				if m.headed() {
					msg := m.msg()
					msg.Reply = acks.reply(w, i)
					err = nc.PublishMsg(msg)
				} else {
					err = nc.PublishRequest(m.subject, acks.reply(w, i), m.data)
				}
				if err != nil {
					acks.settle(w, i, ackRefused)
				}
			}
		}
		timer := time.NewTimer(attemptTimeout)
		if w != nil {
			select {
			case <-w.done:
			case <-timer.C:
				// The window is up: those unanswered are published again.
				p.unsettled = true
			case <-wait.Done():
				timer.Stop()
				acks.close(w)
				stored := firstUnsettled(acks, w)
				if p.seqs != nil {
					for i := range stored {
						p.seqs[start+i] = acks.seq(w, i)
					}
				}
				p.stop, p.from = ctx.Err(), start+stored
				if p.stop == nil { // judged unreachable
					p.stop = unavailable(time.Since(t0), context.Cause(wait))
					backend.MarkStoreDown(ctx, p.stop)
				}
				return p
			}
			acks.close(w)
		}
		timer.Stop()
		for i := range part {
			if w != nil {
				if seq := acks.seq(w, i); seq != 0 && seq != ackRefused {
					if p.seqs != nil {
						p.seqs[start+i] = seq
					}
					continue
				}
			}
			m := part[i]
			ack, err := do(s, ctx, s.streamOf(m.subject), func(ctx context.Context) (*jetstream.PubAck, error) { return s.on().js.PublishMsg(ctx, m.msg()) })
			if err == nil && p.seqs != nil {
				p.seqs[start+i] = ack.Sequence
			}
			if err != nil {
				fail(start+i, fmt.Errorf("%s: %w", m.desc(), err))
				if bounded && errors.Is(err, model.ErrUnavailable) {
					// The caller's bound is spent: the rest would wait as long each.
					p.stop, p.from = err, start+i+1
					return p
				}
			}
		}
	}
	p.from = len(msgs)
	return p
}

// kvSubject is the subject a KV Put of key in kv publishes to.
func kvSubject(kv jetstream.KeyValue, key string) string { return "$KV." + kv.Bucket() + "." + key }

// resultSize is room for a result's JSON (a status op's is about 700
// bytes): one allocation, not the appends' doubling from nothing.
const resultSize = 1024

// Result packs. The results of one task written together are stored as
// few messages, not one each: a key <enc(task id)>.z<16 hex digits> holds
// a pack, a JSON array of {"i": target index, "r": result}, of about
// packBytes at most (a result bigger than that goes alone), compressed
// as an S2 block (see packCompressed); a key <enc(task id)>.p<16 hex
// digits> holds the same array uncompressed, as packs were written
// before, and is read as it always was. A single
// result is stored under its target's own key <enc(task id)>.<index>, as
// every result was before packs (such keys are read as they always were).
// Each pack key is random, never reused: a pack never replaces another
// (two engines writing one task across a takeover write different keys);
// a pack retried after a failed publish keeps its key, so storing it again
// is harmless. A reader takes every key of the task, of both kinds, and
// keeps for each target the result of the highest revision (within a
// pack, the last): a result stored again later (a late answer's
// correction) wins over the pack that held its first one.
const packBytes = 256 << 10

// packed is a result in a pack, by its target's index.
type packed struct {
	I int          `json:"i"`
	R model.Result `json:"r"`
}

// resultsOf decodes a results-bucket entry of key (task id encoded, a dot,
// then an index or a pack name) into the results it holds.
func resultsOf(key string, value []byte) ([]packed, error) {
	_, c, _ := strings.Cut(key, ".")
	if strings.HasPrefix(c, "z") {
		text, err := unpack(value)
		if err != nil {
			return nil, fmt.Errorf("decode result pack %s: %w", key, err)
		}
		value, c = text, "p"
	}
	if strings.HasPrefix(c, "p") {
		var p []packed
		if err := json.Unmarshal(value, &p); err != nil {
			return nil, fmt.Errorf("decode result pack %s: %w", key, err)
		}
		return p, nil
	}
	i, err := strconv.Atoi(c)
	if err != nil {
		return nil, fmt.Errorf("result key %s", key)
	}
	var r model.Result
	if err := json.Unmarshal(value, &r); err != nil {
		return nil, fmt.Errorf("decode %s: %w", key, err)
	}
	return []packed{{I: i, R: r}}, nil
}

// packCompressed: why packs are compressed. The results of one op over
// 100,000 hosts were ~64 MB of pack JSON (~760 bytes a result, mostly
// the same names, paths and times again), every byte of it copied by
// the NATS client and server (a 256 KB message is gathered in a buffer
// of its own by the server's parser) and written to disk; S2 (the NATS
// server's own compression) takes it to ~15 MB for ~0.1 ms a pack. The
// file store's 4 MB block buffers did not shrink with it: a block's
// cache is kept until it expires or a collection finds it idle,
// whatever was written.

// unpack is the JSON of a compressed pack's value.
func unpack(value []byte) ([]byte, error) {
	n, err := s2.DecodedLen(value)
	if err != nil {
		return nil, err
	}
	if n > maxPackText {
		return nil, fmt.Errorf("%d bytes uncompressed, more than the %d a pack may hold", n, maxPackText)
	}
	return s2.Decode(nil, value)
}

// maxPackText bounds the uncompressed size of a pack read: a corrupt
// length is refused, not allocated. A pack is packBytes at most unless
// one result is bigger, and no result the writer is given comes near it:
// a server keeps of an agent's reply what model.BoundReply leaves (its
// output and message MaxOutput each, its status's texts MaxStatusText),
// a few hundred KB of JSON at the most, escaped.
const maxPackText = 64 << 20

// packKey is a new compressed pack's key for the task encoded tk.
func packKey(tk string) string {
	return tk + ".z" + fmt.Sprintf("%016x", rand.Uint64())
}

// PutResults stores many results as PutResult does, pipelined: each
// task's are packed (see packBytes).
func (s *Store) PutResults(ctx context.Context, rs []model.Result) error {
	if err := s.check(); err != nil {
		return err
	}
	var errs []error
	var msgs []pubMsg
	for _, set := range byTask(refs(rs)) {
		ms, err := s.resultMsgs(ctx, set)
		errs = append(errs, err)
		msgs = append(msgs, ms...)
	}
	p := s.publishEach(ctx, msgs, false)
	s.recyclePacks(msgs, p)
	errs = append(errs, p.err(ctx, msgs))
	return errors.Join(errs...)
}

// byTask is rs by task, each task's in their order, the tasks in the
// order their first result came.
func byTask(rs []*model.Result) [][]*model.Result {
	at := map[string]int{}
	var out [][]*model.Result
	for _, r := range rs {
		i, ok := at[r.TaskID]
		if !ok {
			i = len(out)
			at[r.TaskID] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

// resultMsgs are rs, results of one task, as stored: a single one under
// its target's index, more in packs. A result that cannot be stored (its
// task or target unknown) is left out, with its error.
func (s *Store) resultMsgs(ctx context.Context, rs []*model.Result) ([]pubMsg, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	id := rs[0].TaskID
	idx, err := s.targetIndex(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("put results of task %s: %w", id, err)
	}
	var errs []error
	type one struct {
		i int
		r *model.Result
	}
	all := make([]one, 0, len(rs))
	for _, r := range rs {
		if r.TaskID != id {
			errs = append(errs, fmt.Errorf("put results of task %s: a result of task %s among them", id, r.TaskID))
			continue
		}
		i, ok := idx.targets.find(r.Host, r.ProcKey)
		if !ok {
			errs = append(errs, fmt.Errorf("put result of task %s: %s %s is not a target: %w", id, r.Host, r.ProcKey, model.ErrNotFound))
			continue
		}
		if r.State == "" {
			r.State = model.StatePending
		}
		all = append(all, one{i, r})
	}
	tk := enc(id)
	if len(all) == 1 {
		// Alone: no encoder (its quoted strings and seconds kept for the
		// results after, ~2.8 KB) for one result.
		r := all[0].r
		data, err := model.AppendResultJSON(make([]byte, 0, resultSize), r)
		if err != nil {
			return nil, errors.Join(append(errs, fmt.Errorf("put result of task %s: %w", id, err))...)
		}
		return []pubMsg{{subject: kvSubject(s.on().results, tk+"."+strconv.Itoa(all[0].i)), data: data,
			what: fmt.Sprintf("put result of task %s for %s %s", id, r.Host, r.ProcKey)}}, errors.Join(errs...)
	}
	var re model.ResultEncoder // the strings and times the results share, written once
	var msgs []pubMsg
	var pack, buf []byte
	n := 0
	flush := func() {
		if n == 0 {
			return
		}
		pack = append(pack, ']')
		z := s2.Encode(s.packBuf(s2.MaxEncodedLen(len(pack))), pack)
		s.recyclePack(pack) // z holds the results now
		msgs = append(msgs, pubMsg{subject: kvSubject(s.on().results, packKey(tk)), data: z,
			what: fmt.Sprintf("put %d results of task %s", n, id), pack: true})
		pack, n = nil, 0
	}
	for k, x := range all {
		var err error
		buf = append(buf[:0], `{"i":`...)
		buf = strconv.AppendInt(buf, int64(x.i), 10)
		buf = append(buf, `,"r":`...)
		if buf, err = re.Append(buf, x.r); err != nil {
			errs = append(errs, fmt.Errorf("put result of task %s: %w", id, err))
			continue
		}
		buf = append(buf, '}')
		if n > 0 && len(pack)+len(buf)+1 > packBytes {
			flush()
		}
		if n == 0 {
			// Room for what is left at about this result's size.
			pack = s.packBuf(min(packBytes, (len(all)-k)*(len(buf)+8)) + len(buf) + 2)
			pack = append(pack, '[')
		} else {
			pack = append(pack, ',')
		}
		pack = append(pack, buf...)
		n++
	}
	flush()
	return msgs, errors.Join(errs...)
}

// packBuf is an empty buffer for a pack of about size bytes, or for a
// pack's compressed form: a full pack's is reused (recyclePack,
// recyclePacks). An op over 100,000 hosts packs ~64 MB of results, which
// were ~6% of what the server allocated for it.
func (s *Store) packBuf(size int) []byte {
	if size < packPooled {
		return make([]byte, 0, size)
	}
	if b, ok := s.packs.Get().(*[]byte); ok && cap(*b) >= size {
		return (*b)[:0]
	}
	return make([]byte, 0, max(size, packPooledCap))
}

// recyclePack keeps b, a pack's buffer no message holds, for the next
// pack when it is of a size packBuf reuses.
func (s *Store) recyclePack(b []byte) {
	if cap(b) >= packPooled && cap(b) <= 2*packBytes {
		b = b[:0]
		s.packs.Put(&b)
	}
}

// recyclePacks keeps the buffers of msgs' packs for the next ones, once
// p says every message was stored and none was unsettled: then none is
// published again (a publish retried would send a buffer reused
// meanwhile: another pack's results under this pack's key), and NATS
// copied each when it was published. unsettled is kept from when the
// client library's asynchronous publish could send an unanswered message
// again by itself; the pipelined core publish (acks.go) cannot, so it
// only costs a rare window timed out its reuse.
func (s *Store) recyclePacks(msgs []pubMsg, p published) {
	if p.failed != nil || p.stop != nil || p.unsettled {
		return
	}
	for i := range msgs {
		if m := &msgs[i]; m.pack && cap(m.data) >= packPooled && cap(m.data) <= 2*packBytes {
			s.recyclePack(m.data)
			m.data = nil
		}
	}
}

// packPooled is the smallest pack buffer reused; packSlack the room a
// reused one has past packBytes (a pack ends once a result would take it
// past packBytes).
const (
	packPooled = 64 << 10
	packSlack  = 8 << 10
)

// packPooledCap is the capacity of a reused pack buffer: room for a full
// pack (packBytes and packSlack) and for the compressed form of one.
var packPooledCap = s2.MaxEncodedLen(packBytes + packSlack)

// statusChunk is the size of the chunks status records are written in,
// statusRoom the room a chunk must have left for the next record to be
// written in it (one that needs more grows into an array of its own).
const (
	statusChunk = 64 << 10
	statusRoom  = 1 << 10
)

// PutProcStatuses stores many last known statuses as PutProcStatus does, pipelined.
// While a status watch runs, each of sts is kept by address (ownStatuses)
// until the watch reads it back: the caller must not change sts after.
func (s *Store) PutProcStatuses(ctx context.Context, sts []engine.HostStatus) error {
	if err := s.check(); err != nil {
		return err
	}
	var errs []error
	msgs := make([]pubMsg, 0, len(sts))
	keys := make([]string, 0, len(sts))
	// The records are written one after the other into shared chunks of
	// statusChunk bytes, each message's data a piece of one (a status's
	// record is ~450 bytes: one allocation for ~145 of them, not one or
	// more each); a chunk stays alive while any of its pieces does.
	var chunk []byte
	for i := range sts {
		x := &sts[i]
		if x.Status.ProcKey == "" {
			errs = append(errs, fmt.Errorf("put status on %s: proc key is empty", x.Host))
			continue
		}
		key, err := statusKey(x.Host, x.Status.ProcKey)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if cap(chunk)-len(chunk) < statusRoom {
			chunk = make([]byte, 0, statusChunk)
		}
		from := len(chunk)
		next, err := model.AppendHostStatusJSON(chunk, x.Host, &x.Status)
		if err != nil {
			errs = append(errs, fmt.Errorf("put status on %s: %w", x.Host, err))
			continue
		}
		data := next[from:len(next):len(next)]
		if &next[0] == &chunk[:1][0] {
			chunk = next // written within the chunk: the next follows it
		} else {
			chunk = nil // a record past the room left went to its own array
		}
		msgs = append(msgs, pubMsg{subject: kvSubject(s.on().status, key), data: data, status: x})
		keys = append(keys, key)
	}
	s.own.writing(msgs, keys)
	// Many statuses: the watch's consumer is stopped while they are
	// stored, and the watch hands them on itself (statuswatch.go).
	var resume func(ownRun)
	if w := s.swatch.one(); w != nil && len(msgs) >= ownSkipMin {
		resume, _ = w.stop(ctx)
	}
	p := s.publishEach(ctx, msgs, resume != nil)
	s.own.failed(msgs, keys, p)
	if resume != nil {
		run := ownRun{msgs: msgs, keys: keys, seqs: p.seqs}
		for i := range run.seqs {
			if p.errOf(msgs, i) != nil {
				run.seqs[i] = 0 // not stored: never handed on
			}
		}
		resume(run)
	}
	errs = append(errs, p.err(ctx, msgs))
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
