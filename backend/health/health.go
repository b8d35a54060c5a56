// Package health says whether a server can serve: a background prober
// checks the NATS connection, JetStream (its quorum and, on an embedded
// cluster node, how many nodes are up), the store's replication lag, the
// task leases this server holds and the agents online, and keeps the last
// answer, so /readyz and /metrics read it at once whatever the state (a
// NATS or JetStream call can stall for seconds when the cluster loses a
// node).
package health

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend/transport"
	"gseproc/backend/transport/natsembed"
)

// States of a server, as /readyz reports them.
const (
	// StateReady: NATS connected, JetStream answering.
	StateReady = "ready"
	// StateStarting: not probed yet, or NATS and JetStream answer but the
	// server is still opening its store or resuming its tasks.
	StateStarting = "starting"
	// StateNATSDown: the server's NATS connection is down (it reconnects
	// by itself), or NATS answers nothing on it (not even a PING: a
	// stopped or cut-off server, found by the store); operations cannot
	// reach agents or the store.
	StateNATSDown = "nats_disconnected"
	// StateNoQuorum: JetStream does not answer: on a cluster, too few nodes
	// are up for a quorum (the node waits for its peers and recovers by
	// itself when they return), or the store finds JetStream silent.
	// Hosted processes keep running.
	StateNoQuorum = "no_quorum"
)

// Status is one probe's findings.
type Status struct {
	State   string    `json:"state"`
	Ready   bool      `json:"ready"`
	Reason  string    `json:"reason,omitempty"` // why not ready, in words
	Checked time.Time `json:"checked"`
	// Since is when the state last changed.
	Since time.Time `json:"since"`
	NATS  string    `json:"nats"` // connected, reconnecting, disconnected, closed
	// Link: the connection's owner (transport.Link): its state, how many
	// times it replaced a connection the NATS server closed for good, and
	// the last reason.
	Link transport.LinkStatus `json:"nats_link"`
	// JetStream: OK when it answered; on an embedded cluster node, the
	// nodes up (this one and those it has a route to) of the cluster's
	// size, the quorum, the meta leader and whether the cluster has formed.
	JetStream JetStreamStatus `json:"jetstream"`
	// StoreLag is the most operations any replica of the store's streams
	// is behind its leader; StoreReplicasBehind counts the replicas not
	// current.
	StoreLag            uint64 `json:"store_lag"`
	StoreReplicasBehind int    `json:"store_replicas_behind"`
	// StreamsUnavailable are the store's streams the last probe found
	// without a leader or without a quorum while the others answer (a
	// leader election after a node died): calls on them are refused with
	// 503 and the reason, the others go on, and the server stays ready
	// (every server shares the streams: none would serve them better).
	// Degraded says so in words ("" when none).
	StreamsUnavailable []string `json:"streams_unavailable,omitempty"`
	Degraded           string   `json:"degraded,omitempty"`
	// LeasesHeld is the number of tasks this server runs (holds the lease of).
	LeasesHeld   int `json:"leases_held"`
	AgentsOnline int `json:"agents_online"`
	AgentsKnown  int `json:"agents_known"`
}

// JetStreamStatus is the JetStream part of a Status.
type JetStreamStatus struct {
	OK        bool   `json:"ok"`
	Error     string `json:"error,omitempty"`
	NodesUp   int    `json:"nodes_up,omitempty"`
	NodesWant int    `json:"nodes_want,omitempty"`
	// Forming: this node has never known its peers (the cluster's first
	// start, which needs every node up together; afterwards a quorum
	// suffices).
	Forming bool `json:"forming,omitempty"`
	// QuorumNeeded is how many nodes must be up for JetStream to answer.
	QuorumNeeded int    `json:"quorum_needed,omitempty"`
	Leader       string `json:"leader,omitempty"`
}

