package jsstore

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestPubMsgHeaders: a batched message carries every header its fields
// ask for: a KV delete under a message id keeps its delete marker (it
// once lost it to the id's header, and was stored as an empty value).
func TestPubMsgHeaders(t *testing.T) {
	for _, tc := range []struct {
		name      string
		m         pubMsg
		op, id    string
		wantData  bool
		noHeaders bool
	}{
		{name: "put", m: pubMsg{subject: "s", data: []byte("v")}, wantData: true, noHeaders: true},
		{name: "delete", m: pubMsg{subject: "s", data: []byte("v"), del: true}, op: "DEL"},
		{name: "id", m: pubMsg{subject: "s", data: []byte("v"), msgID: "e1"}, id: "e1", wantData: true},
		{name: "delete with id", m: pubMsg{subject: "s", data: []byte("v"), del: true, msgID: "e1"}, op: "DEL", id: "e1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := tc.m.msg()
			if msg.Subject != tc.m.subject {
				t.Errorf("subject %q, want %q", msg.Subject, tc.m.subject)
			}
			if tc.noHeaders && msg.Header != nil {
				t.Errorf("headers %v on a plain put", msg.Header)
			}
			if got := msg.Header.Get("KV-Operation"); got != tc.op {
				t.Errorf("KV-Operation %q, want %q", got, tc.op)
			}
			if got := msg.Header.Get(jetstream.MsgIDHeader); got != tc.id {
				t.Errorf("%s %q, want %q", jetstream.MsgIDHeader, got, tc.id)
			}
			if got := len(msg.Data) > 0; got != tc.wantData {
				t.Errorf("data %q, want data: %v", msg.Data, tc.wantData)
			}
		})
	}
}

// TestRecyclePacks: a pack's buffer is kept for reuse only when every
// message was stored and none was published again while its first
// publish was unanswered (unsettled: kept from the client library's
// asynchronous publish, which could send it again by itself; see
// recyclePacks).
func TestRecyclePacks(t *testing.T) {
	errNo := errors.New("no")
	for _, tc := range []struct {
		name   string
		p      published
		reused bool
	}{
		{"all stored", published{}, true},
		{"one failed", published{failed: []error{errNo}}, false},
		{"stopped", published{stop: errNo}, false},
		{"published again while unanswered", published{unsettled: true}, false},
	} {
		var s Store
		msgs := []pubMsg{{pack: true, data: make([]byte, 10, packPooled)}}
		s.recyclePacks(msgs, tc.p)
		if reused := msgs[0].data == nil; reused != tc.reused {
			t.Errorf("%s: buffer reused %v, want %v", tc.name, reused, tc.reused)
		}
	}
}
