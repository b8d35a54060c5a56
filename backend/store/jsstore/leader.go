package jsstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// get reads key of kv so that what any server wrote is read back
// (read-your-writes across servers). A KV Get is a direct get, which any
// replica may answer, also one that has not caught up with the write yet;
// so a key it does not know is asked again of the stream's leader, which
// has every acknowledged write. A stale value is not possible for the keys
// read this way that matter (a task record exists from its creation on).
func (s *Store) get(ctx context.Context, kv jetstream.KeyValue, key string) (jetstream.KeyValueEntry, error) {
	e, err := do(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return kv.Get(ctx, key) })
	if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return e, err
	}
	return do(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.leaderGet(ctx, kv, key) })
}

// leaderGet reads the last message of key through the stream's leader
// (the non-direct message-get API); ErrKeyNotFound when there is none or
// it is a delete or purge marker.
func (s *Store) leaderGet(ctx context.Context, kv jetstream.KeyValue, key string) (jetstream.KeyValueEntry, error) {
	stream := "KV_" + kv.Bucket()
	req, _ := json.Marshal(map[string]string{"last_by_subj": "$KV." + kv.Bucket() + "." + key})
	msg, err := s.on().js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, fmt.Errorf("leader get %s %s: %w", kv.Bucket(), key, err)
	}
	var resp struct {
		Error *struct {
			Code    int    `json:"code"`
			ErrCode int    `json:"err_code"`
			Desc    string `json:"description"`
		} `json:"error"`
		Message *struct {
			Seq  uint64    `json:"seq"`
			Hdrs []byte    `json:"hdrs"`
			Data []byte    `json:"data"`
			Time time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, fmt.Errorf("leader get %s %s: decode: %w", kv.Bucket(), key, err)
	}
	if resp.Error != nil {
		if resp.Error.Code == 404 {
			return nil, jetstream.ErrKeyNotFound
		}
		return nil, &jetstream.APIError{Code: resp.Error.Code, ErrorCode: jetstream.ErrorCode(resp.Error.ErrCode), Description: resp.Error.Desc}
	}
	if resp.Message == nil {
		return nil, fmt.Errorf("leader get %s %s: empty answer", kv.Bucket(), key)
	}
	if bytes.Contains(resp.Message.Hdrs, []byte("KV-Operation: DEL")) || bytes.Contains(resp.Message.Hdrs, []byte("KV-Operation: PURGE")) {
		return nil, jetstream.ErrKeyNotFound
	}
	return leaderEntry{bucket: kv.Bucket(), key: key, value: resp.Message.Data, rev: resp.Message.Seq, created: resp.Message.Time}, nil
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
