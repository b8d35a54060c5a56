package model

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Host addresses one agent: an IP inside a cloud area (bk_cloud_id); the
// supplier id is carried for the v1 result keys.
type Host struct {
	IP         string `json:"ip"`
	CloudID    int    `json:"bk_cloud_id"`
	SupplierID int    `json:"bk_supplier_id,omitempty"`
}

// AgentID is the agent's identity "cloud:ip", as nodeman builds it when
// dynamic addressing is off.
func (h Host) AgentID() string { return strconv.Itoa(h.CloudID) + ":" + h.IP }

func (h Host) String() string { return h.AgentID() }

// Bare is the host without its supplier id: the agent's identity, which
// AgentID spells and map keys and comparisons use (a request may carry a
// bk_supplier_id, an agent's own report does not).
func (h Host) Bare() Host { return Host{IP: h.IP, CloudID: h.CloudID} }

// ParseAgentID parses "cloud:ip" (the IP may be v6, so only the first colon splits).
func ParseAgentID(s string) (Host, error) {
	c, ip, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return Host{}, fmt.Errorf("host %q: want cloud:ip, e.g. 0:10.0.0.1", s)
	}
	cloud, err := strconv.Atoi(c)
	if err != nil || cloud < 0 {
		return Host{}, fmt.Errorf("host %q: cloud %q is not a non-negative number", s, c)
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return Host{}, fmt.Errorf("host %q: ip %q does not parse", s, ip)
	}
	return Host{IP: addr.String(), CloudID: cloud}, nil
}

// Validate checks the IP and cloud id; field is the path used in messages.
func (h Host) Validate(v *Validator, field string) {
	if h.IP == "" {
		v.Add(field+".ip", "required")
	} else if _, err := netip.ParseAddr(h.IP); err != nil {
		v.Add(field+".ip", fmt.Sprintf("%q is not an IP address", h.IP))
	}
	if h.CloudID < 0 {
		v.Add(field+".bk_cloud_id", "must be >= 0")
	}
	if h.SupplierID < 0 {
		v.Add(field+".bk_supplier_id", "must be >= 0")
	}
}

// AgentState is what the server knows of an agent.
type AgentState string

// Agent states.
const (
	AgentOnline   AgentState = "online"
	AgentOffline  AgentState = "offline" // heartbeats stopped; its processes are "last known"
	AgentUnknown  AgentState = "unknown" // never heard from
	AgentDegraded AgentState = "degraded"
)

// HostInfo is a host of the fleet with its labels and agent state.
type HostInfo struct {
	Host     Host              `json:"host"`
	Labels   map[string]string `json:"labels,omitempty"`
	State    AgentState        `json:"agent_state"`
	LastSeen int64             `json:"last_seen,omitempty"` // unix seconds
	Version  string            `json:"agent_version,omitempty"`
	// AgentID is the agent's GSE 2.0 agent id (see CheckAgentID); empty
	// for an agent that has not reported one.
	AgentID string `json:"bk_agent_id,omitempty"`
}
