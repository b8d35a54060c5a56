package transport

import (
	"errors"
	"fmt"
	"strings"

	"gseproc/backend/transport/subjects"
	"gseproc/model"
)

// Subject names; see the package documentation.
const (
	subjectPrefix = subjects.Prefix
	// HelloSubject asks every agent for a full heartbeat.
	HelloSubject = subjects.Hello
	// AllHeartbeats and AllEvents are the server's wildcard subscriptions.
	AllHeartbeats = "gseproc.agent.*.*.hb"
	AllEvents     = "gseproc.agent.*.*.event"
	// AllReplies is the dispatcher's subscription for the agents' replies.
	AllReplies = "gseproc.agent.*.*.reply.*"

	// StatusHeader is the reply header a fleet sets to "unreachable" when the
	// host's agent is down.
	StatusHeader      = "Gseproc-Status"
	statusUnreachable = "unreachable"
)

// MaxSubject is the longest subject this package builds: the prefix, a
// canonical identity (model.MaxHostIDText) and the longest kind (a reply
// with its id). NATS closes a connection whose control line passes 4096
// bytes; a subject is built only from a model.HostID, so none comes near.
const MaxSubject = len(subjectPrefix) + model.MaxHostIDText + len(".reply.") + maxReplyID

// maxReplyID bounds the request id of a reply subject.
const maxReplyID = 64

// HostToken is the host's two subject tokens "<cloud>.<ip-token>".
func HostToken(id model.HostID) string { return subjects.HostToken(id) }

// OpSubject is the subject a host's agent serves operations on.
func OpSubject(id model.HostID) string { return subject(id, ".op") }

// CancelSubject is the subject a host's agent receives cancels of the ops
// it runs on (a JSON model.CancelRequest).
func CancelSubject(id model.HostID) string { return subject(id, ".cancel") }

// InboxSubject is the one subscription an agent serving host id makes:
// the host's whole subtree, of which it takes the op, cancel and evack
// subjects (inboxKind) and NATS delivers it nothing else (see
// natsembed/permissions.go). A server from before it grants only those
// three: the agent then subscribes to them one by one (agentSubs).
func InboxSubject(id model.HostID) string { return subject(id, subjects.Inbox) }

// Kinds of the messages an inbox subscription is delivered.
const (
	inboxOther  = iota // not for the agent (its own publishes, echoed by a connection without NoEcho)
	inboxOp            // <host>.op
	inboxCancel        // <host>.cancel
	inboxAck           // <host>.evack.<id>
	inboxBeat          // <host>.beat
)

// inboxKind is the kind of subject subj delivered on the inbox of the
// host whose subjects start with pfx (its InboxSubject without ">").
func inboxKind(pfx, subj string) int {
	rest, ok := strings.CutPrefix(subj, pfx)
	switch {
	case !ok:
		return inboxOther
	case rest == "op":
		return inboxOp
	case rest == "cancel":
		return inboxCancel
	case rest == "beat":
		return inboxBeat
	case strings.HasPrefix(rest, "evack.") && !strings.Contains(rest[len("evack."):], "."):
		return inboxAck
	}
	return inboxOther
}

// BeatSubject is the subject a server tells a host's agent its heartbeat
// interval on (a JSON BeatHint): under the host's inbox, which no
// credential serving hosts may publish on.
func BeatSubject(id model.HostID) string { return subject(id, ".beat") }

// HeartbeatSubject is the subject a host's agent publishes heartbeats on.
func HeartbeatSubject(id model.HostID) string { return subject(id, ".hb") }

// EventSubject is the subject a host's agent publishes events on.
func EventSubject(id model.HostID) string { return subject(id, ".event") }

func subject(id model.HostID, kind string) string {
	if !id.Valid() {
		// Only the zero HostID gets here: a bug, not input.
		panic("transport: subject for the zero model.HostID")
	}
	return subjectPrefix + HostToken(id) + kind
}

// hostID is h's identity, for the sending side: a host that has none
// (not canonical) cannot be addressed, permanently.
func hostID(h model.Host) (model.HostID, error) {
	id, err := h.ID()
	if err != nil {
		return model.HostID{}, fmt.Errorf("%w: %v", ErrBadHost, err)
	}
	return id, nil
}

// ErrBadHost: a host without a canonical identity was to be addressed.
// Dispatching to it can never succeed.
var ErrBadHost = errors.New("not a valid host identity")

// ReplySubject is where host's agent answers the request id: only a
// credential serving host may publish there, so the subject proves who
// answered.
func ReplySubject(h model.HostID, id string) string {
	if len(id) > maxReplyID {
		panic("transport: reply id longer than maxReplyID") // ids are ours, not input
	}
	return subject(h, ".reply."+id)
}

// hostFromSubject parses gseproc.agent.<cloud>.<ip-token>.<kind>.
func hostFromSubject(subj string) (model.HostID, error) {
	if len(subj) > MaxSubject {
		return model.HostID{}, fmt.Errorf("subject of %d bytes: longer than any host subject", len(subj))
	}
	toks := strings.Split(subj, ".")
	if len(toks) != 5 || toks[0] != "gseproc" || toks[1] != "agent" {
		return model.HostID{}, fmt.Errorf("subject %q: want gseproc.agent.<cloud>.<ip>.<kind>", subj)
	}
	return hostFromTokens(subj, toks)
}

// replyFromSubject parses gseproc.agent.<cloud>.<ip-token>.reply.<id>.
func replyFromSubject(subj string) (model.HostID, string, error) {
	if len(subj) > MaxSubject {
		return model.HostID{}, "", fmt.Errorf("subject of %d bytes: longer than any reply subject", len(subj))
	}
	toks := strings.Split(subj, ".")
	if len(toks) != 6 || toks[0] != "gseproc" || toks[1] != "agent" || toks[4] != "reply" {
		return model.HostID{}, "", fmt.Errorf("subject %q: want gseproc.agent.<cloud>.<ip>.reply.<id>", subj)
	}
	h, err := hostFromTokens(subj, toks)
	return h, toks[5], err
}

// hostFromTokens is the identity of a subject's host tokens, which must
// spell it canonically.
func hostFromTokens(subj string, toks []string) (model.HostID, error) {
	ip := strings.Map(func(r rune) rune {
		switch r {
		case '_':
			return '.'
		case '-':
			return ':'
		}
		return r
	}, toks[3])
	id, err := model.ParseHostID(toks[2] + ":" + ip)
	if err != nil {
		return model.HostID{}, err
	}
	if HostToken(id) != toks[2]+"."+toks[3] {
		return model.HostID{}, fmt.Errorf("subject %q: host not in canonical form (%s)", subj, id)
	}
	return id, nil
}

// sameHost reports whether h (as a message names it) is the identity id;
// a message's host is canonicalized first (the supplier id is not part of
// an identity).
func sameHost(h model.Host, id model.HostID) bool {
	hid, err := h.ID()
	return err == nil && hid == id
}
