package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"gseproc/backend"
	"gseproc/model"
)

// dialog is the confirmation layer: it takes keys before any page. Its
// answer defaults to No (enter, esc and n all say no). A dangerous one asks
// the operator to type the namespace or the host count. Keys that arrive
// within the guard period after it opened are dropped, so keys typed before
// the dialog appeared never answer it.
type dialog struct {
	title   string
	body    []string
	danger  bool
	require string // text to type ("" = a y/N question)
	why     string // why typing is required
	input   textinput.Model
	opened  time.Time
	onYes   tea.Cmd
	errText string
	ignored int // keys dropped by the guard (tests read it)
}

func newDialog(title string, body []string, require, why string, danger bool, onYes tea.Cmd) *dialog {
	d := &dialog{title: title, body: body, danger: danger, require: require, why: why, onYes: onYes}
	if require != "" {
		d.input = textinput.New()
		d.input.Prompt = "> "
		d.input.CharLimit = 256
		d.input.Width = 30
		d.input.Focus()
	}
	return d
}

// update handles one key; done reports the dialog closed, with cmd the
// action to run on yes (nil on no).
func (d *dialog) update(s *shared, msg tea.KeyMsg) (done bool, cmd tea.Cmd) {
	if s.now().Before(d.opened.Add(s.guard)) {
		d.ignored++
		return false, nil
	}
	k := s.keys
	if d.require == "" {
		switch {
		case keyIs(msg, k.Confirm):
			return true, d.onYes
		case keyIs(msg, k.Deny), msg.Type == tea.KeyEnter, msg.Type == tea.KeyEsc:
			return true, nil
		}
		return false, nil
	}
	switch msg.Type {
	case tea.KeyEsc:
		return true, nil
	case tea.KeyEnter:
		if strings.TrimSpace(d.input.Value()) == d.require {
			return true, d.onYes
		}
		if d.input.Value() == "" {
			return true, nil // an empty answer is No
		}
		d.errText = fmt.Sprintf("%q does not match; type %s or press esc", d.input.Value(), d.require)
		return false, nil
	}
	d.errText = ""
	var c tea.Cmd
	d.input, c = d.input.Update(msg)
	_ = c // the cursor blink is not needed in a modal
	return false, nil
}

// view draws the dialog within w x h (its frame always whole: on a small
// screen the blank lines go, then the body's last lines).
func (d *dialog) view(s *shared, w, h int) string {
	body, gap := d.body, "\n"
	for {
		box := d.render(s, w, body, gap)
		if lipgloss.Height(box) <= h-2 || (gap == "" && len(body) == 0) {
			return box
		}
		switch {
		case gap != "":
			gap = ""
		default:
			body = body[:len(body)-1]
		}
	}
}

func (d *dialog) render(s *shared, w int, body []string, gap string) string {
	t := s.theme
	width := min(max(w-12, 30), 68)
	var b strings.Builder
	title := t.DialogTitle.Render(d.title)
	if d.danger {
		title = t.Danger.Render("⚠ " + d.title)
	}
	b.WriteString(title + "\n" + gap)
	for _, l := range body {
		b.WriteString(l + "\n")
	}
	if len(body) < len(d.body) {
		b.WriteString(t.Muted.Render("…") + "\n")
	}
	b.WriteString(gap)
	if d.require == "" {
		b.WriteString(t.Base.Render("Proceed? ") + t.Title.Render("[y/N]") + t.Muted.Render("  y yes · n/enter/esc no (default)"))
	} else {
		b.WriteString(t.Warn.Render(d.why) + "\n")
		b.WriteString(fmt.Sprintf("Type %s to confirm, esc to cancel:\n", t.Title.Render(d.require)))
		b.WriteString(d.input.View())
		if d.errText != "" {
			b.WriteString("\n" + t.Error.Render(d.errText))
		}
	}
	box := t.Dialog.Width(width).Render(b.String())
	return box
}

// overlay draws box centred over bg (both w x h cells at most) with a
// one-cell blank margin, keeping the rest of the background visible.
func overlay(bg, box string, w, h int) string { return overlayAt(bg, box, w, h, -1) }

