package jsstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Read-your-writes across servers. A write is acknowledged once its
// stream's leader has stored it with a quorum of replicas; a replica not
// in that quorum may still lag. So, on replicated buckets (Replicas > 1),
// what must show every acknowledged write, whichever server wrote it, is
// read through the stream leader: a key (get), and the end of a listing
// (lastSeq: a listing reads on until it has delivered the leader's last
// message for its filter, see list). A KV Get or a message get is
// otherwise a direct get, which any replica may answer. With one replica
// the only copy is the leader's, and the direct get is kept (it does not
// queue behind the JetStream API).

// consistent says whether reads must go through the stream leader (see
// above).
func (s *Store) consistent() bool { return s.opts.Replicas > 1 }

// get reads key of kv so that what any server wrote is read back: through
// the stream leader on a replicated bucket, never a value or a not-found
// older than an acknowledged write (see above).
func (s *Store) get(ctx context.Context, kv jetstream.KeyValue, key string) (jetstream.KeyValueEntry, error) {
	if s.consistent() {
		return do(s, ctx, kvName(kv), func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.leaderGet(ctx, kv, key) })
	}
	return do(s, ctx, kvName(kv), func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.current(kv).Get(ctx, key) })
}

// leaderMsg is the last message of subject (wildcards allowed) in stream,
// read through the stream's leader (the non-direct message-get API);
// jetstream.ErrMsgNotFound when there is none.
type leaderMsg struct {
	Seq  uint64    `json:"seq"`
	Hdrs []byte    `json:"hdrs"`
	Data []byte    `json:"data"`
	Time time.Time `json:"time"`
}

func (s *Store) leaderLast(ctx context.Context, stream, subject string) (*leaderMsg, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": subject})
	js := s.on().js
	msg, err := js.Conn().RequestWithContext(ctx, apiPrefix(js)+"STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, fmt.Errorf("leader get %s %s: %w", stream, subject, err)
	}
	var resp struct {
		Error *struct {
			Code    int    `json:"code"`
			ErrCode int    `json:"err_code"`
			Desc    string `json:"description"`
		} `json:"error"`
		Message *leaderMsg `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, fmt.Errorf("leader get %s %s: decode: %w", stream, subject, err)
	}
	if resp.Error != nil {
		if resp.Error.Code == 404 {
			return nil, jetstream.ErrMsgNotFound
		}
		return nil, &jetstream.APIError{Code: resp.Error.Code, ErrorCode: jetstream.ErrorCode(resp.Error.ErrCode), Description: resp.Error.Desc}
	}
	if resp.Message == nil {
		return nil, fmt.Errorf("leader get %s %s: empty answer", stream, subject)
	}
	return resp.Message, nil
}

// apiPrefix is the prefix js sends its own API requests under, with its
// final dot: "$JS.API." unless js was made for a domain or with a prefix
// (NewWithDomain, NewWithAPIPrefix), as jetstream derives it.
func apiPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	return jetstream.DefaultAPIPrefix
}

// leaderGet reads the last message of key through the stream's leader
// (leaderLast); ErrKeyNotFound when there is none or it is a delete or
// purge marker.
func (s *Store) leaderGet(ctx context.Context, kv jetstream.KeyValue, key string) (jetstream.KeyValueEntry, error) {
	m, err := s.leaderLast(ctx, "KV_"+kv.Bucket(), "$KV."+kv.Bucket()+"."+key)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, jetstream.ErrKeyNotFound
	}
	if err != nil {
		return nil, err
	}
	if bytes.Contains(m.Hdrs, []byte("KV-Operation: DEL")) || bytes.Contains(m.Hdrs, []byte("KV-Operation: PURGE")) {
		return nil, jetstream.ErrKeyNotFound
	}
	return leaderEntry{bucket: kv.Bucket(), key: key, value: m.Data, rev: m.Seq, created: m.Time}, nil
}

// leaderEntry is a KV entry read through the stream leader.
type leaderEntry struct {
	bucket, key string
	value       []byte
	rev         uint64
	created     time.Time
}

func (e leaderEntry) Bucket() string                  { return e.bucket }
func (e leaderEntry) Key() string                     { return e.key }
func (e leaderEntry) Value() []byte                   { return e.value }
func (e leaderEntry) Revision() uint64                { return e.rev }
func (e leaderEntry) Created() time.Time              { return e.created }
func (e leaderEntry) Delta() uint64                   { return 0 }
func (e leaderEntry) Operation() jetstream.KeyValueOp { return jetstream.KeyValuePut }
