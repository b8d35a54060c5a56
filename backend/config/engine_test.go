package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEngineSection(t *testing.T) {
	tests := []struct {
		name    string
		toml    string
		wantErr string // substring; "" = valid
		check   func(EngineConfig) bool
	}{
		{"defaults", "", "", func(c EngineConfig) bool { return c == defaultEngine() }},
		{"values", "[engine]\nconcurrency = 16\nmax_targets = 50\ndeadline_slack = \"500ms\"\nkeep_tasks = 3\nkeep_events = 9\nread_only = true\n", "",
			func(c EngineConfig) bool {
				return c.Concurrency == 16 && c.MaxTargets == 50 && c.DeadlineSlack.D() == 500*time.Millisecond &&
					c.KeepTasks == 3 && c.KeepEvents == 9 && c.ReadOnly
			}},
		{"concurrency", "[engine]\nconcurrency = 0\n", "engine.concurrency", nil},
		{"max targets", "[engine]\nmax_targets = -1\n", "engine.max_targets", nil},
		{"slack", "[engine]\ndeadline_slack = \"-1s\"\n", "engine.deadline_slack", nil},
		{"slack syntax", "[engine]\ndeadline_slack = \"soon\"\n", "not a duration", nil},
		{"keep", "[engine]\nkeep_tasks = 0\nkeep_events = 0\n", "engine.keep_events", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "c.toml")
			if err := os.WriteFile(p, []byte(tc.toml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(p)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want it to name %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(cfg.Engine) {
				t.Fatalf("engine %+v", cfg.Engine)
			}
		})
	}
}
