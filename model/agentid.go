package model

import (
	"fmt"
	"strings"
)

// GSE 2.0 addresses agents by agent id (agent_id_list, bk_agent_id): an
// opaque id the agent holds, hex digits such as
// "020000000242010a00002f17521298676503". Every gseproc agent has one,
// generated once and kept in its data dir (simulated agents derive theirs
// from their host), and reports it in its heartbeats (HostInfo.AgentID).
// Wherever a request may name a host as "cloud:ip" it may name it by agent
// id instead; the server's wire package tells the two apart.

// Agent id limits: GSE documents ids of up to 64 characters; ours are 34.
const (
	MinAgentIDLen = 16
	MaxAgentIDLen = 64
)

// CheckAgentID returns the canonical (lower-case) form of an agent id: 16
// to 64 hex digits. The error says what is wrong without echoing a long
// input.
func CheckAgentID(s string) (string, error) {
	if len(s) < MinAgentIDLen || len(s) > MaxAgentIDLen {
		return "", fmt.Errorf("agent id %s: %d characters, want %d to %d hex digits", clip(s), len(s), MinAgentIDLen, MaxAgentIDLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return "", fmt.Errorf("agent id %s: character %d is not a hex digit", clip(s), i+1)
		}
	}
	return strings.ToLower(s), nil
}
