package node

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gseproc/backend/config"
	"gseproc/backend/kept"
)

// ServerIDFile holds a server's id in nats.store_dir, beside the state it
// owns, so that a restarted server is the same server.
const ServerIDFile = "server-id"

// ServerID is the id the server holds task leases under: engine.server_id,
// else the one kept in nats.store_dir (made on first use: the host name
// and 12 random hex digits), else "" (the engine makes one per start).
func ServerID(cfg config.Config) (string, error) {
	if cfg.Engine.ServerID != "" {
		return cfg.Engine.ServerID, nil
	}
	if cfg.NATS.StoreDir == "" {
		return "", nil
	}
	return kept.ID(filepath.Join(cfg.NATS.StoreDir, ServerIDFile), "server id", checkServerID, newServerID)
}

func checkServerID(id string) (string, error) {
	if !config.ValidServerID(id) {
		return "", fmt.Errorf("%q must be 1-64 of A-Z a-z 0-9 . _ -", id)
	}
	return id, nil
}

func newServerID() (string, error) {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if config.ValidServerID(string(r)) {
			return r
		}
		return '-'
	}, host)
	r := make([]byte, 6)
	if _, err := rand.Read(r); err != nil {
		return "", err
	}
	id := strings.TrimLeft(host+"-"+hex.EncodeToString(r), "-")
	if len(id) > 64 {
		id = id[len(id)-64:]
	}
	return id, nil
}
