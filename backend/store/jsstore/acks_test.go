package jsstore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestAckSeq: only an acknowledgement that plainly says where its message
// was stored is taken as stored; any other answer is not (the message is
// then published again synchronously).
func TestAckSeq(t *testing.T) {
	for _, c := range []struct {
		data string
		seq  uint64
		ok   bool
	}{
		{`{"stream":"KV_gseproc_status","seq":42}`, 42, true},
		{`{"stream":"KV_x","seq":7,"domain":"hub","duplicate":true}`, 7, true},
		{`{"stream":"s","seq":18446744073709551614}`, 18446744073709551614, true},
		{`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 5"},"stream":"s","seq":0}`, 0, false},
		{`{"stream":"s","seq":0}`, 0, false},
		{`{"stream":"s","seq":18446744073709551615}`, 0, false}, // the refused mark itself
		{`{"stream":"s","seq":99999999999999999999}`, 0, false}, // overflows
		{`{"stream":"s","seq":12`, 0, false},
		{`{"stream":"s","seq":-1}`, 0, false},
		{`{"stream":"s"}`, 0, false},
		{`{"seq":3}`, 0, false},
		{``, 0, false},
		{`NATS/1.0 503`, 0, false},
	} {
		seq, ok := ackSeq(&nats.Msg{Data: []byte(c.data)})
		if seq != c.seq || ok != c.ok {
			t.Errorf("ackSeq(%s) = %d, %v, want %d, %v", c.data, seq, ok, c.seq, c.ok)
		}
	}
}

// TestPublishEachAcks: pipelined writes over more than one window are each
// stored once and said stored at the sequence JetStream stored them at; a
// write JetStream refuses (a create of a key that exists) is answered by
// an error naming it, tried again synchronously, and the writes around it
// are stored all the same; late or stray acknowledgements change nothing.
func TestPublishEachAcks(t *testing.T) {
	e := startNATS(t, natsCfg(t, t.TempDir()))
	s := open(t, e, Options{})
	ctx := tctx(t)
	kv := s.on().status
	if _, err := kv.Put(ctx, "taken", []byte("x")); err != nil {
		t.Fatal(err)
	}
	n := pubWindow + pubWindow/2
	msgs := make([]pubMsg, n)
	for i := range msgs {
		msgs[i] = pubMsg{subject: kvSubject(kv, fmt.Sprintf("k%d", i)), data: []byte(fmt.Sprintf("v%d", i)), what: fmt.Sprintf("write %d", i)}
	}
	refused := pubWindow + 7
	msgs[refused] = pubMsg{subject: kvSubject(kv, "taken"), data: []byte("y"), what: "create taken", create: true}
	msgs[3].msgID = "id-3"
	p := s.publishEach(ctx, msgs, true)
	if p.stop != nil {
		t.Fatalf("stopped: %v", p.stop)
	}
	for i := range msgs {
		err := p.errOf(msgs, i)
		if i == refused {
			if err == nil || !strings.Contains(err.Error(), "create taken") {
				t.Fatalf("the refused create: error %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		en, err := kv.Get(ctx, fmt.Sprintf("k%d", i))
		if err != nil {
			t.Fatalf("write %d not stored: %v", i, err)
		}
		if en.Revision() != p.seqs[i] || string(en.Value()) != fmt.Sprintf("v%d", i) {
			t.Fatalf("write %d: said stored at %d, stored at %d as %q", i, p.seqs[i], en.Revision(), en.Value())
		}
	}
	if en, err := kv.Get(ctx, "taken"); err != nil || string(en.Value()) != "x" {
		t.Fatalf("the key a create was refused: %v, %v", en, err)
	}
	// A stray acknowledgement (a window closed long ago, a bad index, not
	// an acknowledgement at all) is dropped.
	a := s.on().acks()
	nc := s.on().js.Conn()
	for _, subj := range []string{a.prefix + "1.0", a.prefix + "999999.0", a.prefix + "1.x", a.prefix + "x"} {
		if err := nc.Publish(subj, []byte(`{"stream":"s","seq":5}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	p = s.publishEach(ctx, msgs[:2], true)
	if p.stop != nil || p.failed != nil || p.seqs[0] == 0 || p.seqs[1] != p.seqs[0]+1 {
		t.Fatalf("writes after stray acknowledgements: %+v", p)
	}
}
