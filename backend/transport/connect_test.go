package transport

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/backend/config"
	"gseproc/backend/transport/natsembed"
	"gseproc/backend/transport/transporttest"
	"gseproc/model"
)

// TestRotateSpreads: agents' identities spread evenly over the URLs.
func TestRotateSpreads(t *testing.T) {
	urls := []string{"nats://a:4222", "nats://b:4222", "nats://c:4222"}
	count := map[string]int{}
	for i := range 3000 {
		h := model.Host{IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250)}
		r := rotate(urls, h.AgentID())
		if len(r) != 3 {
			t.Fatalf("rotate dropped URLs: %v", r)
		}
		count[r[0]]++
	}
	for _, u := range urls {
		if count[u] < 800 || count[u] > 1200 {
			t.Fatalf("home nodes of 3000 agents: %v, want about 1000 each", count)
		}
	}
	if a, b := rotate(urls, "0:10.0.0.1"), rotate(urls, "0:10.0.0.1"); a[0] != b[0] {
		t.Fatal("rotate is not stable for one key")
	}
}

// TestHomeAndBack: a client with a home node connects there, moves to the
// other node when home dies, and back when home returns.
func TestHomeAndBack(t *testing.T) {
	n1 := startServer(t, testNATS(t), true)
	n2 := startServer(t, testNATS(t), true)
	list := []string{n1.ClientURL(), n2.ClientURL()}
	// A key whose home is n1.
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("0:10.0.0.%d", i); rotate(list, k)[0] == n1.ClientURL() {
			key = k
		}
	}
	logs := &transporttest.LogBuf{}
	nc, err := Connect(ClientOptions{URLs: strings.Join([]string{n2.ClientURL(), n1.ClientURL()}, ","), Home: key,
		HomeCheck: 50 * time.Millisecond, MaxReconnectDelay: 200 * time.Millisecond},
		slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	host := func(u string) string { p, _ := url.Parse(u); return p.Host }
	on := func(e *natsembed.Embedded) func() bool {
		return func() bool { return nc.IsConnected() && host(nc.ConnectedUrl()) == host(e.ClientURL()) }
	}
	eventually(t, "on its home node", 15*time.Second, on(n1))
	addr := host(n1.ClientURL())
	n1.Shutdown()
	eventually(t, "on the other node", 15*time.Second, on(n2))
	c := testNATS(t)
	c.Listen = addr
	n1b := startServer(t, c, true)
	eventually(t, "back on its home node", 15*time.Second, on(n1b))
	if !strings.Contains(logs.String(), "moving back") {
		t.Errorf("log does not say it moved back:\n%s", logs)
	}
}

// TestConnectSaysWhy: a permanent failure at start (credentials, TLS) ends
// a FailFast connection with the reason in words; a transient one (no
// server yet) is retried with the reason logged, and connects once the
// server is there.
func TestConnectSaysWhy(t *testing.T) {
	ca, cert, key := writeTLS(t)
	otherCA, _, _ := writeTLS(t)
	pw := testNATS(t)
	pw.Users = []config.NATSUser{{User: "a1", Password: "right", Host: "0:10.0.0.1"}}
	plain := startServer(t, pw, false)
	tc := testNATS(t)
	tc.TLS = config.NATSTLSConfig{Cert: cert, Key: key}
	tlsSrv := startServer(t, tc, true)
	vc := testNATS(t)
	vc.TLS = config.NATSTLSConfig{Cert: cert, Key: key, CA: ca, Verify: true}
	verifySrv := startServer(t, vc, true)

	for _, tt := range []struct {
		name string
		o    ClientOptions
		want string
	}{
		{"wrong password", ClientOptions{URLs: plain.ClientURL(), User: "a1", Password: "wrong"}, "credentials refused"},
		{"wrong CA", ClientOptions{URLs: tlsSrv.ClientURL(), TLS: config.NATSTLSConfig{CA: otherCA}}, "not signed by the trusted CA"},
		{"no client certificate", ClientOptions{URLs: verifySrv.ClientURL(), TLS: config.NATSTLSConfig{CA: ca}}, "client certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fatal := make(chan error, 1)
			tt.o.FailFast, tt.o.OnFatal = true, func(err error) { fatal <- err }
			tt.o.MaxReconnectDelay = 100 * time.Millisecond
			logs := &transporttest.LogBuf{}
			nc, err := Connect(tt.o, slog.New(slog.NewTextHandler(logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			select {
			case err := <-fatal:
				if !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("fatal error %q does not say %q", err, tt.want)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("no fatal error; log:\n%s", logs)
			}
			eventually(t, "closed", 10*time.Second, nc.IsClosed)
			if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), tt.want) {
				t.Fatalf("log does not say it at error:\n%s", logs)
			}
		})
	}

	t.Run("transient", func(t *testing.T) {
		ports := transporttest.ReservePorts(t, 1)
		addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
		logs := &transporttest.LogBuf{}
		nc, err := Connect(ClientOptions{URLs: "nats://" + addr, FailFast: true, MaxReconnectDelay: 100 * time.Millisecond,
			OnFatal: func(err error) { t.Errorf("fatal on a transient failure: %v", err) }}, slog.New(slog.NewTextHandler(logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		eventually(t, "reason logged", 15*time.Second, func() bool { return strings.Contains(logs.String(), "no NATS server") })
		if strings.Count(logs.String(), "no NATS server") > 2 {
			t.Errorf("the same reason logged at every retry:\n%s", logs)
		}
		c := testNATS(t)
		c.Listen = addr
		startServer(t, c, true)
		eventually(t, "connected once the server is up", 20*time.Second, nc.IsConnected)
	})
}

// TestConnectedLoggedOnce: one connection is one "nats: connected" line
// (nats.go's connect handler logs it; Connect does not say it again).
func TestConnectedLoggedOnce(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	logs := &transporttest.LogBuf{}
	nc, err := Connect(ClientOptions{URLs: e.ClientURL()}, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// nats.go runs its callbacks in order on one goroutine: once the
	// closed handler has run, the connect handler has too.
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	nc.Close()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("closed handler not called")
	}
	if n := strings.Count(logs.String(), "nats: connected"); n != 1 {
		t.Fatalf("%d \"nats: connected\" lines for one connection, want 1:\n%s", n, logs)
	}
}
