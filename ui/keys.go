package ui

import (
	"fmt"
	"sort"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// KeyMap holds every binding of the console, one per action name (the names
// of config.ConsoleActions, which [console.keys] overrides).
type KeyMap struct {
	Quit, Help, Back                             key.Binding
	Up, Down, PageUp, PageDown, Top, Bottom      key.Binding
	Open, Filter, Select, SelectAll, ClearSel    key.Binding
	Op, New, Edit, Reload, Tasks, Events         key.Binding
	FailedOnly, Retry, CancelTask, Confirm, Deny key.Binding
	Messages, FindHost, Palette, Sort            key.Binding
	SortReverse, FleetMap, Copy, Logs            key.Binding
	Rolling, PauseRoll, AbortRoll                key.Binding
	byName                                       map[string]*key.Binding
}

// DefaultKeyMap is the console's bindings before overrides.
func DefaultKeyMap() *KeyMap {
	b := func(help, desc string, keys ...string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
	}
	k := &KeyMap{
		Quit:        b("q", "quit", "q", "ctrl+c"),
		Help:        b("?", "help", "?"),
		Back:        b("esc", "back", "esc", "h", "left"),
		Up:          b("↑/k", "up", "up", "k"),
		Down:        b("↓/j", "down", "down", "j"),
		PageUp:      b("pgup", "page up", "pgup", "ctrl+u"),
		PageDown:    b("pgdn", "page down", "pgdown", "ctrl+d"),
		Top:         b("g", "top", "home", "g"),
		Bottom:      b("G", "bottom", "end", "G"),
		Open:        b("enter", "open", "enter", "right", "l"),
		Filter:      b("/", "filter", "/"),
		Select:      b("space", "select", " "),
		SelectAll:   b("a", "select all shown", "a"),
		ClearSel:    b("A", "clear selection", "A"),
		Op:          b("o", "operate", "o"),
		New:         b("n", "new process", "n"),
		Edit:        b("e", "edit process", "e"),
		Reload:      b("R", "refresh", "R", "ctrl+r"),
		Tasks:       b("t", "recent tasks", "t"),
		Events:      b("E", "host events", "E"),
		FleetMap:    b("M", "fleet map", "M"),
		FailedOnly:  b("f", "failed only", "f"),
		Retry:       b("r", "retry failed", "r"),
		CancelTask:  b("x", "cancel task", "x"),
		Confirm:     b("y", "yes", "y", "Y"),
		Deny:        b("n", "no", "n", "N", "esc"),
		Messages:    b("L", "message log", "L"),
		FindHost:    b("@", "open a host by IP", "@"),
		Palette:     b(":", "palette", ":"),
		Sort:        b("s", "sort", "s"),
		SortReverse: b("S", "reverse sort", "S"),
		Copy:        b("c", "copy (IP, task id, message)", "c"),
		Logs:        b("F", "follow logs", "F"),
		Rolling:     b("b", "roll in batches", "b"),
		PauseRoll:   b("p", "pause/resume roll", "p"),
		AbortRoll:   b("X", "abort roll", "X"),
	}
	k.byName = map[string]*key.Binding{
		"quit": &k.Quit, "help": &k.Help, "back": &k.Back, "up": &k.Up, "down": &k.Down,
		"page_up": &k.PageUp, "page_down": &k.PageDown, "top": &k.Top, "bottom": &k.Bottom,
		"open": &k.Open, "filter": &k.Filter, "select": &k.Select, "select_all": &k.SelectAll,
		"clear_selection": &k.ClearSel, "op": &k.Op, "new": &k.New, "edit": &k.Edit,
		"reload": &k.Reload, "tasks": &k.Tasks, "events": &k.Events, "fleet_map": &k.FleetMap, "failed_only": &k.FailedOnly,
		"retry": &k.Retry, "cancel_task": &k.CancelTask, "confirm": &k.Confirm, "deny": &k.Deny,
		"messages": &k.Messages, "find_host": &k.FindHost, "palette": &k.Palette,
		"sort": &k.Sort, "sort_reverse": &k.SortReverse, "copy": &k.Copy, "logs": &k.Logs,
		"rolling": &k.Rolling, "pause_roll": &k.PauseRoll, "abort_roll": &k.AbortRoll,
	}
	return k
}

// NewKeyMap applies overrides (action name -> keys) to the defaults. The
// help text of an overridden binding shows its first key. An unknown action
// is ignored (config.Load warns); a key given to two actions that can act
// on one screen comes back as a warning.
func NewKeyMap(overrides map[string][]string) (*KeyMap, []string, error) {
	k := DefaultKeyMap()
	var warnings []string
	names := make([]string, 0, len(overrides))
	for action := range overrides {
		names = append(names, action)
	}
	sort.Strings(names)
	for _, action := range names {
		keys := overrides[action]
		b, ok := k.byName[action]
		if !ok {
			continue // config.Load warns about it, like every unknown key
		}
		if len(keys) == 0 {
			return nil, nil, fmt.Errorf("console.keys.%s: needs at least one key", action)
		}
		norm := make([]string, len(keys))
		for i, s := range keys {
			if s == "space" {
				s = " "
			}
			norm[i] = s
		}
		b.SetKeys(norm...)
		b.SetHelp(keys[0], b.Help().Desc)
	}
	return k, append(warnings, k.collisions()...), nil
}

// dialogActions answer a dialog, which takes keys before any screen: their
// keys may also be bound to a screen's action.
var dialogActions = map[string]bool{"confirm": true, "deny": true}

// rootActions are the console-wide actions in the order Model.key tries
// them: each acts before any screen sees the key, so of two actions
// bound to one key the root one wins, and of two root ones the earlier.
var rootActions = []string{"quit", "help", "back", "find_host", "messages", "tasks", "events", "fleet_map", "palette", "copy"}

// collisionWinner says which of two actions bound to one key acts, as
// the console's key handling decides it ("" when it depends on the screen:
// two actions of screens).
func collisionWinner(a, b string) string {
	for _, r := range rootActions {
		if r == a || r == b {
			return r
		}
	}
	return ""
}

// collisions lists keys bound to two actions, naming the one that acts.
func (k *KeyMap) collisions() []string {
	names := make([]string, 0, len(k.byName))
	for n := range k.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	owner := map[string]string{}
	var out []string
	for _, n := range names {
		for _, key := range k.byName[n].Keys() {
			slot := key
			if dialogActions[n] {
				slot = "dialog " + key
			}
			if o, ok := owner[slot]; ok {
				if w := collisionWinner(o, n); w != "" {
					out = append(out, fmt.Sprintf("console.keys: %q is bound to both %s and %s; %s wins", key, o, n, w))
				} else {
					out = append(out, fmt.Sprintf("console.keys: %q is bound to both %s and %s; on a screen with both, only one acts", key, o, n))
				}
				continue
			}
			owner[slot] = n
		}
	}
	return out
}

// nav are the movement bindings shared by every list.
func (k *KeyMap) nav() []key.Binding {
	return []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom}
}

// keyHelp is a page's own bindings: the short help line and the full help's groups.
type keyHelp struct {
	short []binding
	full  [][]binding
}

// printable reports whether a key would type text into an input.
func printable(msg tea.KeyMsg) bool {
	return msg.Type == tea.KeyRunes || msg.Type == tea.KeySpace
}

// editKey reports whether a text input uses msg (typing, moving in the
// text, deleting): such keys never mean back (h, ←) while one has the focus.
func editKey(msg tea.KeyMsg) bool {
	switch msg.Type {
	case tea.KeyLeft, tea.KeyRight, tea.KeyHome, tea.KeyEnd, tea.KeyBackspace, tea.KeyDelete:
		return true
	}
	return printable(msg)
}

// keyIs reports whether msg is one of b's keys.
func keyIs(msg fmt.Stringer, b key.Binding) bool { return key.Matches(msg, b) }

// binding is a key binding.
type binding = key.Binding
