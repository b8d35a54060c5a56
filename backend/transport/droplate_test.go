package transport

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/model"
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

// TestKeepLateHandsOnAnAnswerBetween: an answer that arrives after a
// request's deadline and before keepLate keeps it (it went to the
// request's channel, which nobody reads any more) reaches the late
// subscribers, once; it was lost, and the timeout recorded for the op
// never corrected.
func TestKeepLateHandsOnAnAnswerBetween(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := &Dispatcher{log: slog.New(slog.DiscardHandler)}
	var got []model.LateReply
	d.SubscribeLate(ctx, func(lr model.LateReply) { got = append(got, lr) })
	host := model.Host{IP: "10.0.0.1"}
	hid, err := host.ID()
	if err != nil {
		t.Fatal(err)
	}
	id := "r1"
	subject := ReplySubject(hid, id)
	ch := make(chan *nats.Msg, 1)
	d.replies.put(id, pendingReply{host: hid, subject: subject, ch: ch})
	answer := &nats.Msg{Subject: subject, Data: []byte(`{"task_id":"t","op_id":"op","status":{"proc":"web:nginx","pid":7}}`)}
	d.onReply(answer) // in time as far as onReply knows: to ch
	if !d.keepLate(id, hid, subject, "t", "op", ch) {
		t.Fatal("not kept")
	}
	if len(got) != 1 || got[0].OpID != "op" || got[0].TaskID != "t" || got[0].Host != host || got[0].Reply.Status.PID != 7 {
		t.Fatalf("late replies %+v, want the answer once", got)
	}
	d.onReply(answer) // answered twice: counts once
	if len(got) != 1 || d.lateN != 0 || d.replies.len() != 0 {
		t.Fatalf("late replies %d, lateN %d, replies %d; want 1, 0, 0", len(got), d.lateN, d.replies.len())
	}
}

// get is what id holds.
func (t *replyTable) get(id string) (pendingReply, bool) {
	s := t.shard(id)
	s.mu.Lock()
	p, ok := s.m[id]
	s.mu.Unlock()
	return p, ok
}

// len is how many requests wait.
func (t *replyTable) len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// TestLateQueueBounded: lateQ stays within lateQMax however many late
// requests are answered (each answered one stayed queued for its whole
// window: 200,000 late requests a minute, all answered, were two million
// entries), keeps the ones still late in order, and a request beyond
// lateMax still late is refused, counted and logged once.
func TestLateQueueBounded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logged strings.Builder
	d := &Dispatcher{log: slog.New(slog.NewTextHandler(&logged, nil))}
	answered := 0
	d.SubscribeLate(ctx, func(model.LateReply) { answered++ })
	hid, err := model.Host{IP: "10.0.0.1"}.ID()
	if err != nil {
		t.Fatal(err)
	}
	keep := func(id string) string {
		subject := ReplySubject(hid, id)
		ch := make(chan *nats.Msg, 1)
		d.replies.put(id, pendingReply{host: hid, subject: subject, ch: ch})
		if !d.keepLate(id, hid, subject, "t", id, ch) {
			t.Fatalf("%s: not kept", id)
		}
		return subject
	}
	waiting := []string{"w0", "w1", "w2"}
	for _, id := range waiting {
		keep(id)
	}
	n := lateQMax + 10
	for i := range n {
		id := "a" + strconv.Itoa(i)
		d.onReply(&nats.Msg{Subject: keep(id), Data: []byte(`{"task_id":"t","op_id":"x"}`)})
		if len(d.lateQ) > lateQMax {
			t.Fatalf("after %d answered: lateQ holds %d, more than %d", i+1, len(d.lateQ), lateQMax)
		}
	}
	if answered != n || d.lateN != len(waiting) {
		t.Fatalf("answered %d, lateN %d; want %d, %d", answered, d.lateN, n, len(waiting))
	}
	for i, id := range waiting {
		if d.lateQ[i].id != id || !d.replies.isLate(id) {
			t.Fatalf("lateQ head %v: %s not kept in order", d.lateQ[:len(waiting)], id)
		}
	}
	d.dropLate(time.Now().Add(2 * lateWindow))
	if d.lateN != 0 || len(d.lateQ) != 0 || d.replies.len() != 0 {
		t.Fatalf("after every window: lateN %d, lateQ %d, replies %d; want 0", d.lateN, len(d.lateQ), d.replies.len())
	}

	d.lateN = lateMax // as many wait as are kept
	for i := range 3 {
		id := "over" + strconv.Itoa(i)
		d.replies.put(id, pendingReply{host: hid, subject: ReplySubject(hid, id)})
		if d.keepLate(id, hid, ReplySubject(hid, id), "t", id, nil) {
			t.Fatal("kept beyond lateMax")
		}
	}
	if d.lateRefused != 3 || strings.Count(logged.String(), "more are not kept") != 1 {
		t.Fatalf("refused %d, log %q; want 3 counted, logged once", d.lateRefused, logged.String())
	}
	d.lateN = 0
	keep("again")
	if d.lateRefused != 0 || !strings.Contains(logged.String(), "not_kept=3") {
		t.Fatalf("refused %d, log %q; want the count logged and reset", d.lateRefused, logged.String())
	}
}

// TestKeepLateRacesAnAnswer: an answer that arrives while its request is
// being kept for a late answer (the reply subscription and the
// dispatch's keepLate at once) reaches the late subscribers exactly once,
// whichever comes first: neither in the request's channel after keepLate
// looked at it (lost: the op's timeout never corrected) nor twice.
func TestKeepLateRacesAnAnswer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := &Dispatcher{log: slog.New(slog.DiscardHandler)}
	var mu sync.Mutex
	got := map[string]int{}
	d.SubscribeLate(ctx, func(lr model.LateReply) {
		mu.Lock()
		got[lr.OpID]++
		mu.Unlock()
	})
	hid, err := model.Host{IP: "10.0.0.1"}.ID()
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 20_000
	for i := range rounds {
		id := "r" + strconv.Itoa(i)
		subject := ReplySubject(hid, id)
		ch := make(chan *nats.Msg, 1)
		d.replies.put(id, pendingReply{host: hid, subject: subject, ch: ch})
		answer := &nats.Msg{Subject: subject, Data: []byte(`{"task_id":"t","op_id":"x"}`)}
		var wg sync.WaitGroup
		wg.Go(func() { d.onReply(answer) })
		if !d.keepLate(id, hid, subject, "t", id, ch) {
			t.Fatalf("%s: not kept", id)
		}
		wg.Wait()
		mu.Lock()
		n := got[id]
		mu.Unlock()
		if n != 1 {
			t.Fatalf("round %d: the answer reached the late subscribers %d times, want once (lateN %d)", i, n, d.lateN)
		}
	}
	if d.lateN != 0 || d.replies.len() != 0 {
		t.Fatalf("lateN %d, replies %d; want 0, 0", d.lateN, d.replies.len())
	}
}
