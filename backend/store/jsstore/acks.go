package jsstore

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// The acknowledgements of pipelined publishes (publishEach) come to one
// subscription of the store's own (per connection), each to a reply
// subject naming its window and its place in it, and are read there with
// no more than a look for the stored sequence: the client library's
// asynchronous publish kept a future (two channels, a map entry) for each
// message and decoded every acknowledgement by reflection: for the
// ~84,000 statuses of a first op at 100,000 hosts, handleAsyncReply was
// 0.21 s of the server's 7.3 s and the futures and decoding ~70 MB of
// its allocations (json.Unmarshal ~7% of BenchmarkPutProcStatuses). What
// is stored and when a write counts as stored are unchanged: a message
// is stored once its acknowledgement says at which sequence; any other
// answer (an error, no responders), or none within the window's time,
// and it is published again synchronously, as before.

// acker receives the acknowledgements of one connection's pipelined
// publishes.
type acker struct {
	nc     *nats.Conn
	prefix string // a reply subject is prefix + "<window>.<index>"

	mu      sync.Mutex
	sub     *nats.Subscription // nil until the first window
	next    uint64
	windows map[uint64]*ackWindow
}

// ackWindow is the acknowledgements awaited of one window's messages.
type ackWindow struct {
	id   uint64
	seqs []uint64      // the stored sequence of each (0: none yet; ackRefused: not stored)
	left int           // messages not answered yet (under acker.mu)
	done chan struct{} // closed once every message is answered
}

// ackRefused marks an answer that is not a stored sequence.
const ackRefused = ^uint64(0)

func newAcker(nc *nats.Conn) *acker {
	return &acker{nc: nc, prefix: nc.NewInbox() + ".", windows: map[uint64]*ackWindow{}}
}

// open begins a window of n messages (subscribing first, once).
func (a *acker) open(n int) (*ackWindow, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sub == nil {
		sub, err := a.nc.Subscribe(a.prefix+">", a.onAck)
		if err != nil {
			return nil, fmt.Errorf("subscribe to acknowledgements: %w", err)
		}
		// The acknowledgements of a window are awaited all at once: none
		// is dropped for a slow reader (the window bounds them).
		_ = sub.SetPendingLimits(-1, -1)
		a.sub = sub
	}
	a.next++
	w := &ackWindow{id: a.next, seqs: make([]uint64, n), left: n, done: make(chan struct{})}
	if n == 0 {
		close(w.done)
	}
	a.windows[w.id] = w
	return w, nil
}

// stop ends the subscription (the store is closed).
func (a *acker) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sub != nil {
		_ = a.sub.Unsubscribe()
		a.sub = nil
	}
}

// close forgets w: its late acknowledgements are dropped, and what it
// holds stays as it is.
func (a *acker) close(w *ackWindow) {
	a.mu.Lock()
	delete(a.windows, w.id)
	a.mu.Unlock()
}

// reply is the reply subject of w's i-th message.
func (a *acker) reply(w *ackWindow, i int) string {
	b := make([]byte, 0, len(a.prefix)+24)
	b = append(b, a.prefix...)
	b = strconv.AppendUint(b, w.id, 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(i), 10)
	return string(b)
}

// settle records the answer of w's i-th message (seq, or ackRefused)
// unless it has one.
func (a *acker) settle(w *ackWindow, i int, seq uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.windows[w.id] != w || w.seqs[i] != 0 {
		return // closed (what it holds is read), or answered already
	}
	w.seqs[i] = seq
	if w.left--; w.left == 0 {
		close(w.done)
	}
}

// onAck takes an acknowledgement: of a window still open, at an index
// within it.
func (a *acker) onAck(m *nats.Msg) {
	rest, ok := strings.CutPrefix(m.Subject, a.prefix)
	if !ok {
		return
	}
	ws, is, ok := strings.Cut(rest, ".")
	if !ok {
		return
	}
	id, err1 := strconv.ParseUint(ws, 10, 64)
	i, err2 := strconv.Atoi(is)
	if err1 != nil || err2 != nil {
		return
	}
	a.mu.Lock()
	w := a.windows[id]
	a.mu.Unlock()
	if w == nil || i < 0 || i >= len(w.seqs) {
		return
	}
	seq, ok := ackSeq(m)
	if !ok {
		seq = ackRefused
	}
	a.settle(w, i, seq)
}

// ackSeq is the stream sequence a JetStream publish acknowledgement says
// its message was stored at ({"stream":...,"seq":N,...}); false for
// anything else: an error ({"error":...}), a status without data (no
// responders), no sequence. Nothing is guessed: what is not plainly a
// stored sequence is answered by publishing the message again.
func ackSeq(m *nats.Msg) (uint64, bool) {
	data := m.Data
	if len(data) == 0 || data[0] != '{' || bytes.Contains(data, []byte(`"error"`)) {
		return 0, false
	}
	if !bytes.Contains(data, []byte(`"stream":"`)) {
		return 0, false
	}
	_, after, ok := bytes.Cut(data, []byte(`"seq":`))
	if !ok {
		return 0, false
	}
	n := 0
	for n < len(after) && after[n] >= '0' && after[n] <= '9' {
		n++
	}
	if n == 0 || n == len(after) || (after[n] != ',' && after[n] != '}') {
		return 0, false
	}
	seq, err := strconv.ParseUint(string(after[:n]), 10, 64)
	if err != nil || seq == 0 || seq == ackRefused {
		return 0, false
	}
	return seq, true
}

// seq is the answer recorded for w's i-th message (0: none).
func (a *acker) seq(w *ackWindow, i int) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return w.seqs[i]
}

// firstUnsettled is the index of w's first message not known stored
// (len: all are): where a publishEach that stops in the window's wait
// says its stop began, the ones before it being stored.
func firstUnsettled(a *acker, w *ackWindow) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, seq := range w.seqs {
		if seq == 0 || seq == ackRefused {
			return i
		}
	}
	return len(w.seqs)
}
