package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"gseproc/model"
)

// Durable events. An agent publishes each event on its own event subject
// with the header Nats-Msg-Id (the event's id, which it made) and a reply
// subject of its own (gseproc.agent.<host>.evack.<id>), where JetStream
// acknowledges it: the stream EventStream captures every agent's event
// subject, so an event is kept as soon as it is acknowledged, whether a
// gseproc server runs or not. Until then the agent keeps it (on disk) and
// publishes it again; the stream keeps one message per id within
// EventDuplicates. The servers read the stream with one shared durable
// consumer (EventConsumer, work-queue retention): each event is delivered
// to one server, acknowledged once stored (and removed from the stream
// then), and delivered again when that server dies first; the store keeps
// one event per id, so a repeat is harmless.
//
// What keeps one agent from suppressing another's events is the agent's
// ids, not NATS: the reply subject is the publisher's to choose (JetStream
// acknowledges on whatever subject it names, another host's evack subject
// too) and the stream drops a repeated Nats-Msg-Id whoever publishes it.
// Both happen when JetStream takes the message, before any server reads
// it (the stream does not keep the reply subject), so no server can
// refuse them. An agent takes an acknowledgement only for an id it holds
// pending, and its ids begin with 64 random bits of its own run
// (eventIDs) that no other agent can read (agents have no JetStream
// permission and see no other host's subjects): a forger has to guess
// them.
const (
	// EventStream is the JetStream stream of the agents' events.
	EventStream = "gseproc_agent_events"
	// EventConsumer is the servers' shared durable consumer of EventStream.
	EventConsumer = "gseproc-servers"
	// EventDuplicates is how long EventStream remembers the ids it took: an
	// agent publishing an event again (its acknowledgement was lost, or it
	// replays its buffer after a restart) within it adds nothing.
	EventDuplicates = 10 * time.Minute
	// eventStreamMaxMsgs and eventStreamMaxBytes bound the events waiting
	// for a server (servers down for long): beyond them the oldest go.
	eventStreamMaxMsgs  = 1 << 20
	eventStreamMaxBytes = 1 << 30
	// maxEventSize is the largest event message the stream takes.
	maxEventSize = 64 << 10
	// eventAckWait is how long a server has to store an event delivered to
	// it before it is delivered again (to any server).
	eventAckWait = 30 * time.Second
	// eventNakDelay is how long an event that could not be stored waits
	// before it is delivered again.
	eventNakDelay = 2 * time.Second
	// maxEventID bounds an event id as an agent makes it.
	maxEventID = 64
)

// EventStreamOptions say how the servers keep EventStream.
type EventStreamOptions struct {
	// Replicas of the stream: 1 on one NATS server, 3 on a cluster
	// ([nats] replicas); 0 is 1.
	Replicas int
	// Memory keeps the stream in memory (tests); the default is files.
	Memory bool
}

// eventStreamConfig is EventStream as the servers create it.
func eventStreamConfig(o EventStreamOptions) jetstream.StreamConfig {
	c := jetstream.StreamConfig{
		Name: EventStream, Description: "gseproc agents' events, until a server has stored them",
		Subjects: []string{AllEvents}, Retention: jetstream.WorkQueuePolicy,
		MaxMsgs: eventStreamMaxMsgs, MaxBytes: eventStreamMaxBytes, MaxMsgSize: maxEventSize,
		Discard: jetstream.DiscardOld, Duplicates: EventDuplicates,
		Replicas: max(o.Replicas, 1), Storage: jetstream.FileStorage,
	}
	if o.Memory {
		c.Storage = jetstream.MemoryStorage
	}
	return c
}

// eventConsumerConfig is the servers' shared consumer.
func eventConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: EventConsumer, Description: "every gseproc server: each event is stored by one",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: eventAckWait, MaxAckPending: 20_000,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// EventAckSubject is where host's agent is acknowledged its event id.
func EventAckSubject(h model.HostID, id string) string { return subject(h, ".evack."+id) }

// eventAckPattern is the subscription of host's acknowledgements.
func eventAckPattern(h model.HostID) string { return subject(h, ".evack.*") }

// agentEventKinds are the kinds of event an agent may report: the server
// derives the others (agent on/offline, corrected results) itself, and
// refuses them from an agent.
var agentEventKinds = map[model.EventKind]bool{
	model.EventRestartSuccess: true, model.EventRestartFailed: true, model.EventGiveUp: true,
	model.EventLimitExceeded: true, model.EventGroupLimitExceeded: true,
}

