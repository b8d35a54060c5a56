package jsstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
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

// TestLeaderGetAPIPrefix: the leader's read goes where the store's
// JetStream sends its API requests: here an account whose JetStream API
// is imported under a prefix, where the default $JS.API answers "not
// enabled for account" (the read was once sent there whatever the
// JetStream given).
func TestLeaderGetAPIPrefix(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(`
listen: "127.0.0.1:-1"
jetstream: {store_dir: "`+filepath.ToSlash(dir)+`"}
accounts: {
  JS: {jetstream: enabled, users: [{user: js, password: js}], exports: [{service: "$JS.API.>"}]}
  APP: {users: [{user: app, password: app}], imports: [{service: {account: JS, subject: "$JS.API.>"}, to: "js.API.>"}]}
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(20 * time.Second) {
		t.Fatal("nats not ready")
	}
	nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo("app", "app"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.NewWithAPIPrefix(nc, "js.API")
	if err != nil {
		t.Fatal(err)
	}
	ctx := tctx(t)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "prefixed"})
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{}
	s.cur.Store(&bound{js: js})
	if _, err := s.leaderGet(ctx, kv, "never"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("key never written, read through the prefixed API: %v", err)
	}
	for _, tc := range []struct {
		js   func() (jetstream.JetStream, error)
		want string
	}{
		{func() (jetstream.JetStream, error) { return jetstream.New(nc) }, "$JS.API."},
		{func() (jetstream.JetStream, error) { return jetstream.NewWithAPIPrefix(nc, "js.API.") }, "js.API."},
		{func() (jetstream.JetStream, error) { return jetstream.NewWithDomain(nc, "hub") }, "$JS.hub.API."},
	} {
		js, err := tc.js()
		if err != nil {
			t.Fatal(err)
		}
		if got := apiPrefix(js); got != tc.want {
			t.Errorf("apiPrefix %q, want %q", got, tc.want)
		}
	}
}
