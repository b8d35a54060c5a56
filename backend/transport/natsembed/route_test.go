package natsembed

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"gseproc/backend/config"
	"gseproc/backend/transport/subjects"
	"gseproc/backend/transport/transporttest"
)

// writeRouteTLS writes a CA and, per name, a certificate for 127.0.0.1
// usable as both TLS server and client (a route node is both).
func writeRouteTLS(t *testing.T, names ...string) (ca string, certs, keys map[string]string) {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gseproc route CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca = write("ca.pem", "CERTIFICATE", caDER)
	certs, keys = map[string]string{}, map[string]string{}
	for i, n := range names {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: n},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			KeyUsage:    x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kd, _ := x509.MarshalECPrivateKey(k)
		certs[n], keys[n] = write(n+".pem", "CERTIFICATE", der), write(n+".key", "EC PRIVATE KEY", kd)
	}
	return ca, certs, keys
}

// TestRouteRefused: a cluster of two nodes whose routes are authenticated
// (and, in one case, encrypted with verified peers). A rogue NATS server
// pointing a route at a node without the credentials (or, with TLS, with
// the credentials but no certificate) is refused, the node logs it at warn
// or above, and a client of the rogue reads nothing of what the cluster
// carries, while the real peer does.
func TestRouteRefused(t *testing.T) {
	ca, certs, keys := writeRouteTLS(t, "n1", "n2", "rogue")
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"auth", false}, {"auth and TLS", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ports := transporttest.ReservePorts(t, 2)
			routes := []string{fmt.Sprintf("nats-route://127.0.0.1:%d", ports[0]), fmt.Sprintf("nats-route://127.0.0.1:%d", ports[1])}
			logs := &transporttest.LogBuf{}
			var nodes []*Embedded
			for i, name := range []string{"n1", "n2"} {
				c := testNATS(t)
				c.ServerName = name
				c.Cluster = config.NATSClusterConfig{Name: "routes", Listen: fmt.Sprintf("127.0.0.1:%d", ports[i]), Routes: routes,
					User: "route", Password: "route-secret"}
				if tc.tls {
					c.Cluster.TLS = config.NATSRouteTLS{Cert: certs[name], Key: keys[name], CA: ca}
				}
				if err := c.Validate(); err != nil {
					t.Fatal(err)
				}
				var log *slog.Logger
				if i == 0 {
					log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
				}
				e, err := StartEmbedded(c, EmbeddedOptions{}, log)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(e.Shutdown)
				nodes = append(nodes, e)
			}
			eventually(t, "the two nodes routed", 20*time.Second, func() bool {
				return nodes[0].Server().NumRoutes() > 0 && nodes[1].Server().NumRoutes() > 0
			})

			// The rogue: no route credentials (plain), or the credentials
			// but no certificate (TLS).
			ro := &server.Options{ServerName: "rogue", Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true,
				Cluster: server.ClusterOpts{Name: "routes", Host: "127.0.0.1", Port: -1}}
			target := routes[0]
			if tc.tls {
				target = fmt.Sprintf("nats-route://route:route-secret@127.0.0.1:%d", ports[0])
			}
			u, _ := url.Parse(target)
			ro.Routes = append(ro.Routes, u)
			rogue, err := server.NewServer(ro)
			if err != nil {
				t.Fatal(err)
			}
			rogue.Start()
			t.Cleanup(rogue.Shutdown)
			if !rogue.ReadyForConnections(10 * time.Second) {
				t.Fatal("rogue not ready")
			}
			want := "route refused"
			eventually(t, "node 1 logs the refused route at warn or above", 20*time.Second, func() bool {
				for _, l := range strings.Split(logs.String(), "\n") {
					if strings.Contains(l, want) && (strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR")) {
						return true
					}
				}
				return false
			})

			var stolen, peer atomic.Int32
			rc, err := nats.Connect(rogue.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			if _, err := rc.Subscribe(">", func(*nats.Msg) { stolen.Add(1) }); err != nil {
				t.Fatal(err)
			}
			_ = rc.Flush()
			hbSubject := subjects.Prefix + "0.10_0_0_1.hb" // a host's heartbeat, as node 1 carries them
			pc := serverConn(t, nodes[1])
			if _, err := pc.Subscribe(">", func(m *nats.Msg) {
				if m.Subject == hbSubject {
					peer.Add(1)
				}
			}); err != nil {
				t.Fatal(err)
			}
			_ = pc.Flush()
			sc := serverConn(t, nodes[0])
			eventually(t, "the real peer gets node 1's traffic", 20*time.Second, func() bool {
				_ = sc.Publish(hbSubject, []byte(`{}`))
				_ = sc.Flush()
				return peer.Load() > 0
			})
			if n := stolen.Load(); n != 0 || rogue.NumRoutes() != 0 {
				t.Fatalf("the rogue read %d messages (routes %d)", n, rogue.NumRoutes())
			}

			// Node 1 said at info which peer it routed to, never the rogue,
			// and says at warn when the peer is gone.
			eventually(t, "node 1 logs the route to n2", 20*time.Second, func() bool {
				return logHas(logs.String(), "level=INFO", "route to cluster peer established", "peer=n2", "addr=127.0.0.1")
			})
			if logHas(logs.String(), "established", "peer=rogue") {
				t.Fatalf("the refused rogue was logged as a peer:\n%s", logs)
			}
			nodes[1].Shutdown()
			eventually(t, "node 1 logs the route to n2 lost", 20*time.Second, func() bool {
				return logHas(logs.String(), "level=WARN", "route to cluster peer lost", "peer=n2")
			})
		})
	}
}

func TestClusterListenerNeedsAuth(t *testing.T) {
	c := testNATS(t)
	c.Cluster = config.NATSClusterConfig{Name: "x", Listen: "127.0.0.1:-1", Routes: []string{"nats-route://127.0.0.1:1"}}
	_, err := StartEmbedded(c, EmbeddedOptions{}, nil)
	if err == nil || !strings.Contains(err.Error(), "nats.cluster.user") {
		t.Fatalf("cluster listener without credentials: %v, want a refusal naming nats.cluster.user", err)
	}
}

// logHas says one line of logs holds every one of parts.
func logHas(logs string, parts ...string) bool {
	for _, l := range strings.Split(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

func TestRouteChanges(t *testing.T) {
	for _, c := range []struct {
		prev, cur map[string]string
		up, down  []string
	}{
		{nil, nil, nil, nil},
		{nil, map[string]string{"n2": "a", "n3": "b"}, []string{"n2", "n3"}, nil},
		{map[string]string{"n2": "a", "n3": "b"}, map[string]string{"n3": "c"}, nil, []string{"n2"}},
		{map[string]string{"n3": "b"}, map[string]string{"n2": "a", "n3": "c"}, []string{"n2"}, nil},
		{map[string]string{"n2": "a"}, map[string]string{}, nil, []string{"n2"}},
	} {
		up, down := routeChanges(c.prev, c.cur)
		if !slices.Equal(up, c.up) || !slices.Equal(down, c.down) {
			t.Errorf("routeChanges(%v, %v) = %v %v, want %v %v", c.prev, c.cur, up, down, c.up, c.down)
		}
	}
}
