package transporttest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
)

// ReservePorts are n distinct ports on 127.0.0.1, each free when chosen,
// for a test whose config must name its ports before anything listens
// (a cluster's routes, a server restarted where its agents look for it,
// an agent started before its server).
//
// They are taken below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), never from a listen on port 0
// closed again: the kernel hands ephemeral ports to every port-0 listener
// and every outgoing connection on the machine, so one of those (another
// test's client, say) could take such a port between the check and the
// test's own bind. Below the range only an explicit bind can take it:
// another test picking the same port, which the random start and this
// process's own record make unlikely, and which fails loudly (a bind
// error) rather than silently.
func ReservePorts(t testing.TB, n int) []int {
	t.Helper()
	lo, hi := portSpan()
	ports, err := reservePorts(n, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// reserved records the ports this process has handed out, so two calls
// (two tests of one package) never name the same one.
var reserved = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// reservePorts picks n ports in [lo, hi), from a random place on.
func reservePorts(n, lo, hi int) ([]int, error) {
	reserved.Lock()
	defer reserved.Unlock()
	var out []int
	next := lo + rand.IntN(hi-lo)
	for tries := 0; len(out) < n; tries++ {
		if tries == hi-lo {
			return nil, fmt.Errorf("reserve %d ports: only %d free in %d-%d", n, len(out), lo, hi-1)
		}
		p := next
		next++
		if next == hi {
			next = lo
		}
		if reserved.ports[p] || !freeNow(p) {
			continue
		}
		reserved.ports[p] = true
		out = append(out, p)
	}
	return out, nil
}

// portSpan is the span [lo, hi) ports are picked from: up to 10,000 ports
// just below the ephemeral range's start (32768 on Linux by default), and
// never below 1024. Where the range cannot be read, Linux's default is
// assumed.
func portSpan() (lo, hi int) {
	a, z := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if _, err := fmt.Sscan(string(b), &a, &z); err != nil {
			a, z = 32768, 60999
		}
	}
	return spanOutside(a, z)
}

// spanOutside is portSpan for the ephemeral range [a, z]: below it, or,
// where fewer than 100 ports lie between 1024 and its start, above its
// end; where neither has room (a range over nearly every port), 20000-29999,
// inside it: a port there is checked free, no more.
func spanOutside(a, z int) (lo, hi int) {
	switch {
	case a-1024 >= 100:
		return max(1024, a-10000), a
	case 65535-z >= 100:
		return z + 1, min(65536, z+1+10000)
	}
	return 20000, 30000
}

// freeNow tells whether nothing listens on 127.0.0.1:p, by listening.
func freeNow(p int) bool {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}
