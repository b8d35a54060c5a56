package natsembed

import (
	"fmt"

	"github.com/nats-io/nats-server/v2/server"

	"gseproc/backend/config"
	"gseproc/backend/transport/subjects"
	"gseproc/model"
)

// This file is the one place that says what a credential of each role may
// do on NATS. A credential serving hosts (role agent: one host; role sim:
// the hosts it declares; an unbound agent under --demo: any host) may
//
//	subscribe  gseproc.agent.<host>.>       its own hosts' subtree (one
//	                                        subscription an agent), of which
//	                                        it is delivered only:
//	           gseproc.agent.<host>.op      its own hosts' ops
//	           gseproc.agent.<host>.cancel  and cancels of them
//	           gseproc.agent.<host>.evack.* JetStream's acknowledgements of its events
//	           gseproc.agent.<host>.beat    the heartbeat interval a server tells it
//	                                        (on the subtree only: an agent on the
//	                                        three subjects is never told one)
//	           gseproc.server.hello
//	publish    gseproc.agent.<host>.hb      its own hosts' heartbeats,
//	           gseproc.agent.<host>.event   events
//	           gseproc.agent.<host>.reply.* and replies
//
// and nothing else: no other host's subjects, no _INBOX, no JetStream API.
// The subtree (an agent's one subscription; the op, cancel and evack
// subjects one by one for an agent from before it) is granted with a
// deny of every host's heartbeat, event and reply subjects
// (subjects.NoDelivery), which NATS applies to each message it delivers
// on a wildcard: a credential is delivered exactly what the three
// subjects gave it, whatever it subscribes to.
// An event is published on the host's event subject, which the stream
// transport.EventStream captures, with the reply subject evack.<id> of the same
// host, which only that host's credential may subscribe to; the agent
// needs no JetStream permission at all. (NATS does not check the reply
// subject a publisher names: what guards another host's acknowledgements
// is its unguessable event ids; see transport.EventStream.)
// A reply goes to the reply subject of the addressed host (the dispatcher
// builds it), so a credential can only ever answer for its own hosts, and
// the dispatcher checks the subject a reply arrived on against the host it
// addressed. Role server has every permission.
//
// The subjects themselves are subjects.Host: to let agents use a new
// subject, add it there.

// hostPermissions allow serving the hosts of the token patterns toks.
func hostPermissions(toks ...string) *server.Permissions {
	var pub, sub []string
	for _, t := range toks {
		p, s := subjects.Host(t)
		pub, sub = append(pub, p...), append(sub, s...)
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: append(sub, subjects.Hello), Deny: subjects.NoDelivery()},
	}
}

// credentialPermissions are the permissions of one configured credential
// (nil: every permission, role server). Outside demo an agent credential
// must be bound to a host; under demo an unbound one may serve any host.
func credentialPermissions(u config.NATSUser, demo bool) (*server.Permissions, error) {
	switch u.Role {
	case config.NATSRoleServer:
		return nil, nil
	case config.NATSRoleSim:
		if len(u.Hosts) == 0 {
			return nil, fmt.Errorf("%s: role sim needs hosts (each \"cloud:ip\" or \"cloud:*\")", u.Name())
		}
		toks := make([]string, 0, len(u.Hosts))
		for _, s := range u.Hosts {
			p, err := model.ParseHostPattern(s)
			if err != nil {
				return nil, fmt.Errorf("%s: hosts: %w", u.Name(), err)
			}
			tok, err := subjects.PatternToken(p)
			if err != nil {
				return nil, fmt.Errorf("%s: hosts: %w", u.Name(), err)
			}
			toks = append(toks, tok)
		}
		return hostPermissions(toks...), nil
	case "", config.NATSRoleAgent:
		if u.Host == "" {
			if !demo {
				return nil, fmt.Errorf("%s: an agent credential must be bound to one host (host = \"cloud:ip\"; role = \"sim\" with hosts for a simulated fleet); only --demo accepts an unbound one", u.Name())
			}
			return hostPermissions("*.*"), nil
		}
		h, err := model.ParseHostID(u.Host)
		if err != nil {
			return nil, fmt.Errorf("%s: host: %w", u.Name(), err)
		}
		return hostPermissions(subjects.HostToken(h)), nil
	}
	return nil, fmt.Errorf("%s: role %q: want agent, sim or server", u.Name(), u.Role)
}
