package jsstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"gseproc/model"
)

// The audit trail is the stream <prefix>_audit on <prefix>.store.audit:
// one message per entry, its stream sequence the entry's Seq, at most
// Options.KeepAudit messages (the oldest go first). Each publish carries a
// message id, so one retried after a lost acknowledgement is stored once.

// auditPage is how many messages one backward step of a query reads.
const auditPage = 1000

// auditSkew is how far a server's clock may be behind another's: a query
// with Since stops scanning back once entries are older than Since by more.
const auditSkew = time.Minute

func (s *Store) openAudit(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	name := s.streams.audit
	var st jetstream.Stream
	err := retry(ctx, func(ctx context.Context) (err error) {
		st, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: name, Subjects: []string{s.auditSubject}, MaxMsgs: int64(s.opts.KeepAudit),
			Discard: jetstream.DiscardOld, Storage: s.storage, Replicas: s.opts.Replicas,
			Duplicates: 2 * time.Minute, Description: "gseproc audit trail",
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("jsstore: stream %s: %w", name, err)
	}
	return st, nil
}

// AppendAudit stores an entry; its Seq is the stream sequence.
func (s *Store) AppendAudit(ctx context.Context, e model.AuditEntry) (uint64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	m, err := s.auditMsg(e)
	if err != nil {
		return 0, err
	}
	ack, err := do(s, ctx, s.streamOf(m.subject), func(ctx context.Context) (*jetstream.PubAck, error) {
		return s.on().js.PublishMsg(ctx, m.msg())
	})
	if err != nil {
		return 0, fmt.Errorf("append audit: %w", err)
	}
	return ack.Sequence, nil
}

// auditMsg is e as stored, under a message id of its own: published again
// (its acknowledgement lost), it is stored once.
func (s *Store) auditMsg(e model.AuditEntry) (pubMsg, error) {
	e.Seq = 0
	data, err := model.AppendAuditJSON(make([]byte, 0, 512), &e) // as json.Marshal (FuzzAuditJSON)
	if err != nil {
		return pubMsg{}, fmt.Errorf("append audit: %w", err)
	}
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return pubMsg{subject: s.auditSubject, data: data, what: "append audit", msgID: hex.EncodeToString(b)}, nil
}

// Audit lists the entries matching q, newest first: it reads the stream
// backwards a page at a time until it has q.Want() entries, reaches the
// first message, or (with q.Since) passes entries older than Since.
func (s *Store) Audit(ctx context.Context, q model.AuditQuery) ([]model.AuditEntry, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	info, err := do(s, ctx, s.streams.audit, func(ctx context.Context) (*jetstream.StreamInfo, error) { return s.on().audit.Info(ctx) })
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	first, last := info.State.FirstSeq, info.State.LastSeq
	if q.Before != 0 && q.Before-1 < last {
		last = q.Before - 1
	}
	want := q.Want()
	out := []model.AuditEntry{}
	if info.State.Msgs == 0 || last < first {
		return out, nil
	}
	for end := last; len(out) < want; {
		start := first
		if end-first >= auditPage {
			start = end - auditPage + 1
		}
		page, err := s.auditRange(ctx, start, end)
		if err != nil {
			return nil, err
		}
		for i := len(page) - 1; i >= 0 && len(out) < want; i-- {
			e := page[i]
			if !q.Since.IsZero() && e.Time.Before(q.Since.Add(-auditSkew)) {
				return out, nil
			}
			if q.Match(e) {
				out = append(out, e)
			}
		}
		if start == first {
			break
		}
		end = start - 1
	}
	return out, nil
}

// auditRange reads the entries with sequence in [start, end], in order.
func (s *Store) auditRange(ctx context.Context, start, end uint64) ([]model.AuditEntry, error) {
	cons, err := do(s, ctx, s.streams.audit, func(ctx context.Context) (jetstream.Consumer, error) {
		return s.on().js.OrderedConsumer(ctx, s.on().audit.CachedInfo().Config.Name, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	out := make([]model.AuditEntry, 0, end-start+1)
	for {
		batch, err := cons.Fetch(int(min(end-start+1, auditPage)), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		got := 0
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return nil, fmt.Errorf("audit: %w", err)
			}
			if md.Sequence.Stream > end {
				return out, nil
			}
			got++
			var e model.AuditEntry
			if err := json.Unmarshal(m.Data(), &e); err != nil {
				return nil, fmt.Errorf("audit: decode entry %d: %w", md.Sequence.Stream, err)
			}
			e.Seq = md.Sequence.Stream
			out = append(out, e)
			if e.Seq == end {
				return out, nil
			}
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		if got == 0 {
			return out, nil // fewer than counted (some aged out meanwhile)
		}
	}
}
