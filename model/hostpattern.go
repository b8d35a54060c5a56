package model

import (
	"fmt"
	"strconv"
	"strings"
)

// HostPattern is a set of agent identities one credential may serve: one
// host ("cloud:ip") or every host of one cloud area ("cloud:*").
type HostPattern struct {
	CloudID int
	IP      string // "" matches every IP of the cloud area
}

// ParseHostPattern parses "cloud:ip" (the IP in canonical form, see
// ParseAgentID) or "cloud:*".
func ParseHostPattern(s string) (HostPattern, error) {
	c, ip, ok := strings.Cut(strings.TrimSpace(s), ":")
	if ok && ip == "*" {
		cloud, err := strconv.Atoi(c)
		if err != nil || cloud < 0 {
			return HostPattern{}, fmt.Errorf("host pattern %q: cloud %q is not a non-negative number", s, c)
		}
		return HostPattern{CloudID: cloud}, nil
	}
	h, err := ParseAgentID(s)
	if err != nil {
		return HostPattern{}, fmt.Errorf("host pattern %q: want cloud:ip or cloud:*: %w", s, err)
	}
	return HostPattern{CloudID: h.CloudID, IP: h.IP}, nil
}

// Match reports whether h is in the set.
func (p HostPattern) Match(h Host) bool {
	return p.CloudID == h.CloudID && (p.IP == "" || p.IP == h.IP)
}

func (p HostPattern) String() string {
	if p.IP == "" {
		return strconv.Itoa(p.CloudID) + ":*"
	}
	return strconv.Itoa(p.CloudID) + ":" + p.IP
}
