// Package transporttest holds what the tests of transport and of the parts
// wired on it share. It imports nothing of gseproc, so transport's own
// tests can use it without an import cycle.
package transporttest

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"slices"
	"strconv"
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
	frozen bool          // Freeze: nothing is carried
	thawed *sync.Cond    // on mu: frozen or closed changed
	delay  time.Duration // DelayJetStream
	only   []string      // DelayJetStreamOn: the subject prefixes delayed (none: all of JetStream's)
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
	r.thawed = sync.NewCond(&r.mu)
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

// Freeze stops carrying bytes either way on every connection, without
// closing any (as a NATS server stopped with SIGSTOP, or a link that drops
// everything): the client's PINGs go unanswered and its writes pile up.
// Freeze(false) carries on with what was held.
func (r *Relay) Freeze(on bool) {
	r.mu.Lock()
	r.frozen = on
	r.mu.Unlock()
	r.thawed.Broadcast()
}

// DelayJetStream makes the connections accepted from now on hold each
// client message to JetStream (a publish to a $JS. or $KV. subject: API
// requests, KV writes, acks) for d before passing it on, in order, while
// everything else (PING, subscriptions, other publishes) passes at once:
// a JetStream slow to answer on a NATS that is not.
func (r *Relay) DelayJetStream(d time.Duration) {
	r.DelayJetStreamOn(d)
}

// DelayJetStreamOn is DelayJetStream for the client messages to JetStream
// whose subject begins with one of prefixes only (e.g. "$KV.b." for the
// writes to bucket b); the others pass at once. No prefix: every one.
func (r *Relay) DelayJetStreamOn(d time.Duration, prefixes ...string) {
	r.mu.Lock()
	r.delay, r.only = d, prefixes
	r.mu.Unlock()
}

// hold waits while the relay is frozen; false once it is closed.
func (r *Relay) hold() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.frozen && !r.closed {
		r.thawed.Wait()
	}
	return !r.closed
}

// pipe carries src to dst until either ends, held while frozen.
func (r *Relay) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !r.hold() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// delayedPipe carries the client's protocol (src) to the server (dst) a
// message at a time, holding those to JetStream for d (DelayJetStream).
func (r *Relay) delayedPipe(dst, src net.Conn, d time.Duration, only []string) {
	type held struct {
		due time.Time
		msg []byte
	}
	var wmu sync.Mutex // one message written at a time
	write := func(b []byte) error {
		if !r.hold() {
			return io.EOF
		}
		wmu.Lock()
		defer wmu.Unlock()
		_, err := dst.Write(b)
		return err
	}
	queue := make(chan held, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for h := range queue {
			time.Sleep(time.Until(h.due))
			if write(h.msg) != nil {
				dst.Close()
				for range queue {
				}
				return
			}
		}
	}()
	defer func() {
		close(queue)
		<-done
	}()
	br := bufio.NewReader(src)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return
		}
		msg, toJS := line, false
		f := bytes.Fields(line)
		if len(f) >= 3 && (bytes.EqualFold(f[0], []byte("PUB")) || bytes.EqualFold(f[0], []byte("HPUB"))) {
			size, err := strconv.Atoi(string(f[len(f)-1]))
			if err != nil || size < 0 {
				return
			}
			payload := make([]byte, size+2)
			if _, err := io.ReadFull(br, payload); err != nil {
				return
			}
			msg = append(append([]byte(nil), line...), payload...)
			toJS = bytes.HasPrefix(f[1], []byte("$JS.")) || bytes.HasPrefix(f[1], []byte("$KV."))
			if toJS && len(only) > 0 {
				toJS = slices.ContainsFunc(only, func(p string) bool { return bytes.HasPrefix(f[1], []byte(p)) })
			}
		}
		if toJS {
			queue <- held{time.Now().Add(d), msg}
			continue
		}
		if write(msg) != nil {
			return
		}
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
		delay, only := r.delay, r.only
		r.mu.Unlock()
		pipe := func(dst, src net.Conn, carry func(dst, src net.Conn)) {
			defer r.wg.Done()
			carry(dst, src)
			c.Close()
			s.Close()
		}
		up := r.pipe
		if delay > 0 {
			up = func(dst, src net.Conn) { r.delayedPipe(dst, src, delay, only) }
		}
		r.wg.Add(2)
		go pipe(s, c, up)
		go pipe(c, s, r.pipe)
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
	r.thawed.Broadcast()
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
