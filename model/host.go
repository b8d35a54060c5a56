package model

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Host addresses one agent: an IP inside a cloud area (bk_cloud_id).
// (The v1 API's bk_supplier_id is a detail of that API: the server's wire
// package parses it and stores it with the task, not here.)
//
// Host is the wire form and may hold anything a client sent. Every
// entrance (API forms, native API, CLI, console, configuration, agent
// flags, agent messages) turns it into its canonical form with
// Canonicalize or Canonical before it is stored or used; NATS
// subjects and store keys are built only from a HostID, which only the
// canonical form yields.
type Host struct {
	IP      string `json:"ip"`
	CloudID int    `json:"bk_cloud_id"`
}

// Host identity limits. An IP is at most 39 characters in canonical form
// (8 groups of 4 hex digits); anything much longer is refused before it is
// parsed. Cloud ids are 31-bit, as the CMDB keeps them.
const (
	MaxIPText  = 64
	MaxCloudID = 1<<31 - 1
)

// AgentID is the agent's identity "cloud:ip", as nodeman builds it when
// dynamic addressing is off.
func (h Host) AgentID() string {
	var buf [24 + MaxIPText]byte
	return string(h.AppendAgentID(buf[:0]))
}

// AppendAgentID appends the agent id (AgentID) to b: for the texts made
// of one (OpID) without a string of it made first.
func (h Host) AppendAgentID(b []byte) []byte {
	b = strconv.AppendInt(b, int64(h.CloudID), 10)
	b = append(b, ':')
	return append(b, h.IP...)
}

func (h Host) String() string { return h.AgentID() }

// ParseIP parses an IP address into its canonical text: an IPv4-mapped
// IPv6 address becomes IPv4, IPv6 is lower-cased and compressed (RFC
// 5952). A zone ("fe80::1%eth0"), surrounding blanks and text longer than
// MaxIPText are refused; the error says why without echoing a long input.
func ParseIP(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, errors.New("required")
	}
	if len(s) > MaxIPText {
		return netip.Addr{}, fmt.Errorf("%d characters: an IP address has at most %d", len(s), MaxIPText)
	}
	if i := strings.IndexByte(s, '%'); i >= 0 {
		return netip.Addr{}, fmt.Errorf("%s: an IPv6 zone (%%...) names an interface of one machine, not a host: refused", clip(s))
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%s is not an IP address", clip(s))
	}
	return a.Unmap(), nil
}

// clip quotes s for a message, shortened to 64 bytes.
func clip(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return strconv.Quote(s)
}

// Canonical returns h in canonical form (IP as ParseIP spells it), or an
// error naming the offending part.
func (h Host) Canonical() (Host, error) {
	a, err := h.addr()
	if err != nil {
		return Host{}, err
	}
	h.IP = a.String()
	return h, nil
}

// addr is h's address, parsed once, when h has a canonical form (its
// cloud id in range); the error names the field.
func (h Host) addr() (netip.Addr, error) {
	a, err := ParseIP(h.IP)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ip: %w", err)
	}
	if h.CloudID < 0 || h.CloudID > MaxCloudID {
		return netip.Addr{}, fmt.Errorf("bk_cloud_id: %d is out of range [0,%d]", h.CloudID, MaxCloudID)
	}
	return a, nil
}

// Canonicalize returns h in canonical form and records in v, under field,
// every part that is wrong (field.ip, field.bk_cloud_id, ...); the zero
// Host when something is.
func (h Host) Canonicalize(v *Validator, field string) Host {
	ok := true
	a, err := ParseIP(h.IP)
	if err != nil {
		v.Add(field+".ip", err.Error())
		ok = false
	}
	if h.CloudID < 0 || h.CloudID > MaxCloudID {
		v.Addf(field+".bk_cloud_id", "%d is out of range [0,%d]", h.CloudID, MaxCloudID)
		ok = false
	}
	if !ok {
		return Host{}
	}
	h.IP = a.String()
	return h
}

// Validate checks that h has a canonical form; field is the path used in
// messages. Entrances use Canonicalize, which also returns it.
func (h Host) Validate(v *Validator, field string) { h.Canonicalize(v, field) }

// CanonicalHosts canonicalizes every host of hs (errors under
// "field[i]"), returning a new slice; duplicates are kept.
func CanonicalHosts(v *Validator, field string, hs []Host) []Host {
	if hs == nil {
		return nil
	}
	out := make([]Host, len(hs))
	for i, h := range hs {
		out[i] = h.Canonicalize(v, fmt.Sprintf("%s[%d]", field, i))
	}
	return out
}

