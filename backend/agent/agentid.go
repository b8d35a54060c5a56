package agent

import (
	"crypto/rand"
	"encoding/hex"
	"path/filepath"

	"gseproc/backend/kept"
	"gseproc/model"
)

// AgentIDFile holds the agent's GSE 2.0 agent id in its data dir.
const AgentIDFile = "agent_id"

// loadAgentID returns the agent id kept in dir, generating and keeping one
// the first time: "02" and 32 random hex digits, 34 characters like GSE's
// ids. The id outlives restarts and reinstalls that keep the data dir; a
// file that does not hold a valid id is an error, not replaced, so an agent
// never silently changes identity.
func loadAgentID(dir string) (string, error) {
	return kept.ID(filepath.Join(dir, AgentIDFile), "agent id", model.CheckAgentID, func() (string, error) {
		var raw [16]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return "", err
		}
		return "02" + hex.EncodeToString(raw[:]), nil
	})
}
