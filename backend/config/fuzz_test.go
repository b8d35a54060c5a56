package config

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzConfig: any config file loads or is refused with an error; one that
// loads is valid, and an agent identity in it is canonical.
func FuzzConfig(f *testing.F) {
	example, err := os.ReadFile("../../config.example.toml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte("[agent]\nip = \"::ffff:10.0.0.1\"\ncloud_id = 1\n"))
	f.Add([]byte("[agent]\nip = \"fe80::1%eth0\"\n"))
	f.Add([]byte("[[nats.users]]\nuser = \"a\"\npassword = \"b\"\nhost = \"0:FE80::1\"\n"))
	f.Add([]byte("[server]\nmax_hosts = -1\n[[server.apps]]\ncode = \"x\"\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "config.toml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(path)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("loaded an invalid config: %v", err)
		}
		if cfg.Agent.IP != "" {
			h, err := cfg.Agent.Host()
			if err != nil {
				t.Fatalf("loaded agent ip %q without an identity: %v", cfg.Agent.IP, err)
			}
			if _, err := h.ID(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
