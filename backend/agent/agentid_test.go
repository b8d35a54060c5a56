//go:build linux

package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gseproc/model"
)

// TestAgentIDKept: an agent's id is generated once, kept in its data dir
// across restarts, reported in its identity, and a damaged id file stops the
// agent instead of changing its identity.
func TestAgentIDKept(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "")
	id := a.Identity().AgentID
	if got, err := model.CheckAgentID(id); err != nil || got != id || len(id) != 34 {
		t.Fatalf("agent id %q: %v", id, err)
	}
	again, err := loadAgentID(a.cfg.DataDir)
	if err != nil || again != id {
		t.Fatalf("reloaded id %q (%v), want %q", again, err, id)
	}
	other, err := loadAgentID(t.TempDir())
	if err != nil || other == id {
		t.Fatalf("a second data dir got id %q (%v): want a new one", other, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, AgentIDFile), []byte("not-an-id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadAgentID(dir); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Fatalf("damaged id file: %v, want an error saying what to do", err)
	}
}
