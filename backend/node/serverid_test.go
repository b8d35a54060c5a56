package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gseproc/backend/config"
)

func TestServerID(t *testing.T) {
	cfg := config.Default()
	if id, err := ServerID(cfg); err != nil || id != "" {
		t.Fatalf("no store dir: %q %v, want none (the engine makes one per start)", id, err)
	}
	cfg.NATS.StoreDir = filepath.Join(t.TempDir(), "js")
	id1, err := ServerID(cfg)
	if err != nil || !config.ValidServerID(id1) {
		t.Fatalf("first: %q %v", id1, err)
	}
	id2, err := ServerID(cfg)
	if err != nil || id2 != id1 {
		t.Fatalf("second start: %q %v, want the same %q", id2, err, id1)
	}
	other := cfg
	other.NATS.StoreDir = t.TempDir()
	if id3, _ := ServerID(other); id3 == id1 || id3 == "" {
		t.Fatalf("another store dir: %q, want another id than %q", id3, id1)
	}
	cfg.Engine.ServerID = "srv-a.1"
	if id, _ := ServerID(cfg); id != "srv-a.1" {
		t.Fatalf("engine.server_id: %q", id)
	}
	cfg.Engine.ServerID = ""
	if err := os.WriteFile(filepath.Join(cfg.NATS.StoreDir, ServerIDFile), []byte("bad id/..\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ServerID(cfg); err == nil || !strings.Contains(err.Error(), ServerIDFile) {
		t.Fatalf("bad file: %v", err)
	}
	bad := config.Default()
	bad.Engine.ServerID = "a b"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "engine.server_id") {
		t.Fatalf("validate: %v", err)
	}
}