// Options say what the prober checks. Link (the server's NATS
// connection) is required; the others are optional.
type Options struct {
	Link *transport.Link
	// Node is the embedded NATS server (nil on an external cluster): it
	// tells how many cluster nodes are up.
	Node *server.Server
	// StreamPrefix selects the store's streams whose lag is reported
	// (default "gseproc": KV_gseproc_* and gseproc_*).
	StreamPrefix string
	// Leases and Agents report the engine's held leases and the agents
	// online and known.
	Leases func() int
	Agents func() (online, known int)
	// Starting, when not nil, says why the server cannot serve yet although
	// NATS and JetStream answer (opening its store, resuming its tasks);
	// "" once it has started. Until then the state is "starting".
	Starting func() string
	// StoreOutage, when not nil, is the store's own finding that it
	// cannot reach JetStream (jsstore.Store.Outage: the probe an API call
	// waiting on the store made found NATS or JetStream silent or
	// refusing), with the reason and since when. Status
	// reads it live and reports it at once over a ready verdict, as it
	// does a lost connection: natsSilent (NATS answers nothing, not even a
	// PING) as nats_disconnected, anything else as no_quorum.
	StoreOutage func() (since time.Time, natsSilent bool, err error)
	// CheckStore, when not nil, is the store's own probe
	// (jsstore.Store.Check: a PING on its connection and an info of each of
	// its streams, judged by what answers, shared with the API calls
	// waiting on the store), with ok false while there is no store yet.
	// Each probe asks it instead of JetStream's account info and stream
	// listing, so that a NATS server that answers nothing (stopped, cut
	// off) is told at once from JetStream without a quorum, from some
	// streams without a leader; it bounds itself (3 s).
	CheckStore func(ctx context.Context) (c StoreCheck, ok bool)
	// Every is the probe interval (default 1s); Timeout bounds each NATS
	// call of a probe (default 2s).
	Every, Timeout time.Duration
	// FailAfter consecutive failed probes make the state not ready
	// (default 3), so one slow answer on a loaded machine is not an outage.
	FailAfter int
	Logger    *slog.Logger
}

// StoreCheck is the store's probe's findings (Options.CheckStore).
type StoreCheck struct {
	// Err is nil when NATS and every stream of the store answer, each with
	// a leader heard by a quorum of its replicas; else why not.
	Err error
	// NATSSilent: NATS answers nothing on the connection, not even a PING.
	NATSSilent bool
	// Streams, when Err is about some streams only, are their names.
	Streams []string
	// Unanswered: no verdict within the probe's time (no finding).
	Unanswered bool
	// Lag and Behind: the store's replication lag (Status.StoreLag,
	// StoreReplicasBehind).
	Lag    uint64
	Behind int
}

// Prober probes in the background until Close.
type Prober struct {
	o    Options
	nc   *nats.Conn // the link's connection js is on
	js   jetstream.JetStream
	stop chan struct{}
	done chan struct{}
	ctx  context.Context // ends at Close
	end  context.CancelFunc

	mu        sync.Mutex
	last      Status
	fails     int       // consecutive failed probes
	downSince time.Time // when Status first saw the connection down since the last probe
}

