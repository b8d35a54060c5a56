package simulator

import (
	"encoding/binary"
	"fmt"
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
	return fmt.Sprintf("02%016x%016x", mix(hAgentID, c, hi, lo), mix(hAgentID, lo, hi, c))
}
