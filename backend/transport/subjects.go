package transport

import (
	"fmt"
	"strconv"
	"strings"

	"gseproc/model"
)

// Subject names; see the package documentation.
const (
	subjectPrefix = "gseproc.agent."
	// HelloSubject asks every agent for a full heartbeat.
	HelloSubject = "gseproc.server.hello"
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

// HostToken is the host's two subject tokens "<cloud>.<ip-token>".
func HostToken(h model.Host) string {
	return strconv.Itoa(h.CloudID) + "." + strings.Map(func(r rune) rune {
		switch r {
		case '.':
			return '_'
		case ':':
			return '-'
		}
		return r
	}, h.IP)
}

// OpSubject is the subject a host's agent serves operations on.
func OpSubject(h model.Host) string { return subjectPrefix + HostToken(h) + ".op" }

// HeartbeatSubject is the subject a host's agent publishes heartbeats on.
func HeartbeatSubject(h model.Host) string { return subjectPrefix + HostToken(h) + ".hb" }

// EventSubject is the subject a host's agent publishes events on.
func EventSubject(h model.Host) string { return subjectPrefix + HostToken(h) + ".event" }

// ReplySubject is where host's agent answers the request id: only a
// credential serving host may publish there, so the subject proves who
// answered.
func ReplySubject(h model.Host, id string) string {
	return subjectPrefix + HostToken(h) + ".reply." + id
}

// hostFromSubject parses gseproc.agent.<cloud>.<ip-token>.<kind>.
func hostFromSubject(subj string) (model.Host, error) {
	toks := strings.Split(subj, ".")
	if len(toks) != 5 || toks[0] != "gseproc" || toks[1] != "agent" {
		return model.Host{}, fmt.Errorf("subject %q: want gseproc.agent.<cloud>.<ip>.<kind>", subj)
	}
	return hostFromTokens(toks)
}

// replyFromSubject parses gseproc.agent.<cloud>.<ip-token>.reply.<id>.
func replyFromSubject(subj string) (model.Host, string, error) {
	toks := strings.Split(subj, ".")
	if len(toks) != 6 || toks[0] != "gseproc" || toks[1] != "agent" || toks[4] != "reply" {
		return model.Host{}, "", fmt.Errorf("subject %q: want gseproc.agent.<cloud>.<ip>.reply.<id>", subj)
	}
	h, err := hostFromTokens(toks)
	return h, toks[5], err
}

func hostFromTokens(toks []string) (model.Host, error) {
	ip := strings.Map(func(r rune) rune {
		switch r {
		case '_':
			return '.'
		case '-':
			return ':'
		}
		return r
	}, toks[3])
	return model.ParseAgentID(toks[2] + ":" + ip)
}

// sameHost compares identities (cloud and IP; the supplier id is not part of it).
func sameHost(a, b model.Host) bool { return a.CloudID == b.CloudID && a.IP == b.IP }
