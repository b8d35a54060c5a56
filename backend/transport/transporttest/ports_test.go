package transporttest

import (
	"net"
	"strconv"
	"testing"
)

// TestReservePorts: the ports are distinct, below the ephemeral range (so
// no port-0 listener or outgoing connection can be given one), free, and
// never handed out twice in one process.
func TestReservePorts(t *testing.T) {
	lo, hi := portSpan()
	seen := map[int]bool{}
	for range 5 {
		for _, p := range ReservePorts(t, 4) {
			if p < lo || p >= hi {
				t.Fatalf("port %d outside %d-%d", p, lo, hi-1)
			}
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
		}
	}
	p := ReservePorts(t, 1)[0]
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Fatalf("a reserved port is not free: %v", err)
	}
	ln.Close()
}

// TestReservePortsSkipsTaken: in a span where some ports are listened on,
// only the free ones are handed out, each once, and asking for more than
// are left is an error, not a port in use.
func TestReservePortsSkipsTaken(t *testing.T) {
	lo, _ := portSpan()
	span := ReservePorts(t, 1)[0] // a free place to start the span from
	lo = max(lo, span-10)
	hi := lo + 20
	taken := map[int]bool{}
	for p := lo; p < hi; p += 2 {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			taken[p] = true // someone else's: taken all the same
			continue
		}
		defer ln.Close()
		taken[p] = true
	}
	got, err := reservePorts(5, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range got {
		if taken[p] {
			t.Fatalf("port %d is listened on, yet handed out", p)
		}
	}
	if _, err := reservePorts(20, lo, hi); err == nil {
		t.Fatal("20 ports out of a span of 20 with 10 taken: no error")
	}
}

// TestSpanOutside: the span is below the ephemeral range, or above it when
// the range starts too low to leave room below.
func TestSpanOutside(t *testing.T) {
	for _, tc := range []struct{ a, z, lo, hi int }{
		{32768, 60999, 22768, 32768}, // Linux's default
		{5000, 65000, 1024, 5000},
		{1024, 60999, 61000, 65536}, // a range from 1024: above it
		{1100, 50000, 50001, 60001},
		{1024, 65535, 20000, 30000}, // no room either side
	} {
		if lo, hi := spanOutside(tc.a, tc.z); lo != tc.lo || hi != tc.hi {
			t.Errorf("range %d-%d: span %d-%d, want %d-%d", tc.a, tc.z, lo, hi, tc.lo, tc.hi)
		}
	}
}