// Start probes once (bounded by o.Timeout), then every o.Every in the
// background.
func Start(o Options) (*Prober, error) {
	if o.Link == nil {
		return nil, fmt.Errorf("health: no NATS connection")
	}
	if o.Every <= 0 {
		o.Every = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.FailAfter <= 0 {
		o.FailAfter = 3
	}
	if o.StreamPrefix == "" {
		o.StreamPrefix = "gseproc"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	nc := o.Link.Conn()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("health: jetstream: %w", err)
	}
	now := time.Now()
	p := &Prober{o: o, nc: nc, js: js, stop: make(chan struct{}), done: make(chan struct{}),
		last: Status{State: StateStarting, Reason: "not probed yet", Checked: now, Since: now, NATS: nc.Status().String()}}
	p.ctx, p.end = context.WithCancel(context.Background())
	p.probeOnce()
	go p.loop()
	return p, nil
}

// Status is the last probe's findings; it never blocks on NATS. A NATS
// connection lost since that probe is reported at once (its state is read
// live, without a request): nats_disconnected, with the reason; so is an
// outage the store found (Options.StoreOutage) while the last probe found
// the server ready.
func (p *Prober) Status() Status {
	down, why := natsDown(p.o.Link)
	var (
		storeSince  time.Time
		storeSilent bool
		storeErr    error
	)
	if !down && p.o.StoreOutage != nil {
		storeSince, storeSilent, storeErr = p.o.StoreOutage()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.last
	if !down {
		p.downSince = time.Time{}
		if storeErr != nil && s.Ready {
			s.State, s.Ready, s.Since = StateNoQuorum, false, storeSince
			if storeSilent {
				s.State = StateNATSDown
			}
			s.Reason = "the store finds " + storeErr.Error() + " (it recovers by itself when they answer)"
		}
		return s
	}
	if s.State == StateNATSDown {
		return s
	}
	if p.downSince.IsZero() {
		p.downSince = time.Now()
	}
	s.State, s.Ready, s.Reason, s.Since = StateNATSDown, false, why, p.downSince
	s.NATS, s.Link = strings.ToLower(p.o.Link.Conn().Status().String()), p.o.Link.Status()
	return s
}

// natsDown says whether the link's connection is down now, and why.
func natsDown(l *transport.Link) (bool, string) {
	st := l.Status()
	switch nc := l.Conn(); {
	case st.State == transport.LinkRedialing:
		return true, "the NATS server closed the server's connection for good (" + st.LastClosed + "); a new one is being dialed"
	case !nc.IsConnected():
		return true, "the server's NATS connection is " + strings.ToLower(nc.Status().String()) + " (it reconnects by itself)"
	}
	return false, ""
}

// Probe probes now and returns the findings (bounded by Options.Timeout):
// for a change the caller made (the server started) to show at once.
func (p *Prober) Probe() Status {
	p.probeOnce()
	return p.Status()
}

// Close stops the prober and waits for it.
func (p *Prober) Close() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.end()
	<-p.done
}

func (p *Prober) loop() {
	defer close(p.done)
	t := time.NewTicker(p.o.Every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		p.probeOnce()
	}
}

func (p *Prober) probeOnce() {
	ctx, cancel := context.WithTimeout(context.Background(), p.o.Timeout)
	defer cancel()
	if nc := p.o.Link.Conn(); nc != p.nc {
		// The link replaced a connection closed for good.
		if js, err := jetstream.New(nc); err == nil {
			p.nc, p.js = nc, js
		}
	}
	s := Status{Checked: time.Now(), NATS: strings.ToLower(p.nc.Status().String()), Link: p.o.Link.Status()}
	if p.o.Leases != nil {
		s.LeasesHeld = p.o.Leases()
	}
	if p.o.Agents != nil {
		s.AgentsOnline, s.AgentsKnown = p.o.Agents()
	}
	if p.o.Node != nil {
		if jsz, err := p.o.Node.Jsz(&server.JSzOptions{}); err == nil && jsz.Meta != nil && jsz.Meta.Size > 1 {
			s.JetStream.NodesUp = 1 + len(natsembed.RoutePeers(p.o.Node))
			s.JetStream.NodesWant, s.JetStream.QuorumNeeded, s.JetStream.Leader = jsz.Meta.Size, jsz.Meta.QuorumNeeded, jsz.Meta.Leader
			if s.JetStream.QuorumNeeded == 0 {
				s.JetStream.QuorumNeeded = jsz.Meta.Size/2 + 1
			}
			s.JetStream.Forming = neverFormed(p.o.Node.Name(), jsz.Meta)
		}
	}
	var (
		bad    string
		judged bool // bad is the store's verdict, judged already: not one slow answer
	)
	if down, why := natsDown(p.o.Link); down {
		s.State, bad = StateNATSDown, why
	} else if c, ok := p.checkStore(); ok {
		bad, judged = p.fromStore(&s, c)
	} else {
		if _, err := p.js.AccountInfo(ctx); err != nil {
			s.JetStream.Error = err.Error()
			s.State = StateNoQuorum
			bad = "JetStream does not answer: " + err.Error()
			if s.JetStream.NodesWant > 0 {
				bad = clusterWhy(s.JetStream)
			}
		} else {
			s.JetStream.OK = true
			s.StoreLag, s.StoreReplicasBehind = p.storeLag(ctx)
			p.readyOrStarting(&s)
		}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.last
	if bad != "" {
		p.fails++
		// A lost connection is a fact, reported at once; JetStream not
		// answering may be one slow answer on a loaded machine.
		if s.State != StateNATSDown && !judged && p.fails < p.o.FailAfter && prev.State != StateStarting {
			// Not yet an outage: keep the last verdict, with fresh figures.
			s.State, s.Ready, s.Reason = prev.State, prev.Ready, prev.Reason
		} else {
			s.Reason = bad
		}
	} else {
		p.fails = 0
	}
	s.Ready = s.State == StateReady
	s.Since = prev.Since
	if s.State != prev.State {
		s.Since = s.Checked
		if s.State == StateNATSDown && !p.downSince.IsZero() {
			s.Since = p.downSince // as Status has reported it since
		}
		if s.Ready {
			p.o.Logger.Info("health: ready", "was", prev.State)
		} else if s.State != StateStarting {
			p.o.Logger.Warn("health: not ready", "state", s.State, "reason", s.Reason)
		}
	}
	switch {
	case s.Degraded != "" && !slices.Equal(s.StreamsUnavailable, prev.StreamsUnavailable):
		p.o.Logger.Warn("health: store streams unavailable (their calls are refused; the server stays ready)", "streams", s.StreamsUnavailable, "reason", s.Degraded)
	case s.Degraded == "" && prev.Degraded != "":
		p.o.Logger.Info("health: store streams available again", "were", prev.StreamsUnavailable)
	}
	p.last = s
}

// readyOrStarting sets s ready, or starting with the reason while the
// server is still opening its store or resuming its tasks.
func (p *Prober) readyOrStarting(s *Status) {
	s.State = StateReady
	if p.o.Starting != nil {
		if why := p.o.Starting(); why != "" {
			s.State, s.Reason = StateStarting, why
		}
	}
}

// checkStore asks the store's probe (Options.CheckStore), bounded by the
// probe itself and by Close; ok false without a store.
func (p *Prober) checkStore() (StoreCheck, bool) {
	if p.o.CheckStore == nil {
		return StoreCheck{}, false
	}
	return p.o.CheckStore(p.ctx)
}

// fromStore sets s from the store's probe's findings c and returns why
// the server is not ready ("" when it is), and whether that is a verdict
// already judged (reported at once) rather than a probe left unanswered
// (counted towards FailAfter).
func (p *Prober) fromStore(s *Status, c StoreCheck) (bad string, judged bool) {
	switch {
	case c.Err == nil || len(c.Streams) > 0:
		s.JetStream.OK = true
		s.StoreLag, s.StoreReplicasBehind = c.Lag, c.Behind
		p.readyOrStarting(s)
		if c.Err != nil {
			s.StreamsUnavailable = c.Streams
			s.Degraded = "the store finds " + c.Err.Error() + "; calls on these streams are refused with 503 until they answer (a leader election after a node died is over in seconds)"
		}
		return "", false
	case c.NATSSilent:
		s.State = StateNATSDown
		return "the store finds " + c.Err.Error() + "; it recovers by itself when NATS answers", true
	}
	s.State, s.JetStream.Error = StateNoQuorum, c.Err.Error()
	if why := clusterWaiting(s.JetStream); why != "" {
		return why, !c.Unanswered
	}
	if c.Unanswered {
		return "JetStream does not answer the store's probe: " + c.Err.Error(), false
	}
	return "the store finds " + c.Err.Error() + "; it recovers by itself when JetStream answers", true
}

// clusterWaiting says what an embedded cluster node waits for when too
// few nodes are up for JetStream ("" when enough are, or not a cluster
// node).
func clusterWaiting(js JetStreamStatus) string {
	if js.NodesWant > 0 && (js.Forming || js.NodesUp < js.QuorumNeeded) {
		return clusterWhy(js)
	}
	return ""
}

// clusterWhy is what a cluster node's JetStream (js.NodesWant > 0) waits
// for when it does not answer: the cluster to form, or a quorum.
func clusterWhy(js JetStreamStatus) string {
	if js.Forming {
		return fmt.Sprintf("JetStream cluster forming: its first start needs all %d nodes of [nats.cluster] routes up together (%d up); it becomes ready by itself when they are",
			js.NodesWant, js.NodesUp)
	}
	return fmt.Sprintf("JetStream has no quorum: waiting for %d of %d nodes (%d up); it recovers by itself when they return",
		js.QuorumNeeded, js.NodesWant, js.NodesUp)
}

// neverFormed says this node's JetStream meta group has never known a peer
// nor a leader: without a leader the replica list holds this node alone
// until the cluster has formed once; afterwards it keeps every peer, up or
// not.
func neverFormed(self string, meta *server.MetaClusterInfo) bool {
	if meta.Leader != "" {
		return false
	}
	for _, r := range meta.Replicas {
		if r != nil && r.Name != self {
			return false
		}
	}
	return true
}

// storeLag is the largest replica lag of the store's streams and how many
// replicas are not current: one listing of the streams' infos (a JetStream
// request per 256 streams), not a request per stream.
func (p *Prober) storeLag(ctx context.Context) (lag uint64, behind int) {
	streams := p.js.ListStreams(ctx)
	for info := range streams.Info() {
		name := info.Config.Name
		if !strings.HasPrefix(name, p.o.StreamPrefix+"_") && !strings.HasPrefix(name, "KV_"+p.o.StreamPrefix+"_") {
			continue
		}
		if info.Cluster == nil {
			continue
		}
		for _, r := range info.Cluster.Replicas {
			lag = max(lag, r.Lag)
			if !r.Current {
				behind++
			}
		}
	}
	return lag, behind
}
