// Package subjects names what the NATS subjects of gseproc's hosts are
// built from: their prefix, a host's two tokens, the server's hello, and
// the subjects a credential serving hosts may publish and subscribe to.
// The transport builds every host subject on it and the embedded NATS
// server (natsembed) grants credentials by it; it imports only model, so
// the two share it without importing each other (the agent's binary links
// the transport, not the NATS server).
package subjects

import (
	"strconv"

	"gseproc/model"
)

const (
	// Prefix starts every host subject: Prefix + HostToken + kind.
	Prefix = "gseproc.agent."
	// Hello asks every agent for a full heartbeat.
	Hello = "gseproc.server.hello"
)

// HostToken is the host's two subject tokens "<cloud>.<ip-token>".
func HostToken(id model.HostID) string {
	return string(AppendHostToken(make([]byte, 0, 48), id))
}

// AppendHostToken appends HostToken(id) to b: a dispatcher building a
// host's subjects for every op makes one buffer, not a string per step.
func AppendHostToken(b []byte, id model.HostID) []byte {
	b = strconv.AppendInt(b, int64(id.Cloud()), 10)
	b = append(b, '.')
	start := len(b)
	b = id.Addr().AppendTo(b)
	for i := start; i < len(b); i++ {
		switch b[i] {
		case '.':
			b[i] = '_'
		case ':':
			b[i] = '-'
		}
	}
	return b
}

// PatternToken is the subject token pattern of a host pattern ("<cloud>.*"
// for a whole cloud area).
func PatternToken(p model.HostPattern) (string, error) {
	if p.IP == "" {
		return strconv.Itoa(p.CloudID) + ".*", nil
	}
	id, err := model.Host{CloudID: p.CloudID, IP: p.IP}.ID()
	if err != nil {
		return "", err
	}
	return HostToken(id), nil
}

// Host are the subjects a credential serving the hosts of the subject
// token pattern tok ("<cloud>.<ip-token>", either token may be "*") may
// publish and subscribe to (besides Hello, which every such credential
// may subscribe to). To let agents use a new subject, add it here.
//
// sub holds the host's whole subtree (Inbox: an agent's one
// subscription) besides the three subjects an agent from before it
// subscribes to one by one (op, cancel, evack.*). What the subtree holds
// beyond those three is what hosts publish (pub), which no credential
// serving hosts is ever delivered (NoDelivery): so it receives exactly
// what it did with the three.
func Host(tok string) (pub, sub []string) {
	p := Prefix + tok
	return []string{p + ".hb", p + ".event", p + ".reply.*"}, []string{p + Inbox, p + ".op", p + ".cancel", p + ".evack.*"}
}

// Inbox ends the subject of a host's whole subtree: an agent subscribes
// to its host's Prefix + HostToken + Inbox once (each subscription costs
// the NATS server about a kilobyte: three an agent were ~280 MB at
// 100,000 agents) and tells the op, cancel and evack subjects apart by
// their last tokens.
const Inbox = ".>"

// NoDelivery are the subjects no credential serving hosts is delivered,
// whatever it subscribed to: what hosts publish (every host's heartbeats,
// events and replies). A host's subtree (Inbox) covers its own; these
// keep it out of them, as before the subtree was granted.
func NoDelivery() []string {
	pub, _ := Host("*.*")
	return pub
}
