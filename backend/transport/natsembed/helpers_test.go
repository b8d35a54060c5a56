package natsembed

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/backend/config"
)

// testNATS is the [nats] section of a test server: 127.0.0.1, a free port,
// JetStream in a temporary directory.
func testNATS(t testing.TB) config.NATSConfig {
	c := config.Default().NATS
	c.Listen = "127.0.0.1:-1"
	c.StoreDir = t.TempDir()
	return c
}

// serverConn is e's own connection, closed at the test's end.
func serverConn(t testing.TB, e *Embedded) *nats.Conn {
	t.Helper()
	nc, err := e.Connect("test-server")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// eventually waits (polling, bounded by d) until cond holds.
func eventually(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