// checkEventID reports whether id is an event id as an agent makes it: 1
// to maxEventID bytes of [A-Za-z0-9_-] (a subject token and a header value).
func checkEventID(id string) error {
	if id == "" || len(id) > maxEventID {
		return fmt.Errorf("event id of %d bytes: want 1 to %d", len(id), maxEventID)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("event id %q: byte %d is not [A-Za-z0-9_-]", id, i)
		}
	}
	return nil
}

// EventID is the id the server stores host's event under, from the id the
// agent gave it: scoped to the host, so that no agent can name (and so
// suppress) another host's event or one the server derives.
func EventID(h model.HostID, agentID string) string { return "a." + HostToken(h) + "." + agentID }

// derivedEventID is the id of an agent on/offline event the server derives
// from host's heartbeats: the time the agent stamped on its last full
// heartbeat (the same message reaches every server) and how many
// keepalives came after it. Every server of a cluster that sees the same
// change names it alike, and the store keeps it once.
func derivedEventID(h model.Host, kind model.EventKind, full int64, keepalives int32) string {
	on := "off"
	if kind == model.EventAgentOnline {
		on = "on"
	}
	return "s." + h.AgentID() + "." + on + "." + strconv.FormatInt(full, 36) + "." + strconv.Itoa(int(keepalives))
}

// eventIDs makes an agent's event ids: a random prefix for this run and a
// counter, so ids never repeat across restarts and cost no system call.
type eventIDs struct {
	prefix string
	n      atomic.Uint64
}

func newEventIDs() *eventIDs { return &eventIDs{prefix: randomSecret()[:16]} }

func (g *eventIDs) next() string { return g.prefix + "-" + strconv.FormatUint(g.n.Add(1), 36) }

// decodeEvent is the event of a message on subject subj (an agent's event
// subject) with data and the agent's id for it, checked: the subject
// names the host (only that host's credential may publish there), the
// payload may name no other, the kind is one an agent reports. The
// event's ID is EventID of the agent's (of orphan, which names the
// message the same at every delivery, when it gave none or a bad one).
// Its texts (process key, message) are made plain (model.PlainText): no
// escape sequence reaches the store and operators' terminals; the stream
// bounds their size (maxEventSize).
func decodeEvent(subj string, data []byte, agentID, orphan string) (model.Event, error) {
	h, err := hostFromSubject(subj)
	if err != nil {
		return model.Event{}, err
	}
	if !strings.HasSuffix(subj, ".event") {
		return model.Event{}, fmt.Errorf("subject %q: not an event subject", subj)
	}
	var e model.Event
	if err := json.Unmarshal(data, &e); err != nil {
		return model.Event{}, fmt.Errorf("event on %s: decode: %w", subj, err)
	}
	if e.Host.IP == "" {
		e.Host = h.Host()
	}
	if !sameHost(e.Host, h) {
		return model.Event{}, fmt.Errorf("event on %s names another host (%s)", subj, e.Host.String())
	}
	if !agentEventKinds[e.Kind] {
		return model.Event{}, fmt.Errorf("event on %s: kind %q is not one an agent reports", subj, e.Kind)
	}
	e.Host = h.Host()
	e.ProcKey, e.Message = model.PlainText(e.ProcKey), model.PlainText(e.Message)
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if checkEventID(agentID) != nil {
		agentID = orphan
	}
	e.ID = EventID(h, agentID)
	return e, nil
}

// AckedEventFunc is a subscriber of the durable events (see
// Dispatcher.SubscribeAckedEvents).
type AckedEventFunc = func(ev model.Event, ack func(error))

// ackedEvent is an event with its acknowledgement (nil: none is awaited).
type ackedEvent struct {
	ev  model.Event
	ack func(error)
}

// SubscribeAckedEvents calls fn, until ctx ends, with every event: the
// agents' (read from EventStream, which the dispatcher starts consuming
// with its first such subscriber) and those it derives (agent on/offline;
// their ack is nil). fn's ack must be called once the event is stored
// (nil) or could not be (the event is delivered again, to this server or
// another). fn must not block.
func (d *Dispatcher) SubscribeAckedEvents(ctx context.Context, fn AckedEventFunc) {
	d.asubs.add(ctx, func(a ackedEvent) { fn(a.ev, a.ack) })
	select {
	case d.consumeWake <- struct{}{}:
	default:
	}
}

