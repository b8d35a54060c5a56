package transport

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestDropLateForgetsOnlyEnded: dropLate forgets the late requests whose
// window ended, in order, skips one answered meanwhile, and keeps the
// rest and every request still waiting in time.
func TestDropLateForgetsOnlyEnded(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	d := &Dispatcher{}
	d.replies.put("waiting", pendingReply{ch: make(chan *nats.Msg, 1)})
	for i, id := range []string{"a", "b", "c"} {
		until := t0.Add(time.Duration(i) * time.Minute)
		d.replies.put(id, pendingReply{late: &lateOp{until: until}})
		d.lateN++
		d.lateQ = append(d.lateQ, lateEntry{id: id, until: until})
	}
	d.replies.del("b") // answered: counted out by onReply
	d.lateN--

	d.dropLate(t0.Add(90 * time.Second))
	if _, ok := d.replies.get("a"); ok {
		t.Fatal("a: window ended, still kept")
	}
	if _, ok := d.replies.get("c"); !ok {
		t.Fatal("c: window not ended, dropped")
	}
	if _, ok := d.replies.get("waiting"); !ok {
		t.Fatal("a request still in time was dropped")
	}
	if d.lateN != 1 || len(d.lateQ) != 1 || d.lateQ[0].id != "c" {
		t.Fatalf("lateN %d, lateQ %v; want 1, [c]", d.lateN, d.lateQ)
	}
	d.dropLate(t0.Add(3 * time.Minute))
	if d.lateN != 0 || len(d.lateQ) != 0 || d.replies.len() != 1 {
		t.Fatalf("lateN %d, lateQ %v, replies %d; want 0, [], 1", d.lateN, d.lateQ, d.replies.len())
	}
}
