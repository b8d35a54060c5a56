package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loadTOML writes body to a config file and loads it.
func loadTOML(t *testing.T, body string) (Config, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(p)
}

// sectionCase is one file loaded for a section test: wantErr is a
// substring the error must contain ("" = valid), check judges the section.
type sectionCase[T any] struct {
	name    string
	toml    string
	wantErr string
	check   func(T) bool
}

// testSection loads each case and checks the section picked by section.
func testSection[T any](t *testing.T, tests []sectionCase[T], section func(Config) T) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadTOML(t, tc.toml)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want it to name %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := section(cfg); !tc.check(got) {
				t.Fatalf("section %+v", got)
			}
		})
	}
}
