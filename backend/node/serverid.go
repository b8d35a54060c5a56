package node

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gseproc/backend/config"
)

// ServerIDFile holds a server's id in nats.store_dir, beside the state it
// owns, so that a restarted server is the same server.
const ServerIDFile = "server-id"

// ServerID is the id the server holds task leases under: engine.server_id,
// else the one kept in nats.store_dir (made on first use), else "" (the
// engine makes one per start).
func ServerID(cfg config.Config) (string, error) {
	if cfg.Engine.ServerID != "" {
		return cfg.Engine.ServerID, nil
	}
	if cfg.NATS.StoreDir == "" {
		return "", nil
	}
	path := filepath.Join(cfg.NATS.StoreDir, ServerIDFile)
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if !config.ValidServerID(id) {
			return "", fmt.Errorf("server id in %s: %q must be 1-64 of A-Z a-z 0-9 . _ - (delete the file for a new one)", path, id)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("server id: %w", err)
	}
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if config.ValidServerID(string(r)) {
			return r
		}
		return '-'
	}, host)
	r := make([]byte, 6)
	_, _ = rand.Read(r)
	id := strings.TrimLeft(host+"-"+hex.EncodeToString(r), "-")
	if len(id) > 64 {
		id = id[len(id)-64:]
	}
	if err := os.MkdirAll(cfg.NATS.StoreDir, 0o755); err != nil {
		return "", fmt.Errorf("server id: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("server id: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("server id: %w", err)
	}
	return id, nil
}
