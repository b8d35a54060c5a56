package simulator

import (
	"encoding/binary"
	"net/netip"

	"gseproc/model"
)

// AgentID is a simulated host's GSE 2.0 agent id: "02" and 32 hex digits
// hashed from its cloud and IP, so a simulated host keeps its id across
// runs, seeds and fleet sizes, as a real agent keeps its id in its data dir.
func AgentID(h model.Host) string {
	var hi, lo uint64
	if a, err := netip.ParseAddr(h.IP); err == nil {
		b := a.As16()
		hi, lo = binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	}
	c := uint64(h.CloudID)
	// "02%016x%016x", written by hand: a listing of 100,000 hosts makes
	// one per host, and Sprintf was a tenth of the listing's time.
	const digits = "0123456789abcdef"
	var b [34]byte
	b[0], b[1] = '0', '2'
	for i, x := range [2]uint64{mix(hAgentID, c, hi, lo), mix(hAgentID, lo, hi, c)} {
		for j := 15; j >= 0; j-- {
			b[2+16*i+j] = digits[x&0xf]
			x >>= 4
		}
	}
	return string(b[:])
}
