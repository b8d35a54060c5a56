package jsstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/backend"
	"gseproc/backend/health"
	"gseproc/backend/transport"
	"gseproc/backend/transport/natsembed"
	"gseproc/backend/transport/transporttest"
	"gseproc/model"
)

// TestDecide: the probe's silence is an outage only once it has lasted
// silence of scheduled time, and only for what answered: nothing at all
// (NATS), the PING alone (JetStream), or some streams and not others.
func TestDecide(t *testing.T) {
	long := silence + time.Millisecond
	for _, c := range []struct {
		name string
		e    evidence
		want string // "" no verdict
	}{
		{"nothing yet heard, not silent long enough", evidence{quiet: silence - time.Millisecond, pending: []string{"a"}}, ""},
		{"nothing at all heard", evidence{quiet: long, pending: []string{"a", "b"}}, "not even a PING"},
		{"only the PONG", evidence{quiet: long, pong: true, pending: []string{"a", "b"}}, "JetStream answers nothing"},
		{"a message came in, no PONG yet", evidence{quiet: long, inMoved: true, pending: []string{"a"}}, ""},
		{"JetStream answered another call", evidence{quiet: long, pong: true, inMoved: true, jsAnswered: true, pending: []string{"a"}}, ""},
		{"some streams answered", evidence{quiet: long, pong: true, inMoved: true, answered: 10, pending: []string{"b", "a"}}, "stream a, b unanswered"},
		{"some streams answered, other calls too (a flood)", evidence{quiet: long, pong: true, inMoved: true, jsAnswered: true, answered: 10, pending: []string{"a"}}, ""},
		{"some streams answered, before silence", evidence{quiet: silence / 2, pong: true, answered: 10, pending: []string{"a"}}, ""},
		{"everything answered", evidence{quiet: 10 * silence, pong: true, answered: 12}, ""},
	} {
		err := decide(c.e)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want no verdict", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if c.name == "nothing at all heard" && !errors.Is(err, ErrNATSSilent) {
			t.Errorf("%s: %v is not ErrNATSSilent", c.name, err)
		}
		if c.name == "some streams answered" && !errors.Is(err, errStreamDown) {
			t.Errorf("%s: %v is not errStreamDown", c.name, err)
		}
	}
}