// MaxAgentIDText bounds an agent id's text before it is parsed.
const MaxAgentIDText = 128

// ParseAgentID parses "cloud:ip" (the IP may be v6, so only the first
// colon splits) into the canonical host.
func ParseAgentID(s string) (Host, error) {
	if len(s) > MaxAgentIDText {
		return Host{}, fmt.Errorf("host %s: %d characters, more than %d", clip(s), len(s), MaxAgentIDText)
	}
	c, ip, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return Host{}, fmt.Errorf("host %q: want cloud:ip, e.g. 0:10.0.0.1", s)
	}
	cloud, err := strconv.Atoi(c)
	if err != nil || cloud < 0 || cloud > MaxCloudID {
		return Host{}, fmt.Errorf("host %q: cloud %q is not a number in [0,%d]", s, c, MaxCloudID)
	}
	a, err := ParseIP(ip)
	if err != nil {
		return Host{}, fmt.Errorf("host %q: ip %w", s, err)
	}
	return Host{IP: a.String(), CloudID: cloud}, nil
}

// HostID is one host's identity in canonical form. Only Host.ID and
// ParseHostID make one, so whatever is built from it (NATS subjects, store
// keys) is canonical and bounded in length: its String is at most
// MaxHostIDText characters. The zero HostID is invalid.
//
// Today an identity is a cloud id and an IP. A GSE 2.0 agent id is to be
// added as another form of HostID (its own parse rule in ParseHostID, its
// own spelling in String); code outside model only uses String and Host.
type HostID struct {
	cloud int
	ip    netip.Addr
}

// MaxHostIDText is the longest HostID.String: 10 digits, ':', 39 characters of IPv6.
const MaxHostIDText = 10 + 1 + 39

// ID returns h's identity, or why it has none.
func (h Host) ID() (HostID, error) {
	a, err := h.addr()
	if err != nil {
		return HostID{}, fmt.Errorf("host %s: %w", clip(h.AgentID()), err)
	}
	return HostID{cloud: h.CloudID, ip: a}, nil
}

// ParseHostID parses an identity "cloud:ip".
func ParseHostID(s string) (HostID, error) {
	h, err := ParseAgentID(s)
	if err != nil {
		return HostID{}, err
	}
	return h.ID()
}

// Valid reports whether id was made by Host.ID or ParseHostID.
func (id HostID) Valid() bool { return id.ip.IsValid() }

// Host is the identity as a (bare, canonical) Host.
func (id HostID) Host() Host { return Host{IP: id.ip.String(), CloudID: id.cloud} }

// Order is the identity's place in the host ordering: its host's
// (Host.Order), without parsing the address again.
func (id HostID) Order() HostOrder { return HostOrder{cloud: id.cloud, addr: id.ip} }

// Cloud is the identity's cloud id.
func (id HostID) Cloud() int { return id.cloud }

// Addr is the identity's IP.
func (id HostID) Addr() netip.Addr { return id.ip }

// String spells the identity "cloud:ip" (Host.AgentID of the canonical host).
func (id HostID) String() string { return id.Host().AgentID() }

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

// HostOrder is a host's place in gseproc's one host ordering, computed
// once to sort many: cloud area, then the address compared as an address
// (10.0.0.2 before 10.0.0.10, IPv4 before IPv6), then, for a text that is
// no address, the text after every address.
type HostOrder struct {
	cloud int
	addr  netip.Addr
	text  string
}

// Order is h's place in the host ordering.
func (h Host) Order() HostOrder {
	o := HostOrder{cloud: h.CloudID}
	if a, err := netip.ParseAddr(h.IP); err == nil {
		o.addr = a.Unmap()
	} else {
		o.text = h.IP
	}
	return o
}

// Compare orders a before b (-1), with it (0) or after it (+1).
func (a HostOrder) Compare(b HostOrder) int {
	if a.cloud != b.cloud {
		return cmp.Compare(a.cloud, b.cloud)
	}
	if av, bv := a.addr.IsValid(), b.addr.IsValid(); av != bv {
		if av {
			return -1
		}
		return 1
	}
	if c := a.addr.Compare(b.addr); c != 0 {
		return c
	}
	return cmp.Compare(a.text, b.text)
}

// CompareHosts orders two hosts (see HostOrder).
func CompareHosts(a, b Host) int { return a.Order().Compare(b.Order()) }
