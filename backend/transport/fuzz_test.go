package transport

import (
	"context"
	"encoding/json"
	"hash/maphash"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/model"
)

// Fuzz targets of the agent wire: subjects and the messages the server
// takes from agents (heartbeats, events, replies). Their seeds run as
// ordinary tests.

// FuzzSubjects: a subject parses to an identity only when it spells the
// identity canonically; the subjects built from it are bounded.
func FuzzSubjects(f *testing.F) {
	for _, s := range []string{"gseproc.agent.0.10_0_0_1.hb", "gseproc.agent.2.fe80--1.event", "gseproc.agent.0.FE80--1.hb",
		"gseproc.agent.0.--ffff-10_0_0_1.op", "gseproc.agent.1.10_0_0_1.reply.abc", "gseproc.agent.00.1_2_3_4.hb",
		"gseproc.agent.0.fe80--1%" + strings.Repeat("z", 300) + ".hb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subj string) {
		if id, err := hostFromSubject(subj); err == nil {
			toks := strings.Split(subj, ".")
			if got := subjectPrefix + HostToken(id) + "." + toks[4]; got != subj {
				t.Fatalf("%q parsed as %s, which spells %q", subj, id, got)
			}
			if len(OpSubject(id)) > MaxSubject {
				t.Fatalf("%s: subject longer than MaxSubject", id)
			}
		}
		if id, rid, err := replyFromSubject(subj); err == nil {
			if ReplySubject(id, rid) != subj {
				t.Fatalf("%q parsed as %s %q, which spells %q", subj, id, rid, ReplySubject(id, rid))
			}
		}
	})
}

// FuzzAgentMessages: whatever an agent (or a forger) publishes, the
// dispatcher keeps only hosts with a canonical identity, named by the
// subject it arrived on.
func FuzzAgentMessages(f *testing.F) {
	hb, _ := json.Marshal(Heartbeat{Info: model.HostInfo{Host: model.Host{IP: "10.0.0.1"}, AgentID: "0200000002abcdef0123"},
		Time: time.Unix(1700000000, 0), Interval: time.Second, Statuses: []model.ProcStatus{{ProcKey: "gse:proc-test", PID: 7, State: model.ProcRunning}}})
	ev, _ := json.Marshal(model.Event{Host: model.Host{IP: "10.0.0.1"}, ProcKey: "gse:proc-test", Kind: model.EventRestartSuccess})
	forged, _ := json.Marshal(Heartbeat{Info: model.HostInfo{Host: model.Host{IP: "::ffff:10.0.0.2"}}})
	for _, s := range []string{"gseproc.agent.0.10_0_0_1.hb", "gseproc.agent.0.10_0_0_2.hb", "gseproc.agent.0.10_0_0_1.event"} {
		for _, d := range [][]byte{hb, ev, forged, []byte(`{"host": {"ip": "fe80::1%x"}}`), []byte(`{`), nil} {
			f.Add(s, d)
		}
	}
	f.Fuzz(func(t *testing.T, subj string, data []byte) {
		d := &Dispatcher{opts: DispatcherOptions{OfflineAfter: time.Minute}, log: slog.New(slog.DiscardHandler),
			hosts: map[model.Host]*hostEntry{}, beats: map[uint64]*hostEntry{}, beatSeed: maphash.MakeSeed()}
		var got []model.Event
		d.subs.add(context.Background(), func(e model.Event) { got = append(got, e) })
		m := &nats.Msg{Subject: subj, Data: data}
		d.onHeartbeat(m)
		d.onReply(m)
		// An event read from the stream: only a valid one, of the host its
		// subject names, under an id scoped to that host.
		if e, err := decodeEvent(subj, data, "x1", "o1"); err == nil {
			sid, serr := hostFromSubject(subj)
			if id, err := e.Host.ID(); err != nil || serr != nil || id != sid || e.ID != EventID(sid, "x1") || !agentEventKinds[e.Kind] ||
				e.Message != model.PlainText(e.Message) || e.ProcKey != model.PlainText(e.ProcKey) {
				t.Fatalf("event %+v decoded from %q", e, subj)
			}
		}
		for h, e := range d.hosts {
			id, err := h.ID()
			if err != nil || id.Host() != h || e.host != h {
				t.Fatalf("dispatcher keeps host %+v (entry %+v) from %q", h, e.host, subj)
			}
			if sid, _ := hostFromSubject(subj); sid != id {
				t.Fatalf("host %s kept from subject %q", id, subj)
			}
		}
		// A subject is known by the entry of its own host only.
		for k, e := range d.beats {
			if subj := HeartbeatSubject(e.id); k != maphash.String(d.beatSeed, subj) || e.id.Host() != e.host || d.hosts[e.host] != e || d.beat(subj) != e {
				t.Fatalf("heartbeat subject of %s known as host %+v", e.id, e.host)
			}
		}
		for _, e := range got {
			if _, err := e.Host.ID(); err != nil {
				t.Fatalf("event for host %+v emitted", e.Host)
			}
		}
		// The agent side decodes requests the same way.
		var req model.AgentRequest
		_ = json.Unmarshal(data, &req)
	})
}