// viaRelay opens a store on e through a relay the test can freeze.
func viaRelay(t *testing.T, e *natsembed.Embedded, opts Options, delayJS time.Duration) (*Store, *transporttest.Relay) {
	t.Helper()
	r := transporttest.NewRelay(t, e.ClientURL())
	if delayJS > 0 {
		r.DelayJetStream(delayJS)
	}
	nc, err := e.Connect("test", func(o *nats.Options) error { o.Servers = []string{r.URL()}; return nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return openConn(t, nc, opts), r
}

// TestFrozenNATSFailsFast: the NATS server stops answering without the
// connection closing (frozen: as under SIGSTOP; nothing comes back, not
// even a PONG). From the first call after the freeze, each API call's
// store calls fail with model.ErrUnavailable saying NATS answers nothing,
// in under 2 s of the time the store controls (the time taken less this
// process's measured stalls: on an idle machine, the time taken), with
// no earlier silence to wait out; the store's Outage says so at once.
// Thawed, the store answers again by itself.
func TestFrozenNATSFailsFast(t *testing.T) {
	e := startNATS(t, natsCfg(t, t.TempDir()))
	s, relay := viaRelay(t, e, Options{}, 0)
	seed(t, s)
	if _, err := s.Processes(backend.WithStoreWait(context.Background(), apiBound)); err != nil {
		t.Fatal(err) // answered just now: no earlier silence
	}
	relay.Freeze(true)
	for round := range 2 {
		m := transporttest.MeterStalls()
		outcomes := runBounded(boundedCalls(s, apiBound))
		stalls := m.Stop()
		for _, o := range outcomes {
			t.Logf("round %d %s: %s (stalls %s): %v", round, o.name, o.took, stalls, o.err)
			if !errors.Is(o.err, model.ErrUnavailable) || !strings.Contains(o.err.Error(), "NATS answers nothing") {
				t.Errorf("%s with NATS frozen: %v, not ErrUnavailable saying so", o.name, o.err)
			}
			if o.took-stalls >= 2*time.Second {
				t.Errorf("%s with NATS frozen took %s (%s stalled)", o.name, o.took, stalls)
			}
		}
		since, err := s.Outage()
		if !errors.Is(err, ErrNATSSilent) || since.IsZero() {
			t.Errorf("round %d: Outage with NATS frozen: %v since %v", round, err, since)
		}
	}
	relay.Freeze(false)
	waitCond(t, "the store answering again after the thaw", 30*time.Second, func() bool {
		for _, o := range runBounded(boundedCalls(s, apiBound)) {
			if o.err != nil {
				return false
			}
		}
		_, err := s.Outage()
		return err == nil
	})
}

// TestSlowJetStreamIsNotDown: JetStream slow to answer (every request
// held 400 ms on its way, NATS itself answering at once), a store that
// had been idle: every API call's store calls succeed, however long they
// take, and the store finds no outage: slow is not silent.
func TestSlowJetStreamIsNotDown(t *testing.T) {
	e := startNATS(t, natsCfg(t, t.TempDir()))
	s, _ := viaRelay(t, e, Options{}, 400*time.Millisecond)
	seed(t, s)
	for round := range 3 {
		time.Sleep(attemptTimeout) // idle: nothing answered lately
		for _, o := range runBounded(boundedCalls(s, apiBound)) {
			t.Logf("round %d %s: %s: %v", round, o.name, o.took, o.err)
			if o.err != nil {
				t.Errorf("round %d %s on a slow JetStream: %v", round, o.name, o.err)
			}
		}
		if _, err := s.Outage(); err != nil {
			t.Errorf("round %d: Outage on a slow JetStream: %v", round, err)
		}
	}
}

// TestLeaderlessStreamFailsFast: a 3-node cluster, the store's streams in
// one replica each, its results bucket moved to another node than the
// others; that node dies. The results stream has no leader while the
// others have theirs: a call needing it fails with model.ErrUnavailable
// naming it in under 2 s of the time the store controls; calls on the
// other streams still succeed, and the store reports no Outage (its
// readiness is the server's: one stream's election must not make it
// unready). A call on another stream that is still waiting for its
// answer when that verdict comes (its writes held 2.5 s on their way) is
// not failed by it: the verdict fails only the calls on the stream it
// names.
func TestLeaderlessStreamFailsFast(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node NATS cluster")
	}
	nodes := cluster3(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := open(t, nodes[0], Options{Replicas: 1})
	seed(t, s)
	leader := func(name string) string {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		st, err := s.on().js.Stream(ctx, name)
		if err != nil {
			t.Logf("stream %s: %v", name, err) // moving
			return ""
		}
		if ci := st.CachedInfo().Cluster; ci != nil {
			return ci.Leader
		}
		return ""
	}
	// Move the results stream off the node that holds the others (R1
	// streams are all placed together): removing its one peer places it
	// on another node.
	const results = "KV_gseproc_results"
	home := leader(results)
	nc := s.on().js.Conn()
	if m, err := nc.Request("$JS.API.STREAM.PEER.REMOVE."+results, []byte(`{"peer":"`+home+`"}`), 10*time.Second); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(string(m.Data), `"success":true`) {
		t.Fatalf("peer remove: %s", m.Data)
	}
	waitCond(t, "the results stream moved off "+home, 60*time.Second, func() bool {
		l := leader(results)
		return l != "" && l != home
	})
	var victim, keep *natsembed.Embedded
	for _, n := range nodes {
		switch n.Server().Name() {
		case leader(results):
			victim = n
		case leader("KV_gseproc_tasks"):
			keep = n
		}
	}
	if victim == nil || keep == nil {
		t.Fatalf("results on %s, tasks on %s", leader(results), leader("KV_gseproc_tasks"))
	}
	// The store used: on a node that stays.
	s = open(t, keep, Options{Replicas: 1})
	// Another on it whose writes to the cancels bucket are held on their
	// way (a call slow to be answered, not failing).
	const hold = 2500 * time.Millisecond
	relay := transporttest.NewRelay(t, keep.ClientURL())
	relay.DelayJetStreamOn(hold, "$KV.gseproc_cancels.")
	slowNC, err := keep.Connect("slow cancels", func(o *nats.Options) error { o.Servers = []string{relay.URL()}; return nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(slowNC.Close)
	slow := openConn(t, slowNC, Options{Replicas: 1})
	x := targets(1)[0]
	if err := s.PutResult(ctx, model.Result{TaskID: "T1", Host: x.Host, ProcKey: x.ProcKey, State: model.StateSuccess}); err != nil {
		t.Fatal(err)
	}
	holder := map[string]string{}
	for _, name := range s.streams.all() {
		holder[name] = leader(name)
	}
	t.Logf("stream leaders: %v; %s dies", holder, victim.Server().Name())
	victim.Shutdown()
	// The survivors have (or elect) a meta leader: JetStream answers.
	waitCond(t, "a meta leader among the survivors", 60*time.Second, func() bool {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := s.on().js.AccountInfo(c)
		return err == nil
	})
	calls := []struct {
		name string
		down bool
		f    func(context.Context) error
	}{
		{"results", true, func(c context.Context) error { _, err := s.Results(c, "T1"); return err }},
		{"put process", false, func(c context.Context) error { return s.PutProcess(c, proc("web", "apache")) }},
		{"task", false, func(c context.Context) error { _, _, err := s.Task(c, "T1"); return err }},
		{"audit", false, func(c context.Context) error {
			_, err := s.AppendAudit(c, model.AuditEntry{Action: model.AuditOperate, Summary: "x"})
			return err
		}},
	}
	for round := range 2 {
		var wg sync.WaitGroup
		for _, c := range calls {
			wg.Go(func() {
				m := transporttest.MeterStalls()
				t0 := time.Now()
				err := c.f(backend.WithStoreWait(context.Background(), apiBound))
				took, stalls := time.Since(t0), m.Stop()
				t.Logf("round %d %s: %s (stalls %s): %v", round, c.name, took, stalls, err)
				switch {
				case !c.down && err != nil:
					t.Errorf("%s, whose streams have their leader: %v", c.name, err)
				case c.down && (!errors.Is(err, model.ErrUnavailable) || !strings.Contains(err.Error(), "KV_gseproc_results")):
					t.Errorf("%s without its stream's leader: %v, not ErrUnavailable naming the stream", c.name, err)
				case c.down && took-stalls >= 2*time.Second:
					t.Errorf("%s without its stream's leader took %s (%s stalled)", c.name, took, stalls)
				}
			})
		}
		wg.Wait()
		// Not the server's outage (readiness): only the calls waiting on
		// the stream fail (a leader election must not make a server unready).
		if since, err := s.Outage(); err != nil {
			t.Errorf("Outage with only the results stream without a leader: %v since %v", err, since)
		}
		// The store's probe (a readiness prober's) names the stream.
		if h := s.Check(ctx); !slices.Equal(h.Streams, []string{results}) || !strings.Contains(fmt.Sprint(h.Err), results) {
			t.Errorf("Check with only the results stream without a leader: %+v", h)
		}
	}
	// A slow call on the cancels stream and a call on the results stream
	// together, on one store (one probe): the results call fails with the
	// verdict; the cancel is not failed by it (it is answered, or on a
	// very loaded machine its attempt runs out, not naming the results
	// stream). A round shows it when the verdict came while the cancel
	// waited (the results call answered first).
	shown := 0
	for round := 0; shown == 0; round++ {
		if round == 6 {
			t.Fatalf("in %d rounds the verdict on %s never came while the slow call waited", round, results)
		}
		var (
			wg                 sync.WaitGroup
			resErr, canErr     error
			resTook, canTook   time.Duration
			resStall, canStall time.Duration
		)
		call := func(f func(context.Context) error, err *error, took, stalls *time.Duration) {
			m := transporttest.MeterStalls()
			t0 := time.Now()
			*err = f(backend.WithStoreWait(context.Background(), apiBound))
			*took, *stalls = time.Since(t0), m.Stop()
		}
		wg.Go(func() {
			call(func(c context.Context) error { _, err := slow.Results(c, "T1"); return err }, &resErr, &resTook, &resStall)
		})
		wg.Go(func() {
			call(func(c context.Context) error { return slow.RequestCancel(c, "T1") }, &canErr, &canTook, &canStall)
		})
		wg.Wait()
		t.Logf("round %d: results %s (stalls %s): %v; slow cancel %s (stalls %s): %v", round, resTook, resStall, resErr, canTook, canStall, canErr)
		if !errors.Is(resErr, model.ErrUnavailable) || !strings.Contains(resErr.Error(), results) {
			t.Fatalf("results without its stream's leader: %v, not ErrUnavailable naming the stream", resErr)
		}
		if canErr != nil && strings.Contains(canErr.Error(), results) {
			t.Fatalf("a slow call on the cancels stream failed by the verdict on %s after %s: %v", results, canTook, canErr)
		}
		if canTook < hold {
			t.Fatalf("the cancel answered in %s, before its writes were let through (%s)", canTook, hold)
		}
		if resTook < canTook {
			shown++
		}
	}
	// The server's readiness prober on this store (as node wires it, no
	// call made): ready, naming the stream without a leader.
	p, err := health.Start(health.Options{Link: transport.FixedLink(s.on().js.Conn()), Every: time.Hour,
		CheckStore: func(ctx context.Context) (health.StoreCheck, bool) {
			h := s.Check(ctx)
			return health.StoreCheck{Err: h.Err, NATSSilent: errors.Is(h.Err, ErrNATSSilent), Streams: h.Streams,
				Unanswered: h.Unanswered, Lag: h.Lag, Behind: h.Behind}, true
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var st health.Status
	waitCond(t, "the prober's verdict", time.Minute, func() bool {
		st = p.Probe()
		return len(st.StreamsUnavailable) > 0 || !st.Ready
	})
	t.Logf("readiness with %s without a leader: %+v", results, st)
	if !st.Ready || st.State != health.StateReady || !slices.Equal(st.StreamsUnavailable, []string{results}) || !strings.Contains(st.Degraded, results) {
		t.Fatalf("readiness with only %s without a leader: %+v, want ready naming it", results, st)
	}
}

// TestCheckFindsFrozenNATS: with no call made, the store's probe (Check,
// as a readiness prober asks it) finds a frozen NATS (nothing comes back,
// not even a PONG) answering nothing (ErrNATSSilent) in about a second of
// scheduled time, which is also the store's Outage; thawed, the probe
// finds it answering again, and the Outage is over.
func TestCheckFindsFrozenNATS(t *testing.T) {
	e := startNATS(t, natsCfg(t, t.TempDir()))
	s, relay := viaRelay(t, e, Options{}, 0)
	seed(t, s)
	ctx := tctx(t)
	if h := s.Check(ctx); h.Err != nil || len(h.Streams) != 0 {
		t.Fatalf("Check before the freeze: %+v", h)
	}
	relay.Freeze(true)
	var h Health
	waitCond(t, "a probe finding NATS silent", time.Minute, func() bool {
		// One answered before the freeze may be reused for liveFresh; a
		// loaded machine may leave one without a verdict.
		h = s.Check(ctx)
		return h.Err != nil && !h.Unanswered
	})
	t.Logf("Check with NATS frozen: %+v", h)
	if !errors.Is(h.Err, ErrNATSSilent) || len(h.Streams) != 0 {
		t.Fatalf("Check with NATS frozen: %+v, want ErrNATSSilent", h)
	}
	if _, err := s.Outage(); !errors.Is(err, ErrNATSSilent) {
		t.Fatalf("Outage after the probe found NATS frozen: %v", err)
	}
	relay.Freeze(false)
	waitCond(t, "a probe finding the store answering after the thaw", time.Minute, func() bool {
		h = s.Check(ctx)
		return h.Err == nil
	})
	if _, err := s.Outage(); err != nil {
		t.Fatalf("Outage after the thaw: %v", err)
	}
}

// TestAffects: a verdict on the whole store fails every call; one on some
// streams fails the calls on them and those that do not say which they
// wait on, and no other.
func TestAffects(t *testing.T) {
	whole := finding{err: fmt.Errorf("%w on the connection", ErrNATSSilent)}
	some := finding{err: fmt.Errorf("%w: stream KV_r: no leader", errStreamDown), streams: []string{"KV_r", "KV_x"}}
	for _, c := range []struct {
		name string
		f    finding
		on   []string
		want bool
	}{
		{"whole store, a call on one stream", whole, []string{"KV_a"}, true},
		{"whole store, a call that does not say", whole, nil, true},
		{"some streams, a call on one of them", some, []string{"KV_r"}, true},
		{"some streams, a call on several, one of them", some, []string{"KV_a", "KV_x"}, true},
		{"some streams, a call on another", some, []string{"KV_a"}, false},
		{"some streams, a call on others", some, []string{"KV_a", "gseproc_audit"}, false},
		{"some streams, a call that does not say", some, nil, true},
		{"some streams, a call on a stream not the store's", some, []string{"KV_a", ""}, true},
	} {
		if got := affects(c.f, c.on); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestStreamOf: the stream a store message goes to, from its subject.
func TestStreamOf(t *testing.T) {
	s := &Store{streams: newStreamNames("gp"), eventsSubject: "gp.store.events", auditSubject: "gp.store.audit"}
	for subject, want := range map[string]string{
		"$KV.gp_results.T=3A1.7": "KV_gp_results",
		"$KV.gp_leases.T1":       "KV_gp_leases",
		"gp.store.events":        "gp_events",
		"gp.store.audit":         "gp_audit",
		"gp.store.other":         "",
	} {
		if got := s.streamOf(subject); got != want {
			t.Errorf("streamOf(%q) = %q, want %q", subject, got, want)
		}
	}
	if s.streams.audit != "gp_audit" || s.streams.tasks != "KV_gp_tasks" {
		t.Errorf("stream names %+v", s.streams)
	}
}

// TestOutageSince: the store's outage is dated from the first verdict on
// the whole store in a row: a verdict on some streams (no Outage) neither
// starts it nor carries over into one that follows, an answering store
// ends it, and a probe without a verdict changes nothing.
func TestOutageSince(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	whole := finding{err: fmt.Errorf("%w on the connection", ErrNATSSilent)}
	some := finding{err: fmt.Errorf("%w: stream KV_r: no leader", errStreamDown), streams: []string{"KV_r"}}
	none := finding{err: fmt.Errorf("%w: %w", errCheckUnanswered, context.DeadlineExceeded)}
	var l liveness
	for i, c := range []struct {
		name  string
		f     finding
		since int // seconds after t0; -1: none
	}{
		{"some streams", some, -1},
		{"the whole store after some streams", whole, 1},
		{"the whole store still", whole, 1},
		{"no verdict", none, 1},
		{"some streams after the whole store", some, -1},
		{"the whole store again", whole, 5},
		{"answering", finding{}, -1},
		{"the whole store after answering", whole, 7},
	} {
		at := t0.Add(time.Duration(i) * time.Second)
		lc := &liveCheck{done: make(chan struct{})}
		l.record(lc, c.f, at)
		want := time.Time{}
		if c.since >= 0 {
			want = t0.Add(time.Duration(c.since) * time.Second)
		}
		if !l.since.Equal(want) {
			t.Errorf("%s: since %v, want %v", c.name, l.since, want)
		}
		if c.f.err != none.err && l.last != lc {
			t.Errorf("%s: not kept as the last verdict", c.name)
		}
		if lc.at != at || lc.err != c.f.err {
			t.Errorf("%s: the check holds %v at %v", c.name, lc.err, lc.at)
		}
	}
}
