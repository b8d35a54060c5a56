package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// ConsoleConfig is the [console] section: how the terminal console looks
// and which safety nets it puts in front of operations. For example:
//
//	[console]
//	theme = "dark"                  # dark, light, ansi16 (terminal palette), mono
//	read_only = false               # true: only status runs, no editing
//	protected_namespaces = ["db"]   # stop/kill/unregister here: type the namespace
//	confirm_threshold = 10          # ... over this many hosts: type the host count
//	mouse = false                   # true: mouse wheel scrolls (terminal copy is lost)
//	recent_tasks = 50               # tasks on the recent-tasks screen (t)
//
//	[console.keys]                  # override keys by action name (ConsoleActions)
//	quit = ["q", "ctrl+c"]
//	op = ["o", "ctrl+o"]
type ConsoleConfig struct {
	// Theme is one of dark, light, ansi16 (the terminal's own 16 colours)
	// or mono (no colour at all). NO_COLOR and --no-color force mono.
	Theme string `toml:"theme"`
	// Keys overrides key bindings by action name, e.g. quit = ["q", "ctrl+c"].
	// ConsoleActions lists the names.
	Keys map[string][]string `toml:"keys"`
	// ReadOnly disables every op that changes something (status still runs)
	// and the process editor.
	ReadOnly bool `toml:"read_only"`
	// ProtectedNamespaces: every op that changes something (all but
	// status) in these namespaces requires typing the namespace to confirm.
	ProtectedNamespaces []string `toml:"protected_namespaces"`
	// ConfirmThreshold: every op that changes something over more hosts
	// than this requires typing the host count to confirm. 0 means always.
	ConfirmThreshold int `toml:"confirm_threshold"`
	// Mouse turns mouse support on (off by default so the terminal's own
	// selection and copy keep working).
	Mouse bool `toml:"mouse"`
	// RecentTasks is how many tasks the recent-tasks screen lists.
	RecentTasks int `toml:"recent_tasks"`
}

// ConsoleThemes lists the valid theme names.
func ConsoleThemes() []string { return []string{"dark", "light", "ansi16", "mono"} }

// ConsoleActions lists the action names whose keys can be overridden in
// [console.keys]. The console binds every one of them.
func ConsoleActions() []string {
	return []string{
		"quit", "help", "back", "up", "down", "page_up", "page_down", "top", "bottom",
		"open", "filter", "select", "select_all", "clear_selection", "op", "new", "edit",
		"reload", "tasks", "events", "failed_only", "retry", "cancel_task", "confirm", "deny", "messages", "find_host", "palette", "sort", "sort_reverse", "fleet_map", "copy", "logs",
		"rolling", "pause_roll", "abort_roll",
	}
}

func defaultConsole() ConsoleConfig {
	return ConsoleConfig{Theme: "dark", ConfirmThreshold: 10, RecentTasks: 50}
}

// Validate checks the section alone (the console calls it from ui.New).
func (c ConsoleConfig) Validate() error { return c.validate() }

func (c ConsoleConfig) validate() error {
	var errs []error
	if !slices.Contains(ConsoleThemes(), c.Theme) {
		errs = append(errs, fmt.Errorf("console.theme: %q is not one of %s", c.Theme, strings.Join(ConsoleThemes(), ", ")))
	}
	if c.ConfirmThreshold < 0 {
		errs = append(errs, fmt.Errorf("console.confirm_threshold: %d must be >= 0", c.ConfirmThreshold))
	}
	if c.RecentTasks < 1 || c.RecentTasks > 10000 {
		errs = append(errs, fmt.Errorf("console.recent_tasks: %d is out of range [1,10000]", c.RecentTasks))
	}
	for i, ns := range c.ProtectedNamespaces {
		if strings.TrimSpace(ns) == "" {
			errs = append(errs, fmt.Errorf("console.protected_namespaces[%d]: must not be blank", i))
		}
	}
	actions := ConsoleActions()
	names := make([]string, 0, len(c.Keys))
	for a := range c.Keys {
		names = append(names, a)
	}
	sort.Strings(names)
	for _, a := range names {
		if !slices.Contains(actions, a) {
			continue // a warning, like every unknown key (keyWarnings)
		}
		if len(c.Keys[a]) == 0 {
			errs = append(errs, fmt.Errorf("console.keys.%s: needs at least one key", a))
		}
		for j, k := range c.Keys[a] {
			if strings.TrimSpace(k) == "" {
				errs = append(errs, fmt.Errorf("console.keys.%s[%d]: must not be blank", a, j))
			}
		}
	}
	return errors.Join(errs...)
}

// keyWarnings names the [console.keys] actions that do not exist: they are
// ignored, like every unknown key.
func (c ConsoleConfig) keyWarnings(path string) []string {
	var out []string
	for _, a := range slices.Sorted(maps.Keys(c.Keys)) {
		if !slices.Contains(ConsoleActions(), a) {
			out = append(out, fmt.Sprintf("config %s: console.keys.%s: unknown action ignored; the actions are %s", path, a, strings.Join(ConsoleActions(), ", ")))
		}
	}
	return out
}

// Protected reports whether ns is a protected namespace.
func (c ConsoleConfig) Protected(ns string) bool { return slices.Contains(c.ProtectedNamespaces, ns) }
