package transport

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"gseproc/model"
)

// TestSpool: what a spool holds comes back after a reopen, in order, less
// what was acknowledged; a line torn by a crash mid-write is skipped; the
// file is emptied once nothing is pending.
func TestSpool(t *testing.T) {
	dir := t.TempDir()
	sp, pending, err := openSpool(dir)
	if err != nil || len(pending) != 0 {
		t.Fatalf("new spool: %v %v", pending, err)
	}
	var evs []model.Event
	for _, id := range []string{"a-1", "a-2", "a-3"} {
		evs = append(evs, model.Event{ID: id, Host: h1, ProcKey: "ns:p", Kind: model.EventRestartSuccess, Message: "restart " + id})
	}
	if err := sp.writeEvents(evs); err != nil {
		t.Fatal(err)
	}
	if err := sp.done([]string{"a-2"}, false, func() []model.Event { return []model.Event{evs[0], evs[2]} }); err != nil {
		t.Fatal(err)
	}
	// A crash in the middle of the next write.
	if _, err := sp.f.WriteString(`E {"id":"a-4","host":{"ip":"10.0`); err != nil {
		t.Fatal(err)
	}
	_ = sp.close()

	sp, pending, err = openSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range pending {
		ids = append(ids, e.ID+"="+e.Message)
	}
	if strings.Join(ids, ",") != "a-1=restart a-1,a-3=restart a-3" {
		t.Fatalf("pending after reopen: %q", ids)
	}
	if err := sp.done([]string{"a-1", "a-3"}, true, func() []model.Event { return nil }); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, spoolFile)); err != nil || st.Size() != 0 {
		t.Fatalf("spool with nothing pending: %v %v", st, err)
	}
	// A bad id (not [A-Za-z0-9_-]) in the file is not taken back.
	_ = os.WriteFile(filepath.Join(dir, spoolFile), []byte("E {\"id\":\"x.y\",\"event_name\":\"process_restart_success\"}\n"), 0o600)
	_ = sp.close()
	if _, pending, err = openSpool(dir); err != nil || len(pending) != 0 {
		t.Fatalf("spool with a bad id: %v %v", pending, err)
	}
}

// TestSpoolBigBacklog: a spool holding more than spoolCompactAt pending
// (a long outage) is not rewritten at every acknowledgement (it was: each
// ack batch wrote the whole backlog again and synced it), nor is the
// backlog asked for (copied) then, and is still
// rewritten with just what is pending once it has grown to twice that.
func TestSpoolBigBacklog(t *testing.T) {
	dir := t.TempDir()
	sp, _, err := openSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sp.close() }()
	msg := strings.Repeat("m", maxEventSize/2)
	var pending []model.Event
	batch := func(prefix string) []model.Event {
		var evs []model.Event
		for i := 0; i*len(msg) < spoolCompactAt+len(msg); i++ {
			evs = append(evs, model.Event{ID: prefix + strconv.Itoa(i), Host: h1, ProcKey: "ns:p", Kind: model.EventRestartFailed, Message: msg})
		}
		return evs
	}
	pending = batch("a-")
	if err := sp.writeEvents(pending); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, spoolFile)
	stat := func() os.FileInfo {
		st, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	// Past spoolCompactAt already at the first ack: rewritten once.
	pending = pending[1:]
	if err := sp.done([]string{"a-0"}, false, func() []model.Event { return pending }); err != nil {
		t.Fatal(err)
	}
	first := stat()
	if first.Size() <= spoolCompactAt {
		t.Fatalf("spool of %d bytes, want the backlog past %d", first.Size(), spoolCompactAt)
	}
	for i := 1; i <= 5; i++ {
		pending = pending[1:]
		asked := false
		if err := sp.done([]string{"a-" + strconv.Itoa(i)}, false, func() []model.Event { asked = true; return pending }); err != nil {
			t.Fatal(err)
		}
		if st := stat(); !os.SameFile(first, st) || st.Size() <= first.Size() {
			t.Fatalf("ack %d: the spool was rewritten (%d bytes, before %d): want the A line appended", i, st.Size(), first.Size())
		}
		if asked {
			t.Fatalf("ack %d: the pending events were asked for (a copy of the backlog) with no rewrite", i)
		}
	}
	// Twice as big: rewritten with just what is pending.
	more := batch("b-")
	if err := sp.writeEvents(more); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range more {
		ids = append(ids, e.ID)
	}
	if err := sp.done(ids, false, func() []model.Event { return pending }); err != nil {
		t.Fatal(err)
	}
	if st := stat(); os.SameFile(first, st) || st.Size() >= first.Size() {
		t.Fatalf("spool of %d bytes grown twice over (%d at the last rewrite): want it rewritten smaller", st.Size(), first.Size())
	}
	_ = sp.close()
	sp, got, err := openSpool(dir)
	if err != nil || len(got) != len(pending) || got[0].ID != "a-6" {
		t.Fatalf("after reopen: %d pending, %v: want %d from a-6", len(got), err, len(pending))
	}
}

