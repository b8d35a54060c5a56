// Package sshtest drives real SSH sessions for tests: a client key pair,
// and an interactive session with a pty whose screen output is collected
// and into which keys are typed (golang.org/x/crypto/ssh).
package sshtest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

// Wait is how long Term.Wait and Until wait for a condition: wide, as a
// pass returns as soon as it holds (30 s was missed once at load 30-40).
const Wait = 90 * time.Second

// NewKey makes an ed25519 key pair: the client's signer and the public
// key as an authorized-keys line (without options).
func NewKey(t testing.TB) (gossh.Signer, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sg, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return sg, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(sg.PublicKey())))
}

// Until polls cond until it holds, failing the test after Wait.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", Wait, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Dial connects with sg. The host key is remembered in *hostKey on first
// use, and a different one is refused after.
func Dial(addr string, sg gossh.Signer, hostKey *gossh.PublicKey) (*gossh.Client, error) {
	return gossh.Dial("tcp", addr, &gossh.ClientConfig{
		User: "anyone",
		Auth: []gossh.AuthMethod{gossh.PublicKeys(sg)},
		HostKeyCallback: func(_ string, _ net.Addr, k gossh.PublicKey) error {
			if *hostKey != nil && !bytes.Equal((*hostKey).Marshal(), k.Marshal()) {
				return errors.New("host key changed")
			}
			*hostKey = k
			return nil
		},
		Timeout: 20 * time.Second,
	})
}

// Term is one interactive session with a pty.
type Term struct {
	Sess  *gossh.Session
	Ended chan error // receives the session's end
	in    io.WriteCloser
	out   *buffer
}

// Open starts a shell session of w x h cells (TERM=dumb: no colours).
func Open(t testing.TB, addr string, sg gossh.Signer, hostKey *gossh.PublicKey, w, h int) *Term {
	t.Helper()
	c, err := Dial(addr, sg, hostKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out := &buffer{}
	s.Stdout, s.Stderr = out, out
	in, err := s.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RequestPty("dumb", h, w, gossh.TerminalModes{gossh.ECHO: 0}); err != nil {
		t.Fatal(err)
	}
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	tm := &Term{Sess: s, in: in, out: out, Ended: make(chan error, 1)}
	t.Cleanup(func() {
		if t.Failed() {
			o := out.String()
			t.Logf("screen output (last 3000 bytes):\n%q", o[max(0, len(o)-3000):])
		}
	})
	go func() { tm.Ended <- s.Wait() }()
	return tm
}

// Output is everything the session printed so far.
func (tm *Term) Output() string { return tm.out.String() }

// Wait waits until every text has been printed at or after offset from.
func (tm *Term) Wait(t testing.TB, from int, texts ...string) {
	t.Helper()
	Until(t, fmt.Sprintf("%q on the screen", texts), func() bool {
		o := tm.out.String()[from:]
		for _, x := range texts {
			if !strings.Contains(o, x) {
				return false
			}
		}
		return true
	})
}

// Keys types keys one by one, as a person types.
func (tm *Term) Keys(t testing.TB, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, err := io.WriteString(tm.in, k); err != nil {
			t.Fatalf("key %q: %v", k, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Press types key until text is printed after it (a page that is still
// loading ignores action keys), at most for Wait. It types again only
// after 5 s without the text, so a slow frame on a loaded machine does
// not get the key twice; a key that must not repeat (enter on a dialog's
// opener) goes through Keys and Wait instead.
func (tm *Term) Press(t testing.TB, key, text string) {
	t.Helper()
	Until(t, fmt.Sprintf("%q after %q", text, key), func() bool {
		n := len(tm.out.String())
		tm.Keys(t, key)
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if strings.Contains(tm.out.String()[n:], text) {
				return true
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false
	})
}

// buffer collects a session's output.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
