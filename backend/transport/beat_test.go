package transport

import (
	"hash/maphash"
	"log/slog"
	"testing"
	"time"

	"gseproc/model"
)

// A keepalive whose subject's hash is another host's slot in beats (a
// collision, planted here: the seed is random) is not counted for that
// host: beat checks the entry's own heartbeat subject, and the subject
// is parsed for its own host instead.
func TestBeatHashCollision(t *testing.T) {
	d := &Dispatcher{opts: DispatcherOptions{OfflineAfter: time.Minute}, log: slog.New(slog.DiscardHandler),
		hosts: map[model.Host]*hostEntry{}, beats: map[uint64]*hostEntry{}, beatSeed: maphash.MakeSeed()}
	a, b := mustID(t, h1), mustID(t, model.Host{IP: "10.0.0.2"})
	subjA, subjB := HeartbeatSubject(a), HeartbeatSubject(b)
	d.onKeepalive(subjB)
	eb := d.hosts[b.Host()]
	if eb == nil || eb.keepalives != 1 {
		t.Fatalf("B after its keepalive: %+v", eb)
	}
	d.beats[maphash.String(d.beatSeed, subjA)] = eb // A's subject collides with B's entry
	if e := d.beat(subjA); e != nil {
		t.Fatalf("A's subject finds host %s's entry", e.host)
	}
	d.onKeepalive(subjA)
	if eb.keepalives != 1 {
		t.Fatalf("A's keepalive counted for B: %d keepalives", eb.keepalives)
	}
	ea := d.hosts[a.Host()]
	if ea == nil || ea == eb || ea.keepalives != 1 || !ea.online || d.beat(subjA) != ea {
		t.Fatalf("A after its keepalive: %+v", ea)
	}
	if d.beat(subjB) != eb {
		t.Fatal("B no longer found by its own subject")
	}
}
