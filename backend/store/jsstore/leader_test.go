package jsstore

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestLeaderGet: the leader's read of a key gives what a Get gives, and
// not-found for a key never written, deleted or purged.
func TestLeaderGet(t *testing.T) {
	s := open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{})
	ctx := tctx(t)
	rev, err := s.on().procs.Put(ctx, "k1", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.leaderGet(ctx, s.on().procs, "k1")
	if err != nil || string(e.Value()) != "v1" || e.Revision() != rev || e.Key() != "k1" || e.Bucket() != s.on().procs.Bucket() {
		t.Fatalf("leader get: %v %+v (rev %d)", err, e, rev)
	}
	if _, err := s.leaderGet(ctx, s.on().procs, "never"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("key never written: %v", err)
	}
	for _, k := range []string{"del", "purge"} {
		if _, err := s.on().procs.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.on().procs.Delete(ctx, "del"); err != nil {
		t.Fatal(err)
	}
	if err := s.on().procs.Purge(ctx, "purge"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"del", "purge"} {
		if _, err := s.leaderGet(ctx, s.on().procs, k); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatalf("%s: %v", k, err)
		}
		if _, err := s.get(ctx, s.on().procs, k); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatalf("get %s: %v", k, err)
		}
	}
}
