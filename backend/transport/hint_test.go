package transport

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/backend/config"
	"gseproc/backend/simulator"
	"gseproc/model"
)

// seenBeat is a heartbeat as the test saw it: when, and its content (nil:
// a keepalive).
type seenBeat struct {
	at time.Time
	hb *Heartbeat
}

// beatWatch records the heartbeats published on a subject.
type beatWatch struct {
	mu    sync.Mutex
	beats map[string][]seenBeat // by subject
}

func watchBeats(t *testing.T, nc *nats.Conn, subj string) *beatWatch {
	t.Helper()
	w := &beatWatch{beats: map[string][]seenBeat{}}
	sub, err := nc.Subscribe(subj, func(m *nats.Msg) {
		b := seenBeat{at: time.Now()}
		if len(m.Data) > 0 {
			var hb Heartbeat
			if err := json.Unmarshal(m.Data, &hb); err != nil {
				t.Errorf("heartbeat on %s: %v", m.Subject, err)
				return
			}
			b.hb = &hb
		}
		w.mu.Lock()
		w.beats[m.Subject] = append(w.beats[m.Subject], b)
		w.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return w
}

// of is what was seen on subj.
func (w *beatWatch) of(subj string) []seenBeat {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]seenBeat(nil), w.beats[subj]...)
}

// lastFull is the last full heartbeat seen on subj (nil: none).
func (w *beatWatch) lastFull(subj string) *Heartbeat {
	bs := w.of(subj)
	for i := len(bs) - 1; i >= 0; i-- {
		if bs[i].hb != nil && !bs[i].hb.Leaving {
			return bs[i].hb
		}
	}
	return nil
}

// untilFullSays asks for full heartbeats (hello) until every subject's
// last full one satisfies ok.
func untilFullSays(t *testing.T, nc *nats.Conn, w *beatWatch, what string, subjs []string, ok func(*Heartbeat) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		all := true
		for _, s := range subjs {
			if hb := w.lastFull(s); hb == nil || !ok(hb) {
				all = false
				break
			}
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so after 20s (last full beat of %s: %+v)", what, subjs[0], w.lastFull(subjs[0]))
		}
		if err := nc.Publish(HelloSubject, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// hostGrace is the silence after which d takes h offline.
func hostGrace(d *Dispatcher, h model.Host) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.hosts[h]; e != nil {
		return e.grace()
	}
	return 0
}

// lastSeen is when d last heard from h (zero: never).
func lastSeen(d *Dispatcher, h model.Host) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.hosts[h]; e != nil && e.heard {
		return d.epoch.Add(time.Duration(e.seen))
	}
	return time.Time{}
}

