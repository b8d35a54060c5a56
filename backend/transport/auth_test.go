package transport

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"gseproc/backend/config"
	"gseproc/model"
)

func TestNKeyAuth(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(t.TempDir(), "agent.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	otherFile := filepath.Join(t.TempDir(), "other.nk")
	_ = os.WriteFile(otherFile, otherSeed, 0o600)

	cfg := testNATS(t)
	cfg.Users = []config.NATSUser{{NKey: pub, Host: "0:10.0.0.1"}}
	e := startServer(t, cfg, false)
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	if _, err := ConnectNow(ClientOptions{URLs: e.ClientURL(), NKeySeedFile: otherFile}, nil); err == nil {
		t.Fatal("unknown nkey connected")
	}
	if _, err := Connect(ClientOptions{URLs: e.ClientURL(), NKeySeedFile: filepath.Join(t.TempDir(), "missing")}, nil); err == nil {
		t.Fatal("missing seed file accepted")
	}
	runAgent(t, e.ClientURL(), ClientOptions{NKeySeedFile: seedFile}, echoAgent(h1), ServeOptions{HeartbeatInterval: 50 * time.Millisecond})
	eventually(t, "online", 15*time.Second, func() bool { return hostState(d, h1) == model.AgentOnline })
}

// writeTLS writes a CA and a server certificate for 127.0.0.1 signed by it.
func writeTLS(t *testing.T) (ca, cert, key string) {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gseproc test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server.key", "EC PRIVATE KEY", keyDER)
}

func TestTLS(t *testing.T) {
	ca, cert, key := writeTLS(t)
	cfg := testNATS(t)
	cfg.TLS = config.NATSTLSConfig{Cert: cert, Key: key}
	e := startServer(t, cfg, true)
	if !strings.HasPrefix(e.ClientURL(), "tls://") {
		t.Fatalf("client URL %q, want tls://", e.ClientURL())
	}
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	if _, err := ConnectNow(ClientOptions{URLs: e.ClientURL()}, nil); err == nil {
		t.Fatal("connected without trusting the CA")
	}
	runAgent(t, e.ClientURL(), ClientOptions{TLS: config.NATSTLSConfig{CA: ca}}, echoAgent(h1), ServeOptions{HeartbeatInterval: 50 * time.Millisecond})
	eventually(t, "online over TLS", 15*time.Second, func() bool { return hostState(d, h1) == model.AgentOnline })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.Dispatch(ctx, h1, model.AgentRequest{Op: model.OpStatus}); err != nil {
		t.Fatal(err)
	}
}

func TestEventsForwarded(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	a := echoAgent(h1)
	runAgent(t, e.ClientURL(), ClientOptions{}, a, ServeOptions{HeartbeatInterval: 50 * time.Millisecond})
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	var mu sync.Mutex
	var got []model.Event
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	subscribeStored(ctx, d, func(e model.Event) {
		if e.Kind == model.EventLimitExceeded {
			mu.Lock()
			got = append(got, e)
			mu.Unlock()
		}
	})
	eventually(t, "online", 15*time.Second, func() bool { return hostState(d, h1) == model.AgentOnline })
	a.emit(model.Event{Time: time.Now(), Host: h1, ProcKey: "web:nginx", Kind: model.EventLimitExceeded, Message: "mem 93.1% > 80%", Value: 93.1})
	// An event naming another host than the agent's subject is dropped.
	a.emit(model.Event{Host: model.Host{IP: "10.6.6.6"}, ProcKey: "x:y", Kind: model.EventLimitExceeded})
	eventually(t, "event", 15*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= 1 })
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].Value != 93.1 || got[0].ProcKey != "web:nginx" || got[0].Host != h1 {
		t.Fatalf("events %+v", got)
	}
}
