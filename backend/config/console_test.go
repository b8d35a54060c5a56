package config

import (
	"strings"
	"testing"
)

func TestConsoleSection(t *testing.T) {
	tests := []struct {
		name    string
		toml    string
		wantErr []string // substrings, each naming a field
		check   func(t *testing.T, c ConsoleConfig)
	}{
		{name: "defaults", toml: "", check: func(t *testing.T, c ConsoleConfig) {
			if c.Theme != "dark" || c.ConfirmThreshold != 10 || c.RecentTasks != 50 || c.Mouse || c.ReadOnly {
				t.Fatalf("defaults %+v", c)
			}
		}},
		{name: "all fields", toml: `[console]
theme = "ansi16"
read_only = true
protected_namespaces = ["db", "gse"]
confirm_threshold = 3
mouse = true
recent_tasks = 20
[console.keys]
quit = ["Q", "ctrl+c"]
select = ["space", "x"]
`, check: func(t *testing.T, c ConsoleConfig) {
			if c.Theme != "ansi16" || !c.ReadOnly || c.ConfirmThreshold != 3 || !c.Mouse || c.RecentTasks != 20 {
				t.Fatalf("%+v", c)
			}
			if !c.Protected("db") || c.Protected("web") {
				t.Fatal("protected namespaces")
			}
			if strings.Join(c.Keys["quit"], ",") != "Q,ctrl+c" {
				t.Fatalf("keys %v", c.Keys)
			}
		}},
		{name: "bad values", toml: `[console]
theme = "neon"
confirm_threshold = -1
recent_tasks = 0
protected_namespaces = [" "]
[console.keys]
quit = []
`, wantErr: []string{`console.theme: "neon"`, "console.confirm_threshold", "console.recent_tasks",
			"console.protected_namespaces[0]", "console.keys.quit: needs at least one key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadTOML(t, tt.toml)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, cfg.Console)
		})
	}
}

func TestConsoleUnknownKeyWarns(t *testing.T) {
	cfg, err := loadTOML(t, "[console]\ncolour = \"red\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], "console.colour") {
		t.Fatalf("warnings %v", cfg.Warnings)
	}
}

// An unknown [console.keys] action is a warning like every unknown key,
// not an error that stops the console.
func TestUnknownKeyActionWarns(t *testing.T) {
	cfg, err := loadTOML(t, "[console.keys]\nexplode = [\"x\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], "console.keys.explode: unknown action ignored") {
		t.Fatalf("warnings %q", cfg.Warnings)
	}
}
