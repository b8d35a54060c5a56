package natsembed

import (
	"slices"
	"testing"

	"gseproc/backend/config"
)

// TestCredentialPermissions: what each role may subscribe to and publish,
// and what it is never delivered (every host's heartbeats, events and
// replies, which the subtree an agent subscribes to covers).
func TestCredentialPermissions(t *testing.T) {
	deny := []string{"gseproc.agent.*.*.hb", "gseproc.agent.*.*.event", "gseproc.agent.*.*.reply.*"}
	for _, c := range []struct {
		name     string
		u        config.NATSUser
		demo     bool
		sub, pub []string // nil with server: every permission
		err      bool
	}{
		{"agent", config.NATSUser{User: "a", Host: "0:10.0.0.1"}, false,
			[]string{"gseproc.agent.0.10_0_0_1.>", "gseproc.agent.0.10_0_0_1.op", "gseproc.agent.0.10_0_0_1.cancel", "gseproc.agent.0.10_0_0_1.evack.*", "gseproc.server.hello"},
			[]string{"gseproc.agent.0.10_0_0_1.hb", "gseproc.agent.0.10_0_0_1.event", "gseproc.agent.0.10_0_0_1.reply.*"}, false},
		{"sim", config.NATSUser{User: "s", Role: config.NATSRoleSim, Hosts: []string{"1:*", "2:fe80::1"}}, false,
			[]string{"gseproc.agent.1.*.>", "gseproc.agent.1.*.op", "gseproc.agent.1.*.cancel", "gseproc.agent.1.*.evack.*",
				"gseproc.agent.2.fe80--1.>", "gseproc.agent.2.fe80--1.op", "gseproc.agent.2.fe80--1.cancel", "gseproc.agent.2.fe80--1.evack.*", "gseproc.server.hello"},
			[]string{"gseproc.agent.1.*.hb", "gseproc.agent.1.*.event", "gseproc.agent.1.*.reply.*",
				"gseproc.agent.2.fe80--1.hb", "gseproc.agent.2.fe80--1.event", "gseproc.agent.2.fe80--1.reply.*"}, false},
		{"unbound agent under demo", config.NATSUser{User: "d"}, true,
			[]string{"gseproc.agent.*.*.>", "gseproc.agent.*.*.op", "gseproc.agent.*.*.cancel", "gseproc.agent.*.*.evack.*", "gseproc.server.hello"},
			[]string{"gseproc.agent.*.*.hb", "gseproc.agent.*.*.event", "gseproc.agent.*.*.reply.*"}, false},
		{"unbound agent", config.NATSUser{User: "d"}, false, nil, nil, true},
		{"server", config.NATSUser{User: "srv", Role: config.NATSRoleServer}, false, nil, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := credentialPermissions(c.u, c.demo)
			if (err != nil) != c.err {
				t.Fatalf("err %v, want error %v", err, c.err)
			}
			if c.sub == nil {
				if p != nil {
					t.Fatalf("permissions %+v, want none (every permission) or a refusal", p)
				}
				return
			}
			if !slices.Equal(p.Subscribe.Allow, c.sub) || !slices.Equal(p.Subscribe.Deny, deny) {
				t.Errorf("subscribe allow %q deny %q, want %q deny %q", p.Subscribe.Allow, p.Subscribe.Deny, c.sub, deny)
			}
			if !slices.Equal(p.Publish.Allow, c.pub) || len(p.Publish.Deny) != 0 {
				t.Errorf("publish allow %q deny %q, want %q", p.Publish.Allow, p.Publish.Deny, c.pub)
			}
		})
	}
}
