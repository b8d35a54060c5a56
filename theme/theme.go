// Package theme holds the console's lipgloss styles. Screens ask for
// semantic styles (OK, Warn, Error, Pending, Danger, Muted ...), never for
// colours, so every theme (dark, light, ansi16, mono) reads the same.
// State is never shown by colour alone: screens pair every style with a
// glyph and a word.
package theme

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// Theme is a set of semantic styles bound to one lipgloss renderer.
type Theme struct {
	Name string

	Base       lipgloss.Style // plain text
	Muted      lipgloss.Style // secondary text, hints
	Title      lipgloss.Style // screen titles, the breadcrumb's last part
	Breadcrumb lipgloss.Style // the breadcrumb's other parts
	Header     lipgloss.Style // table headers
	Cursor     lipgloss.Style // the row under the cursor
	Selected   lipgloss.Style // selected (marked) rows

	OK      lipgloss.Style // success, online, running
	Warn    lipgloss.Style // degraded, timeout, cancelled
	Error   lipgloss.Style // failed, offline, fatal
	Pending lipgloss.Style // pending, running task items, starting
	Danger  lipgloss.Style // destructive choices

	StatusBar lipgloss.Style // the status bar background
	StatusKey lipgloss.Style // status bar labels (mode, read-only)
	HelpKey   lipgloss.Style // keys in help
	HelpDesc  lipgloss.Style // descriptions in help
	HelpSep   lipgloss.Style // separators in help

	Dialog      lipgloss.Style // the confirmation box
	DialogTitle lipgloss.Style

	// ProgressFull and ProgressEmpty colour the progress bar ("" = none).
	ProgressFull  string
	ProgressEmpty string
	// Profile is the colour profile the progress bar renders with.
	Profile termenv.Profile
}

// Names lists the themes.
func Names() []string { return []string{"dark", "light", "ansi16", "mono"} }

type palette struct {
	fg, muted, accent, accent2, ok, warn, err, pending, danger, barBg, barFg, selBg, cursorBg string
}

func darkPalette() palette {
	return palette{
		fg: "#D0D0D0", muted: "#7A7A7A", accent: "#7AA2F7", accent2: "#BB9AF7", ok: "#9ECE6A",
		warn: "#E0AF68", err: "#F7768E", pending: "#7DCFFF", danger: "#FF5F5F",
		barBg: "#24283B", barFg: "#C0CAF5", selBg: "#2E3C64", cursorBg: "#3B4261",
	}
}

func lightPalette() palette {
	return palette{
		fg: "#1F2328", muted: "#6E7781", accent: "#0550AE", accent2: "#8250DF", ok: "#1A7F37",
		warn: "#9A6700", err: "#CF222E", pending: "#0969DA", danger: "#A40E26",
		barBg: "#D0D7DE", barFg: "#1F2328", selBg: "#DDF4FF", cursorBg: "#B6E3FF",
	}
}

// ansiPalette names ANSI colours 0-15 only, so it follows whatever palette
// the terminal is set to.
func ansiPalette() palette {
	return palette{
		fg: "", muted: "8", accent: "4", accent2: "5", ok: "2", warn: "3", err: "1", pending: "6",
		danger: "9", barBg: "0", barFg: "7", selBg: "", cursorBg: "",
	}
}

// New builds the named theme on renderer r (lipgloss.DefaultRenderer() when
// nil). noColor forces mono, for NO_COLOR and --no-color.
func New(name string, r *lipgloss.Renderer, noColor bool) (*Theme, error) {
	if r == nil {
		r = lipgloss.DefaultRenderer()
	}
	if noColor {
		name = "mono"
	}
	switch name {
	case "dark":
		return colored(name, r, darkPalette()), nil
	case "light":
		return colored(name, r, lightPalette()), nil
	case "ansi16":
		t := colored(name, r, ansiPalette())
		// Without background colours of its own, the cursor is reversed.
		t.Cursor = r.NewStyle().Reverse(true)
		t.Selected = r.NewStyle().Bold(true).Foreground(lipgloss.Color("3"))
		if t.Profile < termenv.ANSI { // TrueColor < ANSI256 < ANSI < Ascii
			t.Profile = termenv.ANSI
		}
		return t, nil
	case "mono", "":
		return mono(r), nil
	}
	return nil, fmt.Errorf("theme %q: want one of %s", name, strings.Join(Names(), ", "))
}

func colored(name string, r *lipgloss.Renderer, p palette) *Theme {
	c := func(s string) lipgloss.TerminalColor {
		if s == "" {
			return lipgloss.NoColor{}
		}
		return lipgloss.Color(s)
	}
	s := r.NewStyle
	return &Theme{
		Name:          name,
		Base:          s().Foreground(c(p.fg)),
		Muted:         s().Foreground(c(p.muted)),
		Title:         s().Bold(true).Foreground(c(p.accent)),
		Breadcrumb:    s().Foreground(c(p.accent2)),
		Header:        s().Bold(true).Foreground(c(p.muted)).Underline(true),
		Cursor:        s().Background(c(p.cursorBg)).Bold(true),
		Selected:      s().Background(c(p.selBg)).Foreground(c(p.warn)),
		OK:            s().Foreground(c(p.ok)),
		Warn:          s().Foreground(c(p.warn)),
		Error:         s().Foreground(c(p.err)).Bold(true),
		Pending:       s().Foreground(c(p.pending)),
		Danger:        s().Foreground(c(p.danger)).Bold(true),
		StatusBar:     s().Background(c(p.barBg)).Foreground(c(p.barFg)),
		StatusKey:     s().Background(c(p.barBg)).Foreground(c(p.accent)).Bold(true),
		HelpKey:       s().Foreground(c(p.accent)),
		HelpDesc:      s().Foreground(c(p.muted)),
		HelpSep:       s().Foreground(c(p.muted)),
		Dialog:        s().Border(lipgloss.RoundedBorder()).BorderForeground(c(p.danger)).Padding(0, 1),
		DialogTitle:   s().Bold(true).Foreground(c(p.danger)),
		ProgressFull:  p.ok,
		ProgressEmpty: p.muted,
		Profile:       r.ColorProfile(),
	}
}

// mono uses attributes only (bold, underline, reverse, faint): no colour.
func mono(r *lipgloss.Renderer) *Theme {
	s := r.NewStyle
	return &Theme{
		Name:        "mono",
		Base:        s(),
		Muted:       s().Faint(true),
		Title:       s().Bold(true),
		Breadcrumb:  s(),
		Header:      s().Bold(true).Underline(true),
		Cursor:      s().Reverse(true),
		Selected:    s().Bold(true),
		OK:          s(),
		Warn:        s().Bold(true),
		Error:       s().Bold(true),
		Pending:     s(),
		Danger:      s().Bold(true).Underline(true),
		StatusBar:   s().Reverse(true),
		StatusKey:   s().Reverse(true).Bold(true),
		HelpKey:     s().Bold(true),
		HelpDesc:    s(),
		HelpSep:     s().Faint(true),
		Dialog:      s().Border(lipgloss.NormalBorder()).Padding(0, 1),
		DialogTitle: s().Bold(true),
		Profile:     termenv.Ascii,
	}
}