// overlayAt draws box over bg from line y (centred when y < 0).
func overlayAt(bg, box string, w, h, y int) string {
	bgLines := strings.Split(fit(bg, w, h), "\n")
	boxLines := strings.Split(box, "\n")
	bw := lipgloss.Width(box)
	// The margin is part of the box: a blank line above and below, a blank
	// cell left and right.
	blank := strings.Repeat(" ", bw)
	framed := append([]string{blank}, boxLines...)
	framed = append(framed, blank)
	bw += 2
	x := max((w-bw)/2, 0)
	if y < 0 {
		y = max((h-len(framed))/2, 0)
	}
	for i, bl := range framed {
		r := y + i
		if r >= len(bgLines) {
			break
		}
		line := bgLines[r]
		left := ansi.Truncate(line, x, "")
		if lw := ansi.StringWidth(left); lw < x {
			left += strings.Repeat(" ", x-lw)
		}
		if strings.Contains(left, "\x1b[") {
			left += "\x1b[0m" // the box starts unstyled
		}
		right := ""
		if ansi.StringWidth(line) > x+bw {
			right = ansi.TruncateLeft(line, x+bw, "")
		}
		bgLines[r] = left + " " + bl + " " + right
	}
	return strings.Join(bgLines, "\n")
}

// confirmOp builds the confirmation of an operation over a target: a y/N
// question, or for any op that changes something over confirm_threshold
// hosts or in a protected namespace, the namespace or host count to type
// (a restart of 50,000 hosts is as dangerous as a stop).
func confirmOp(s *shared, op model.OpType, tg target, onYes tea.Cmd) *dialog {
	body := []string{
		fmt.Sprintf("%s %s", s.theme.Title.Render(op.String()), s.theme.Muted.Render("— "+op.Describe())),
		"on " + tg.summary(),
	}
	require, why := "", ""
	if op.Mutating() {
		protected := ""
		for _, ns := range tg.namespaces() {
			if s.cfg.Protected(ns) {
				protected = ns
				break
			}
		}
		switch {
		case protected != "":
			require = protected
			why = fmt.Sprintf("%s is a protected namespace.", protected)
		case tg.hostCount() > s.cfg.ConfirmThreshold:
			require = fmt.Sprint(tg.hostCount())
			why = fmt.Sprintf("This is a %s on more than %s.", op, plural(s.cfg.ConfirmThreshold, "host"))
		}
	}
	return newDialog("Confirm "+op.String(), body, require, why, op.Destructive(), onYes)
}

// target is what an operation acts on: a selector and what is known of it.
type target struct {
	sel    backend.Selector
	hosts  int      // hosts shown as targeted (selected, or all matching)
	procs  []string // process names, when known
	nsAll  []string // namespaces, when more than the selector's
	cursor bool     // nothing was selected: the target is the host under the cursor
}

// namedHosts is how many hosts a summary names one by one.
const namedHosts = 3

func (tg target) hostCount() int { return tg.hosts }

func (tg target) namespaces() []string {
	if len(tg.nsAll) > 0 {
		return tg.nsAll
	}
	if tg.sel.Namespace != "" {
		return []string{tg.sel.Namespace}
	}
	return nil
}

func (tg target) summary() string {
	hs := plural(tg.hosts, "host")
	if n := len(tg.sel.Hosts); n > 0 && n <= namedHosts && n == tg.hosts {
		ids := make([]string, n)
		for i, h := range tg.sel.Hosts {
			ids[i] = h.AgentID()
		}
		hs = "host " + strings.Join(ids, ", ")
		if n > 1 {
			hs = "hosts " + strings.Join(ids, ", ")
		}
	}
	if tg.cursor {
		hs += " (under the cursor: nothing is selected)"
	}
	parts := []string{hs}
	if ns := tg.namespaces(); len(ns) > 0 {
		parts = append(parts, "namespace "+strings.Join(ns, ", "))
	}
	if tg.sel.Name != "" {
		parts = append(parts, "process "+tg.sel.Name)
	} else if len(tg.procs) > 0 {
		p := tg.procs
		more := ""
		if len(p) > 4 {
			p, more = p[:4], fmt.Sprintf(" +%d", len(tg.procs)-4)
		}
		parts = append(parts, "processes "+strings.Join(p, ", ")+more)
	}
	if len(tg.sel.Labels) > 0 {
		parts = append(parts, "labels "+strings.Join(model.SortedLabels(tg.sel.Labels), ","))
	}
	return strings.Join(parts, " · ")
}