// TestAgentTakesServerInterval: a server bounding the fleet's heartbeat
// rate tells the agent a longer interval; the agent beats at it, says
// so, stays online though each beat comes later than the server's
// offline_after, and once it really stops is taken offline after three
// of its own interval, not before.
func TestAgentTakesServerInterval(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	snc := serverConn(t, e)
	const base = 100 * time.Millisecond
	// One host, at most one beat a second: told 100ms·2^(14/4) = 1.13 s.
	want := FleetBeatInterval(1, base, 1)
	if want < time.Second || want > 2*time.Second {
		t.Fatalf("the fleet's interval is %s; the test wants one of about a second", want)
	}
	d := newDispatcher(t, snc, DispatcherOptions{OfflineAfter: 300 * time.Millisecond, BeatInterval: base, MaxBeatsPerSecond: 1})
	var mu sync.Mutex
	var evs []model.Event
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.SubscribeEvents(ctx, func(ev model.Event) { mu.Lock(); evs = append(evs, ev); mu.Unlock() })
	offline := func() []model.Event {
		mu.Lock()
		defer mu.Unlock()
		var out []model.Event
		for _, ev := range evs {
			if ev.Kind == model.EventAgentOffline {
				out = append(out, ev)
			}
		}
		return out
	}
	subj := HeartbeatSubject(mustID(t, h1))
	w := watchBeats(t, snc, subj)
	anc, _ := runAgent(t, e.ClientURL(), ClientOptions{}, echoAgent(h1), ServeOptions{HeartbeatInterval: base})

	untilFullSays(t, snc, w, "the agent beats at the fleet's interval", []string{subj}, func(hb *Heartbeat) bool {
		return hb.Hints && hb.Interval == want
	})
	if g := hostGrace(d, h1); g != 3*want {
		t.Fatalf("grace %s once the agent says it beats every %s; want three of it", g, want)
	}
	// Keepalives at the new interval, each gap longer than offline_after
	// (300 ms), and the host stays online. Four keepalives after t0 take
	// at least an interval: the agent took it before the full beat that
	// said so (every keepalive counted comes after that beat); of the
	// four, one may be its old timer's (firing before the rearm) and one
	// may come at once (the rearm's random phase), the next two an
	// interval and two intervals after that one. At the old interval
	// they would take 300 ms; a loaded machine only lengthens the wait.
	keepalives := func() int {
		n := 0
		for _, b := range w.of(subj) {
			if b.hb == nil {
				n++
			}
		}
		return n
	}
	n0, t0 := keepalives(), time.Now()
	eventually(t, "four keepalives at the new interval", 30*time.Second, func() bool { return keepalives() >= n0+4 })
	if el := time.Since(t0); el < want {
		t.Errorf("four keepalives in %s; the agent beats every %s", el, want)
	}
	if off := offline(); len(off) > 0 || hostState(d, h1) != model.AgentOnline {
		t.Fatalf("host taken offline while it beats every %s: %+v", want, off)
	}
	// It stops without a word (its connection gone): offline after three
	// of its interval.
	anc.Close()
	eventually(t, "offline", 30*time.Second, func() bool { return len(offline()) > 0 })
	// The dispatcher's own time of the last beat, against its sweep's
	// (the event's): no delivery to the test in between.
	if quiet := offline()[0].Time.Sub(lastSeen(d, h1)); quiet < 3*want {
		t.Fatalf("taken offline %s after its last beat; its grace is %s", quiet, 3*want)
	}
}

// TestHostToldLongerNotOfflineEarly: a host told a longer interval is
// not taken offline before its first beat at it can come, though no full
// heartbeat has said the new interval yet (keepalives say none).
func TestHostToldLongerNotOfflineEarly(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	snc := serverConn(t, e)
	d := newDispatcher(t, snc, DispatcherOptions{OfflineAfter: 300 * time.Millisecond, BeatInterval: 100 * time.Millisecond, MaxBeatsPerSecond: 1})
	id := mustID(t, h1)
	// An agent's full heartbeat at 100 ms, taking hints: told the
	// fleet's interval at once.
	hints, err := snc.SubscribeSync(BeatSubject(id))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(Heartbeat{Info: model.HostInfo{Host: h1}, Time: time.Now(), Interval: 100 * time.Millisecond, Hints: true, Full: true})
	if err := snc.Publish(HeartbeatSubject(id), data); err != nil {
		t.Fatal(err)
	}
	m, err := hints.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no interval told: %v", err)
	}
	h, err := decodeBeatHint(m.Data)
	if err != nil || h.Interval != FleetBeatInterval(1, 100*time.Millisecond, 1) {
		t.Fatalf("told %+v, %v", h, err)
	}
	// Until it is heard at it, the host has three of the new interval.
	if g := hostGrace(d, h1); g < 3*h.Interval {
		t.Fatalf("grace %s after telling the host %s: it may go offline before its first beat at it", g, h.Interval)
	}
	// A keepalive meanwhile keeps that grace.
	if err := snc.Publish(HeartbeatSubject(id), nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "keepalive recorded", 10*time.Second, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.hosts[h1] != nil && d.hosts[h1].keepalives == 1
	})
	if g := hostGrace(d, h1); g < 3*h.Interval {
		t.Fatalf("grace %s after a keepalive", g)
	}
	if d.hintsSent.Load() != 1 {
		t.Fatalf("%d intervals told; the host was told once and beats at it", d.hintsSent.Load())
	}
}