// TestEventsKeptUntilStored: an agent's events made while no server has
// ever run (no stream takes them) are kept, on disk, and stored once each,
// in order, when a server comes; the agent's disk is then emptied. An
// event of a kind only a server derives is refused.
func TestEventsKeptUntilStored(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	a := echoAgent(h1)
	dir := t.TempDir()
	runAgent(t, e.ClientURL(), ClientOptions{}, a, ServeOptions{HeartbeatInterval: 50 * time.Millisecond, EventDir: dir})
	spool := filepath.Join(dir, spoolFile)
	eventually(t, "the agent serving", 15*time.Second, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.fns) > 0
	})
	a.emit(model.Event{Host: h1, ProcKey: "ns:p", Kind: model.EventAgentOnline, Message: "forged"})
	for i := range 5 {
		a.emit(model.Event{Host: h1, ProcKey: "ns:p", Kind: model.EventRestartSuccess, Message: "restart " + string(rune('0'+i))})
	}
	eventually(t, "the events on the agent's disk", 15*time.Second, func() bool {
		b, _ := os.ReadFile(spool)
		return strings.Count(string(b), "E ") == 6
	})

	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{Events: EventStreamOptions{Memory: true}})
	stored := collectStored(t, d, "ns:p")
	eventually(t, "the events stored and the agent's disk emptied", 30*time.Second, func() bool {
		st, err := os.Stat(spool)
		return len(stored()) >= 5 && err == nil && st.Size() == 0
	})
	time.Sleep(200 * time.Millisecond) // a repeat, if any, would come now
	got := stored()
	var msgs []string
	ids := map[string]bool{}
	for _, ev := range got {
		msgs = append(msgs, ev.Message)
		if !strings.HasPrefix(ev.ID, "a.0.10_0_0_1.") || ids[ev.ID] {
			t.Errorf("event %+v: id not scoped to its host, or delivered twice", ev)
		}
		ids[ev.ID] = true
	}
	if strings.Join(msgs, ",") != "restart 0,restart 1,restart 2,restart 3,restart 4" {
		t.Errorf("stored %q, want each restart once, in order (and not the forged agent_online)", msgs)
	}
}

// TestFitEvent: an event too big for the stream keeps a cut message (a
// prefix of its own, at a character, marked) and fits; a small one is
// left as it is.
func TestFitEvent(t *testing.T) {
	small := model.Event{ID: "x-1", Host: h1, ProcKey: "ns:p", Kind: model.EventRestartFailed, Message: "failed: <out>"}
	if got := fitEvent(small); got != small {
		t.Errorf("small event changed: %+v", got)
	}
	for _, unit := range []string{"x", "<", "中", "\x01", "é<\n"} {
		e := small
		e.Message = strings.Repeat(unit, 3*maxEventSize/len(unit))
		got := fitEvent(e)
		data, err := json.Marshal(got)
		if err != nil || len(data) > maxEventData {
			t.Fatalf("%q: %d bytes of JSON (%v), want at most %d", unit, len(data), err, maxEventData)
		}
		msg, ok := strings.CutSuffix(got.Message, " [cut]")
		if !ok || !utf8.ValidString(msg) || !strings.HasPrefix(e.Message, msg) || len(msg) < len(unit) {
			t.Errorf("%q: message cut to %d bytes %q...: want a valid prefix of the message, marked", unit, len(got.Message), got.Message[:min(20, len(got.Message))])
		}
	}
}

