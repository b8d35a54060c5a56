package jsstore

import (
	"time"

	"gseproc/model"
)

// hostTexts shares the host addresses of the registry's definitions: a
// host is listed by ~3.4 definitions of a fleet (the simulator's 22 over
// 100,000 hosts), and each decoded definition held its own copy of every
// address, in a host list grown by the decoder (a quarter of it slack):
// the index was 19.7 MB of the server's live heap after start-up at
// 100,000 hosts (bench fleet's heap profile, sampled), 10.1 MB with the
// addresses shared and the lists at their length
// (BenchmarkRegistryHostBytes: 151.5 -> 105.8 B a host).
//
// It is kept by the watch while deliveries come in (a snapshot, an apply
// of many definitions) and dropped when they stop (regIdle): a table kept
// for the store's life would cost about what it saves.
type hostTexts struct {
	ips map[string]string // an address -> its shared copy; nil: none kept
}

// Bounds of hostTexts: a host list shorter than internMin is packed but
// its addresses are not shared unless a table is kept already (a table
// of every host of the index is not made for a definition of a few
// hosts); at internMax addresses the table takes no more.
const (
	// regIdle is how long the watch keeps the table after a delivery: an
	// apply's definitions, saved one after the other, share one table.
	regIdle   = 2 * time.Second
	internMin = 64
	internMax = 1 << 20
)

// pack returns hs at its length with its addresses shared with those of
// defs (the index the definition goes into) and of the definitions packed
// before while the table was kept. hs is not modified.
func (t *hostTexts) pack(hs []model.Host, defs map[string]model.ProcessDef) []model.Host {
	if len(hs) == 0 {
		return hs // as decoded: null and [] stay apart
	}
	if t.ips == nil && len(hs) >= internMin {
		n := 0
		for _, d := range defs {
			n += len(d.Hosts)
		}
		t.ips = make(map[string]string, min(n+len(hs), internMax))
		for _, d := range defs {
			for _, h := range d.Hosts {
				t.share(h.IP)
			}
		}
	}
	out := make([]model.Host, len(hs))
	for i, h := range hs {
		if t.ips != nil {
			h.IP = t.share(h.IP)
		}
		out[i] = h
	}
	return out
}

// share is the kept copy of ip, ip itself kept when none was (and the
// table has room).
func (t *hostTexts) share(ip string) string {
	if s, ok := t.ips[ip]; ok {
		return s
	}
	if len(t.ips) < internMax {
		t.ips[ip] = ip
	}
	return ip
}

// drop forgets the table (its addresses stay with the definitions).
func (t *hostTexts) drop() { t.ips = nil }
