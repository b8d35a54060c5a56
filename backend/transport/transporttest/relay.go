// Package transporttest holds what the tests of transport and of the parts
// wired on it share. It imports nothing of gseproc, so transport's own
// tests can use it without an import cycle.
package transporttest

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// Relay is a TCP relay on 127.0.0.1 to the NATS server it points at; with
// none, connections are closed at once. It lets a test cut a client off
// NATS and decide when (and to which server) it can come back.
type Relay struct {
	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	to     string
	conns  map[net.Conn]bool
	closed bool
}

// NewRelay starts a relay pointed at the server at url ("" for none),
// closed when the test ends.
func NewRelay(t testing.TB, url string) *Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{ln: ln, conns: map[net.Conn]bool{}}
	r.Point(url)
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.close)
	return r
}

// URL is the relay's own address, for the client to connect to.
func (r *Relay) URL() string { return "nats://" + r.ln.Addr().String() }

// Point sends new connections to the server at url ("" for none).
func (r *Relay) Point(url string) {
	r.mu.Lock()
	r.to = strings.TrimPrefix(url, "nats://")
	r.mu.Unlock()
}

// Cut closes the connections the relay carries now.
func (r *Relay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		c.Close()
		delete(r.conns, c)
	}
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		to := r.to
		r.mu.Unlock()
		if to == "" {
			c.Close()
			continue
		}
		s, err := net.DialTimeout("tcp", to, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		r.conns[c], r.conns[s] = true, true
		r.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			defer r.wg.Done()
			_, _ = io.Copy(dst, src)
			c.Close()
			s.Close()
		}
		r.wg.Add(2)
		go pipe(s, c)
		go pipe(c, s)
	}
}

func (r *Relay) close() {
	r.ln.Close()
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// LogBuf is a log destination (a slog handler's writer) the test can read
// while the code under test writes.
type LogBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *LogBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *LogBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// ReservePorts are n ports on 127.0.0.1 nobody listened on a moment ago
// (for a config that must name its ports before anything listens).
func ReservePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	}
	return ports
}
