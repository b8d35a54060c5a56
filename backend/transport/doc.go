// Package transport carries gseproc's server-agent traffic on NATS.
//
// # Subjects
//
// Every agent is addressed by its identity "cloud:ip" (model.Host.AgentID),
// written as two subject tokens: the cloud id, and the IP with '.' replaced by
// '_' and ':' by '-' (10.0.0.1 -> 10_0_0_1, fe80::1 -> fe80--1). With
// <host> = <cloud>.<ip-token>:
//
//	gseproc.agent.<host>.op      the server publishes a JSON
//	                             model.AgentRequest with the reply subject
//	                             gseproc.agent.<host>.reply.<id>; the agent
//	                             answers a JSON model.AgentReply there. No
//	                             subscriber -> NATS "no responders" ->
//	                             model.ErrUnreachable (117).
//	                             A request with Tail set (a
//	                             model.TailRequest) asks for a piece of
//	                             a process's log instead of an op: the
//	                             same subject, reply subject and
//	                             permissions, so an agent serves only
//	                             its own logs. A follow is a chain of such
//	                             requests (each from the last answer's
//	                             Next offset, held up to TailRequest.Wait
//	                             for new lines): the agent keeps no
//	                             state, and paces each answer to its
//	                             tail rate (backend/logtail, which the
//	                             simulator serves through too).
//	gseproc.agent.<host>.cancel  the server publishes a JSON
//	                             model.CancelRequest when the task of an op
//	                             it sent is cancelled: the agent ends that
//	                             op's context with model.ErrCancelled (the
//	                             command's process group is killed) and
//	                             answers the op's reply subject with
//	                             Cancelled set; the dispatcher waits for
//	                             that answer up to CancelGrace. A server
//	                             that took over a task whose cancel was
//	                             asked while no server ran it cannot be
//	                             answered there (the op's reply subject
//	                             was its dead predecessor's): it sends
//	                             the cancel as a request on the op subject
//	                             (AgentRequest.CancelOp, same op id) and
//	                             gets the op's outcome as the answer.
//	gseproc.agent.<host>.hb      the agent publishes a JSON Heartbeat (identity,
//	                             labels, process statuses) every heartbeat
//	                             interval, at start, on reconnect and (Leaving)
//	                             when it stops.
//	gseproc.agent.<host>.event   the agent publishes each JSON model.Event,
//	                             with Nats-Msg-Id (its id for the event)
//	                             and the reply subject
//	                             gseproc.agent.<host>.evack.<id>: the
//	                             stream EventStream captures these
//	                             subjects and JetStream acknowledges
//	                             there. The agent keeps the event (on
//	                             disk) and publishes it again until
//	                             acknowledged; the servers read the
//	                             stream with one shared durable consumer
//	                             and acknowledge an event once stored
//	                             (see events.go, outbox.go, spool.go).
//	gseproc.agent.<host>.beat    the server publishes a JSON BeatHint, the
//	                             heartbeat interval the host is to keep:
//	                             the fleet's, so that the whole fleet
//	                             sends at most [nats]
//	                             max_heartbeats_per_second (beat.go). The
//	                             agent takes it within bounds; an agent
//	                             that does not (from before it) never
//	                             says it does (Heartbeat.Hints) and is
//	                             never told.
//	gseproc.server.hello         the server publishes on start; every agent
//	                             answers with a full heartbeat at once, so a
//	                             restarted server knows the fleet in
//	                             milliseconds instead of one interval.
//
// An agent (and each host of a simulated fleet) receives its op, cancel,
// evack and beat messages through one subscription, its host's inbox
// gseproc.agent.<host>.> (InboxSubject), and tells them apart by their
// last tokens: the NATS server keeps about a kilobyte a subscription,
// and three an agent were ~280 MB of a server's heap at 100,000 agents.
// The server publishes on the same subjects as before, so an agent from
// before the inbox (three subscriptions) works against this server, and
// this agent against a server from before it: NATS refuses the inbox
// there (its credentials grant only the three subjects) and the agent
// subscribes to the three instead (agentSubs; a fleet its hosts' op
// subjects). Agents' and fleets' connections are made with NoEcho: their
// inboxes cover what they publish.
//
// Per-host subjects bind an agent's credential to its identity (the
// permission sets live in natsembed/permissions.go, one place, on the
// subjects of package subjects): a credential bound
// to host "0:10.0.0.1" may only subscribe to gseproc.agent.0.10_0_0_1.>
// (and, for agents from before it, .op, .cancel and .evack.*), of which
// NATS delivers it only the op, cancel and evack subjects (what hosts
// publish is denied at delivery), and publish that host's hb, event and
// reply subjects; a `gseproc sim`
// credential (role sim) the same for the hosts it declares. Outside --demo
// an agent credential bound to no host is refused at start. The server
// trusts no payload for identity: it drops heartbeats and events whose
// payload names another host than their subject, refuses from an agent
// the events only a server derives (agent on/offline, corrected results),
// stores an agent's event under an id scoped to its host (EventID), and
// takes a reply only from the reply subject of the host it addressed.
//
// A reply goes to the addressed host's own subject, which every node of
// a cluster lets that host's credential publish: an agent whose node dies
// mid-op reconnects to another and its answer still reaches the server.
// When the server's own connection was down (or replaced), an answer may
// have been published while nobody subscribed: every request with an op
// id still waiting is then published again, and the agent answers the
// repeat from its op ledger (waiting for the op if it still runs), never
// running it twice. A request whose deadline passed is still listened for
// 10 minutes (at most 100,000 of them): an answer then is handed to the
// engine (Dispatcher.SubscribeLate), which corrects the 116 it recorded.
//
// A reply may carry the header Gseproc-Status: unreachable, which a
// simulated fleet uses to say "this host's agent is down" (the dispatcher
// then reports model.ErrUnreachable, as for no responders).
//
// # Pieces
//
//   - natsembed.StartEmbedded runs a NATS server with JetStream in the
//     process (or Connect reaches an external cluster). It lives in its
//     own package so that what an agent links (this package) does not
//     include the NATS server; subjects, which both use, imports only
//     model.
//   - ClientLink is an agent's or a simulated fleet's connection (a Link),
//     and Stopper the end of its run.
//   - Dispatcher (server side) implements the engine's Dispatcher, Inventory
//     and EventSource over NATS.
//   - ServeAgent (agent side) serves one AgentHandler; ServeFleet serves a
//     whole simulated fleet on one connection.
//   - Merge routes hosts between a primary and a secondary dispatcher (real
//     agents beside the simulated fleet under --demo).
//   - Link owns a long-lived connection (the server's, an agent's, a
//     simulated fleet's). nats.go reconnects a dropped connection by
//     itself, but closes one for good on a server error it does not
//     recover from ("maximum control line exceeded", a parser or payload
//     violation, credentials refused twice); Link then dials a new one
//     with backoff and moves its users onto it: the Dispatcher
//     (Rebind subscribes again), the JetStream store (jsstore.Store.Rebind
//     opens its buckets again), ServeAgentOn and ServeFleetOn (inbox
//     subscriptions made again, events kept meanwhile). Link.Status
//     says what it is doing (connected, reconnecting, redialing, closed;
//     redials, and why the last connection closed).
package transport
