package ui

import (
	"cmp"
	"encoding/binary"
	"net/netip"

	"gseproc/model"
)

// hostKey is a host in 8 bytes: for a host named by a plain IPv4
// address (its canonical text: netip parses no other spelling as IPv4)
// in a cloud area within model's limits, cloud<<32 | address, which
// orders as model.HostOrder does and gives the host back; for any other
// host (IPv6, a mapped address, a text), otherKey | its index among a
// hostTab's others.
type hostKey uint64

const otherKey hostKey = 1 << 63

// plainKey is h's key when h is a plain IPv4 host.
func plainKey(h model.Host) (hostKey, bool) {
	if h.CloudID < 0 || h.CloudID > model.MaxCloudID || len(h.IP) > len("255.255.255.255") {
		return 0, false
	}
	a, err := netip.ParseAddr(h.IP)
	if err != nil || !a.Is4() {
		return 0, false
	}
	b := a.As4()
	return hostKey(uint64(h.CloudID)<<32 | uint64(binary.BigEndian.Uint32(b[:]))), true
}

// plainHost is the host of a plain key.
func (k hostKey) plainHost() model.Host {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(k))
	return model.Host{IP: netip.AddrFrom4(b).String(), CloudID: int(k >> 32)}
}

// hostTab holds each host of a watch's results once, by a small id: the
// hosts of a task over 100,000 hosts as model.Hosts in a map, a slice
// and their model.HostOrders were ~14 MB of the console (and each kept
// the IP text the reply decoded); as keys they are ~4 MB.
type hostTab struct {
	ix     map[hostKey]uint32 // plain hosts' ids by key
	oix    map[model.Host]uint32
	keys   []hostKey // by id
	others []model.Host
	oords  []model.HostOrder // the others' places in the host order
}

// id is h's id, added when new.
func (t *hostTab) id(h model.Host) uint32 {
	k, plain := plainKey(h) // parsed once: find would parse it again
	i := uint32(len(t.keys))
	if plain {
		if j, ok := t.ix[k]; ok {
			return j
		}
		if t.ix == nil {
			t.ix = map[hostKey]uint32{}
		}
		t.ix[k] = i
	} else {
		if j, ok := t.oix[h]; ok {
			return j
		}
		if t.oix == nil {
			t.oix = map[model.Host]uint32{}
		}
		t.oix[h] = i
		k = otherKey | hostKey(len(t.others))
		t.others = append(t.others, h)
		t.oords = append(t.oords, h.Order())
	}
	t.keys = append(t.keys, k)
	return i
}

// find is h's id, if it has one.
func (t *hostTab) find(h model.Host) (uint32, bool) {
	if k, plain := plainKey(h); plain {
		i, ok := t.ix[k]
		return i, ok
	}
	i, ok := t.oix[h]
	return i, ok
}

// host is the host of id i.
func (t *hostTab) host(i uint32) model.Host {
	k := t.keys[i]
	if k&otherKey != 0 {
		return t.others[k&^otherKey]
	}
	return k.plainHost()
}

// compare orders the hosts of ids a and b as model.HostOrder does.
func (t *hostTab) compare(a, b uint32) int {
	ka, kb := t.keys[a], t.keys[b]
	switch {
	case ka&otherKey == 0 && kb&otherKey == 0:
		return cmp.Compare(ka, kb)
	case ka&otherKey != 0 && kb&otherKey != 0:
		return t.oords[ka&^otherKey].Compare(t.oords[kb&^otherKey])
	}
	ha, hb := t.host(a), t.host(b)
	if ha.CloudID != hb.CloudID {
		return cmp.Compare(ha.CloudID, hb.CloudID)
	}
	return ha.Order().Compare(hb.Order())
}

// len is the number of hosts held.
func (t *hostTab) len() int { return len(t.keys) }
