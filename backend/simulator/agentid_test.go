package simulator

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"gseproc/model"
)

// TestAgentIDSameAsSprintf: the hand-written hex is the documented format.
func TestAgentIDSameAsSprintf(t *testing.T) {
	for _, h := range []model.Host{{IP: "10.0.0.1"}, {IP: "fe80::1", CloudID: 7}, {IP: "x"}, {IP: "255.255.255.255", CloudID: 1 << 30}} {
		var hi, lo uint64
		if a, err := netip.ParseAddr(h.IP); err == nil {
			b := a.As16()
			hi, lo = binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
		}
		c := uint64(h.CloudID)
		want := fmt.Sprintf("02%016x%016x", mix(hAgentID, c, hi, lo), mix(hAgentID, lo, hi, c))
		if got := AgentID(h); got != want {
			t.Fatalf("%v: %s want %s", h, got, want)
		}
	}
}