// onDurableEvent hands an event read from EventStream to the subscribers
// and acknowledges it once every acknowledging subscriber has stored it.
// A message that is no valid event is terminated (never delivered again).
func (d *Dispatcher) onDurableEvent(m jetstream.Msg) {
	// An event published with no id of its own is named by its place in
	// the stream (its sequence and the time the stream took it), the
	// same at every delivery: delivered again, it is stored once still.
	orphan := "x" + randomSecret()
	if md, err := m.Metadata(); err == nil {
		orphan = "x" + strconv.FormatUint(md.Sequence.Stream, 36) + "-" + strconv.FormatInt(md.Timestamp.UnixNano(), 36)
	}
	e, err := decodeEvent(m.Subject(), m.Data(), m.Headers().Get(jetstream.MsgIDHeader), orphan)
	if err != nil {
		d.log.Warn("dispatcher: event refused", "err", err)
		_ = m.Term()
		return
	}
	afns := d.asubs.list()
	if len(afns) == 0 {
		_ = m.NakWithDelay(eventNakDelay) // nobody to store it here (yet)
		return
	}
	for _, fn := range d.subs.list() {
		fn(e)
	}
	var left atomic.Int32
	var failed atomic.Bool
	left.Store(int32(len(afns)))
	ack := func(err error) {
		if err != nil {
			failed.Store(true)
		}
		if left.Add(-1) != 0 {
			return
		}
		if failed.Load() {
			_ = m.NakWithDelay(eventNakDelay)
			return
		}
		if err := m.Ack(); err != nil {
			d.log.Debug("dispatcher: ack event (it will be delivered again, and stored once)", "err", err)
		}
	}
	for _, fn := range afns {
		fn(ackedEvent{ev: e, ack: ack})
	}
}

// consumeLoop reads EventStream with the shared consumer while anyone
// subscribes with SubscribeAckedEvents, on the connection in use, until
// the dispatcher closes. It creates the stream and the consumer (a
// cluster without a JetStream quorum yet is tried again), and starts again
// on a new connection (Rebind) or when the consumer goes away.
func (d *Dispatcher) consumeLoop() {
	defer d.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-d.stop
		cancel()
	}()
	bo := model.Backoff{Base: 250 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.2}
	for k := 0; ; {
		if d.asubs.empty() {
			select {
			case <-d.stop:
				return
			case <-d.consumeWake:
				continue
			}
		}
		nc := d.nc.Load()
		cc, err := d.consume(ctx, nc)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.log.Warn("dispatcher: cannot read the agents' events yet; trying again", "stream", EventStream, "err", err)
			select {
			case <-d.stop:
				return
			case <-d.rebound:
			case <-time.After(bo.Delay(k, rand.Float64())):
			}
			k++
			continue
		}
		k = 0
		d.log.Info("dispatcher: reading the agents' events", "stream", EventStream, "consumer", EventConsumer)
		select {
		case <-d.stop:
			cc.Stop()
			return
		case <-d.rebound:
			cc.Stop()
		case <-cc.Closed():
			d.log.Warn("dispatcher: reading the agents' events stopped; starting again", "stream", EventStream)
			select {
			case <-d.stop:
				return
			case <-time.After(bo.Delay(0, rand.Float64())):
			}
		}
	}
}

// consume creates (or updates) the stream and the shared consumer on nc
// and starts consuming.
func (d *Dispatcher) consume(ctx context.Context, nc *nats.Conn) (jetstream.ConsumeContext, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := js.CreateOrUpdateStream(actx, eventStreamConfig(d.opts.Events))
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", EventStream, err)
	}
	cons, err := st.CreateOrUpdateConsumer(actx, eventConsumerConfig())
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", EventConsumer, err)
	}
	cc, err := cons.Consume(d.onDurableEvent, jetstream.PullMaxMessages(512),
		jetstream.ConsumeErrHandler(func(cc jetstream.ConsumeContext, err error) {
			switch {
			case errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound):
				d.log.Warn("dispatcher: events consumer gone; making it again", "err", err)
				cc.Stop() // consumeLoop starts again
			case errors.Is(err, jetstream.ErrNoHeartbeat) || errors.Is(err, nats.ErrConnectionReconnecting):
				d.log.Debug("dispatcher: events consumer", "err", err)
			default:
				d.log.Warn("dispatcher: events consumer", "err", err)
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", EventConsumer, err)
	}
	return cc, nil
}
