package agent

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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
	path := filepath.Join(dir, AgentIDFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id, cerr := model.CheckAgentID(strings.TrimSpace(string(b)))
		if cerr != nil {
			return "", fmt.Errorf("agent id file %s: %w (remove it to have a new id generated)", path, cerr)
		}
		return id, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("read agent id: %w", err)
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("generate agent id: %w", err)
	}
	id := "02" + hex.EncodeToString(raw[:])
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("write agent id: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write agent id: %w", err)
	}
	return id, nil
}