// TestKeepaliveOnlyHostGrace: a host heard only by keepalives (no full
// beat: the server is new, its hello missed) may beat at the interval an
// earlier server told its fleet, longer than offline_after: its grace
// covers three of it, not offline_after, which turned it offline and
// online at every beat (review r7-a).
func TestKeepaliveOnlyHostGrace(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	snc := serverConn(t, e)
	d := newDispatcher(t, snc, DispatcherOptions{OfflineAfter: 300 * time.Millisecond, BeatInterval: 100 * time.Millisecond, MaxBeatsPerSecond: 1})
	id := mustID(t, h1)
	if err := snc.Publish(HeartbeatSubject(id), nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "keepalive recorded", 10*time.Second, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.hosts[h1] != nil && d.hosts[h1].keepalives == 1
	})
	fleet := FleetBeatInterval(1, 100*time.Millisecond, 1)
	if g := hostGrace(d, h1); g < 3*fleet {
		t.Fatalf("grace %s of a host heard by keepalives only; the fleet beats every %s", g, fleet)
	}
}

// TestHintCompatibility: an agent from before the hints (it does not say
// it takes them) is never told and keeps beating at its own interval; an
// agent against a server that tells nothing keeps its configured one.
func TestHintCompatibility(t *testing.T) {
	t.Run("old agent, new server", func(t *testing.T) {
		e := startServer(t, testNATS(t), true)
		snc := serverConn(t, e)
		d := newDispatcher(t, snc, DispatcherOptions{BeatInterval: 100 * time.Millisecond, MaxBeatsPerSecond: 1})
		// What an agent from before the hints publishes: no "hints".
		id := mustID(t, h1)
		for i := range 5 {
			data := []byte(`{"info":{"host":{"ip":"10.0.0.1","bk_cloud_id":0}},"time":"2026-11-29T00:00:0` + string(rune('0'+i)) + `Z","interval":100000000,"full":true}`)
			if err := snc.Publish(HeartbeatSubject(id), data); err != nil {
				t.Fatal(err)
			}
			if err := snc.Publish(HeartbeatSubject(id), nil); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, "beats recorded", 10*time.Second, func() bool {
			d.mu.Lock()
			defer d.mu.Unlock()
			e := d.hosts[h1]
			return e != nil && e.online && e.keepalives == 1 && e.fullAt == time.Date(2026, 11, 29, 0, 0, 4, 0, time.UTC).UnixNano()
		})
		if n := d.hintsSent.Load(); n != 0 {
			t.Fatalf("%d intervals told to an agent that takes none", n)
		}
		// Its grace is its own interval's (at least offline_after).
		if g := hostGrace(d, h1); g != config.Default().NATS.OfflineAfter.D() {
			t.Fatalf("grace %s", g)
		}
		// The same from a new agent serving on its three subjects (which
		// a hint never reaches).
		h2 := model.Host{IP: "10.0.0.2"}
		subj := HeartbeatSubject(mustID(t, h2))
		w := watchBeats(t, snc, subj)
		runAgent(t, e.ClientURL(), ClientOptions{}, echoAgent(h2), ServeOptions{HeartbeatInterval: 100 * time.Millisecond, legacySubjects: true})
		untilFullSays(t, snc, w, "the agent says it takes no hints", []string{subj}, func(hb *Heartbeat) bool {
			return !hb.Hints && hb.Interval == 100*time.Millisecond
		})
		if n := d.hintsSent.Load(); n != 0 {
			t.Fatalf("%d intervals told to an agent on its three subjects", n)
		}
	})
	t.Run("new agent, old server", func(t *testing.T) {
		e := startServer(t, testNATS(t), true)
		snc := serverConn(t, e)
		// A server from before the hints tells nothing: one without a
		// rule does the same.
		d := newDispatcher(t, snc, DispatcherOptions{})
		subj := HeartbeatSubject(mustID(t, h1))
		w := watchBeats(t, snc, subj)
		runAgent(t, e.ClientURL(), ClientOptions{}, echoAgent(h1), ServeOptions{HeartbeatInterval: 100 * time.Millisecond})
		eventually(t, "online", 15*time.Second, func() bool { return hostState(d, h1) == model.AgentOnline })
		eventually(t, "ten beats", 15*time.Second, func() bool { return len(w.of(subj)) >= 10 })
		untilFullSays(t, snc, w, "the configured interval", []string{subj}, func(hb *Heartbeat) bool {
			return hb.Hints && hb.Interval == 100*time.Millisecond
		})
		if d.hintsSent.Load() != 0 {
			t.Fatal("a server without a rule told an interval")
		}
	})
}