// TestOversizedEventIsStored: an event whose message is larger than the
// stream takes (a restart's failure quoting a long output) is stored with
// its message cut, and the agent's disk is emptied (it was published
// again forever, refused each time).
func TestOversizedEventIsStored(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{Events: EventStreamOptions{Memory: true}})
	stored := collectStored(t, d, "ns:p")
	a := echoAgent(h1)
	dir := t.TempDir()
	runAgent(t, e.ClientURL(), ClientOptions{}, a, ServeOptions{HeartbeatInterval: 50 * time.Millisecond, EventDir: dir})
	eventually(t, "the agent serving", 15*time.Second, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.fns) > 0
	})
	big := "restart failed: [" + strings.Repeat("<", 2*maxEventSize) + "]"
	a.emit(model.Event{Host: h1, ProcKey: "ns:p", Kind: model.EventRestartFailed, Message: big})
	a.emit(model.Event{Host: h1, ProcKey: "ns:p", Kind: model.EventRestartSuccess, Message: "small"})
	spool := filepath.Join(dir, spoolFile)
	eventually(t, "both events stored and the agent's disk emptied", 30*time.Second, func() bool {
		st, err := os.Stat(spool)
		return len(stored()) >= 2 && err == nil && st.Size() == 0
	})
	got := stored()
	if len(got) != 2 || !strings.HasSuffix(got[0].Message, " [cut]") || !strings.HasPrefix(big, strings.TrimSuffix(got[0].Message, " [cut]")) || got[1].Message != "small" {
		t.Errorf("stored %d events, first message %d bytes: want the big one cut, then the small one", len(got), len(got[0].Message))
	}
}

// TestEventWithoutIDStoredOnce: an event published with no id (an agent
// that sets no Nats-Msg-Id) keeps the same id at every delivery, so a
// store that failed once and is delivered it again keeps it once (it got
// a fresh random id at each delivery).
func TestEventWithoutIDStoredOnce(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	nc := serverConn(t, e)
	d := newDispatcher(t, nc, DispatcherOptions{Events: EventStreamOptions{Memory: true}})
	var mu sync.Mutex
	var ids []string
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.SubscribeAckedEvents(ctx, func(ev model.Event, ack func(error)) {
		if ev.ProcKey != "ns:p" || ack == nil {
			return
		}
		mu.Lock()
		ids = append(ids, ev.ID)
		first := len(ids) == 1
		mu.Unlock()
		if first {
			ack(errors.New("store unavailable")) // delivered again
			return
		}
		ack(nil)
	})
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	id, err := hostID(h1)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(model.Event{Host: h1, ProcKey: "ns:p", Kind: model.EventRestartSuccess, Message: "no id"})
	eventually(t, "the event published into the stream", 30*time.Second, func() bool {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		defer pcancel()
		_, err := js.Publish(pctx, EventSubject(id), data)
		return err == nil
	})
	eventually(t, "the event delivered again after a failed store", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ids) >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	if ids[0] != ids[1] || !strings.HasPrefix(ids[0], "a.0.10_0_0_1.x") {
		t.Errorf("ids at the two deliveries %q: want the same, scoped to the host", ids)
	}
}

// collectStored subscribes to d's events as the engine does
// (subscribeStored) until the test ends; it returns what it got so far of
// proc's events.
func collectStored(t *testing.T, d *Dispatcher, proc string) func() []model.Event {
	var mu sync.Mutex
	var got []model.Event
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	subscribeStored(ctx, d, func(ev model.Event) {
		if ev.ProcKey == proc {
			mu.Lock()
			got = append(got, ev)
			mu.Unlock()
		}
	})
	return func() []model.Event {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// An agent's event is kept plain (model.PlainText): its message and
// process key reached the store and operators' terminals with their
// escape sequences (an OSC 52 sets the clipboard, ESC[8m hides the rest).
func TestDecodeEventPlain(t *testing.T) {
	data, err := json.Marshal(model.Event{Host: h1, ProcKey: "ns:p\x1b[8m", Kind: model.EventRestartFailed,
		Message: "restart failed:\x1b]52;c;cm0gLXJmIH4=\a exit 1\r\nnext line"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := decodeEvent(EventSubject(mustID(t, h1)), data, "x1", "o1")
	if err != nil {
		t.Fatal(err)
	}
	if e.ProcKey != "ns:p" || e.Message != "restart failed: exit 1\nnext line" {
		t.Errorf("event kept as %q: %q", e.ProcKey, e.Message)
	}
}