// logRecorder keeps the messages logged through it.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, rec.Message)
	r.mu.Unlock()
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

func (r *logRecorder) count(sub string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

// TestBeatHintTrust: an interval is taken only from a server's subjects
// (no credential serving hosts may publish on a host's beat subject, its
// own or another's), and only within bounds: nonsense is refused and the
// agent keeps its interval.
func TestBeatHintTrust(t *testing.T) {
	cfg := testNATS(t)
	cfg.Users = []config.NATSUser{
		{User: "a1", Password: "one", Host: "0:10.0.0.1"},
		{User: "a2", Password: "two", Host: "0:10.0.0.2"},
	}
	e := startServer(t, cfg, false)
	snc := serverConn(t, e)
	newDispatcher(t, snc, DispatcherOptions{})
	id := mustID(t, h1)
	subj := HeartbeatSubject(id)
	w := watchBeats(t, snc, subj)
	rec := &logRecorder{}
	runAgent(t, e.ClientURL(), ClientOptions{User: "a1", Password: "one"}, echoAgent(h1),
		ServeOptions{HeartbeatInterval: 100 * time.Millisecond, Logger: slog.New(rec)})
	untilFullSays(t, snc, w, "agent up", []string{subj}, func(hb *Heartbeat) bool { return hb.Interval == 100*time.Millisecond })

	// Another host's agent, and the agent's own credential, may not
	// publish there.
	for _, c := range []struct{ user, pw string }{{"a2", "two"}, {"a1", "one"}} {
		errs := make(chan error, 4)
		nc, err := ConnectNow(ClientOptions{URLs: e.ClientURL(), User: c.user, Password: c.pw}, nil)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err })
		data, _ := json.Marshal(BeatHint{Interval: 30 * time.Second})
		if err := nc.Publish(BeatSubject(id), data); err != nil {
			t.Fatal(err)
		}
		_ = nc.Flush()
		select {
		case err := <-errs:
			if !errors.Is(err, nats.ErrPermissionViolation) {
				t.Fatalf("%s publishing on %s: %v, want a permission violation", c.user, BeatSubject(id), err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s published on %s without a permission violation", c.user, BeatSubject(id))
		}
		nc.Close()
	}
	// Nonsense from the server's own connection: refused, each logged.
	for _, data := range []string{`{"interval":10000000}`, `{"interval":7200000000000}`, `{"interval":-1}`, `not json`,
		`{"interval":"1s"}`, strings.Repeat(" ", 2000)} {
		if err := snc.Publish(BeatSubject(id), []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "nonsense refused", 10*time.Second, func() bool {
		return rec.count("out of bounds; ignored") == 3 && rec.count("not understood; ignored") == 3
	})
	untilFullSays(t, snc, w, "interval kept", []string{subj}, func(hb *Heartbeat) bool { return hb.Interval == 100*time.Millisecond })
	// The server's word within bounds is taken.
	data, _ := json.Marshal(BeatHint{Interval: 1500 * time.Millisecond})
	if err := snc.Publish(BeatSubject(id), data); err != nil {
		t.Fatal(err)
	}
	untilFullSays(t, snc, w, "interval taken", []string{subj}, func(hb *Heartbeat) bool { return hb.Interval == 1500*time.Millisecond })
	if n := rec.count("heartbeat interval set by the server"); n != 1 {
		t.Fatalf("interval set %d times, want once", n)
	}
	for _, b := range w.of(subj) {
		if b.hb != nil && b.hb.Interval != 100*time.Millisecond && b.hb.Interval != 1500*time.Millisecond {
			t.Fatalf("a heartbeat says interval %s", b.hb.Interval)
		}
	}
}

// TestFleetTakesServerInterval: every host of a simulated fleet takes
// the interval the server tells it (one rule with the agent's), and the
// fleet then sends about the bounded rate, not its configured one.
func TestFleetTakesServerInterval(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	snc := serverConn(t, e)
	f := simulator.New(config.SimulatorConfig{Hosts: 40, Seed: 3, Clouds: 1, Namespaces: config.Default().Simulator.Namespaces})
	t.Cleanup(func() { _ = f.Close() })
	hosts, _ := f.Hosts(context.Background())
	const base = 100 * time.Millisecond
	// At most 100 beats a second: 40 hosts every 400 ms (four times
	// their configured 100 ms).
	want := FleetBeatInterval(len(hosts), base, 100)
	if want != 400*time.Millisecond {
		t.Fatalf("the fleet's interval is %s; the test wants 400ms", want)
	}
	d := newDispatcher(t, snc, DispatcherOptions{OfflineAfter: 3 * time.Second, BeatInterval: base, MaxBeatsPerSecond: 100})
	w := watchBeats(t, snc, AllHeartbeats)
	serveFleet(t, e.ClientURL(), ClientOptions{Name: "sim"}, f, ServeOptions{HeartbeatInterval: base})
	var subjs []string
	for _, hi := range hosts {
		if hi.State == model.AgentOnline {
			subjs = append(subjs, HeartbeatSubject(mustID(t, hi.Host)))
		}
	}
	if len(subjs) != len(hosts) {
		t.Fatalf("%d of %d hosts online; the test wants all", len(subjs), len(hosts))
	}
	eventually(t, "fleet online", 15*time.Second, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.online == len(hosts)
	})
	untilFullSays(t, snc, w, "every host beats at the fleet's interval", subjs, func(hb *Heartbeat) bool {
		return hb.Hints && hb.Interval == want
	})
	// Twelve beats more from every host take at least five of its
	// interval (2 s), not about one (twelve at 100 ms). Of the twelve, a
	// few may not be periodic beats at the interval: on their way at t0,
	// answering hellos untilFullSays sent, or the fleet catching up a
	// beat it was late for at t0 (two at once).
	// With four such, the last of the eight left is six intervals (less
	// half the fleet's tick) after t0. A loaded machine only lengthens it.
	counts := map[string]int{}
	for _, s := range subjs {
		counts[s] = len(w.of(s))
	}
	t0 := time.Now()
	eventually(t, "twelve beats more from every host", 30*time.Second, func() bool {
		for _, s := range subjs {
			if len(w.of(s))-counts[s] < 12 {
				return false
			}
		}
		return true
	})
	if el := time.Since(t0); el < 5*want {
		t.Errorf("every host beat twelve times in %s at an interval of %s", el, want)
	}
	d.mu.Lock()
	for _, hi := range hosts {
		if e := d.hosts[hi.Host]; e == nil || !e.online || e.grace() < 3*want {
			t.Errorf("host %s: %+v", hi.Host, e)
		}
	}
	d.mu.Unlock()
}
