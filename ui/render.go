package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"gseproc/model"
	"gseproc/theme"
)

// A state is always drawn as a glyph and a word, coloured by its meaning,
// so it reads the same in mono and for colour-blind users.

type glyph struct {
	g, word string
	style   func(t *theme.Theme) lipgloss.Style
}

func (g glyph) text() string { return g.g + " " + g.word }

func styleOK(t *theme.Theme) lipgloss.Style      { return t.OK }
func styleWarn(t *theme.Theme) lipgloss.Style    { return t.Warn }
func styleErr(t *theme.Theme) lipgloss.Style     { return t.Error }
func stylePending(t *theme.Theme) lipgloss.Style { return t.Pending }
func styleMuted(t *theme.Theme) lipgloss.Style   { return t.Muted }

func resultGlyph(s model.ResultState) glyph {
	switch s {
	case model.StatePending:
		return glyph{"○", "pending", styleMuted}
	case model.StateRunning:
		return glyph{"◐", "running", stylePending}
	case model.StateSuccess:
		return glyph{"✓", "success", styleOK}
	case model.StateFailed:
		return glyph{"✗", "failed", styleErr}
	case model.StateTimeout:
		return glyph{"◷", "timeout", styleErr}
	case model.StateUnreachable:
		return glyph{"⊘", "unreachable", styleErr}
	case model.StateCancelled:
		return glyph{"–", "cancelled", styleWarn}
	case model.StateSkipped:
		return glyph{"»", "skipped", styleMuted}
	}
	return glyph{"?", string(s), styleMuted}
}

func agentGlyph(s model.AgentState) glyph {
	switch s {
	case model.AgentOnline:
		return glyph{"●", "online", styleOK}
	case model.AgentOffline:
		return glyph{"○", "offline", styleErr}
	case model.AgentDegraded:
		return glyph{"◑", "degraded", styleWarn}
	}
	return glyph{"?", "unknown", styleMuted}
}

func procGlyph(s model.ProcState) glyph {
	switch s {
	case model.ProcRunning:
		return glyph{"▶", "running", styleOK}
	case model.ProcStarting:
		return glyph{"◔", "starting", stylePending}
	case model.ProcStopping:
		return glyph{"◕", "stopping", stylePending}
	case model.ProcStopped:
		return glyph{"■", "stopped", styleMuted}
	case model.ProcBackoff:
		return glyph{"↻", "backoff", styleWarn}
	case model.ProcExited:
		return glyph{"□", "exited", styleWarn}
	case model.ProcFatal:
		return glyph{"✗", "fatal", styleErr}
	case "":
		return glyph{"·", "none", styleMuted}
	}
	return glyph{"?", "unknown", styleMuted}
}

func taskGlyph(s model.TaskStatus) glyph {
	switch s {
	case model.TaskPending:
		return glyph{"○", "pending", styleMuted}
	case model.TaskRunning:
		return glyph{"◐", "running", stylePending}
	case model.TaskDone:
		return glyph{"✓", "done", styleOK}
	case model.TaskFailed:
		return glyph{"✗", "failed", styleErr}
	case model.TaskCanceled:
		return glyph{"–", "cancelled", styleWarn}
	}
	return glyph{"?", string(s), styleMuted}
}

// column is one table column: a fixed width, or flexible (sharing what is
// left in proportion to grow, default 1). A column never shrinks below min
// (e.g. an IP), and an optional one is dropped before others shrink.
type column struct {
	title    string
	width    int
	flex     bool
	right    bool
	min      int
	grow     int
	optional bool
	// newest: the cell is a time of day (15:04:05) and the rows come
	// newest first; the column sorts by the rows' order, since the
	// text goes back to 00:00:00 at midnight.
	newest bool
}

// layout fixes column widths for a total width (one space between columns,
// two leading columns for the cursor and the selection mark).
func layout(cols []column, total int) []int {
	widths := make([]int, len(cols))
	used, weights := 2, 0
	for i, c := range cols {
		widths[i] = c.width
		used += c.width + 1
		if c.flex {
			weights += max(c.grow, 1)
		}
	}
	// Optional columns go first when the others do not fit.
	for i := len(cols) - 1; i >= 0 && used > total; i-- {
		if cols[i].optional && widths[i] > 0 {
			used -= widths[i] + 1
			widths[i] = 0
			if cols[i].flex {
				weights -= max(cols[i].grow, 1)
			}
		}
	}
	rest := total - used
	if rest > 0 && weights > 0 {
		given := 0
		last := -1
		for i, c := range cols {
			if c.flex && widths[i] > 0 {
				add := rest * max(c.grow, 1) / weights
				widths[i] += add
				given += add
				last = i
			}
		}
		if last >= 0 {
			widths[last] += rest - given
		}
		return widths
	}
	// Shrink flexible columns first, then the widest ones, down to their
	// minimum (at least 3).
	for rest < 0 {
		wi := -1
		for i, c := range cols {
			if widths[i] <= max(c.min, 3) {
				continue
			}
			if wi < 0 || (c.flex && !cols[wi].flex) || (c.flex == cols[wi].flex && widths[i] > widths[wi]) {
				wi = i
			}
		}
		if wi < 0 {
			break
		}
		widths[wi]--
		rest++
	}
	return widths
}

// cell truncates or pads s (plain text) to w cells.
func cell(s string, w int, right bool) string {
	if w <= 0 {
		return ""
	}
	sw := ansi.StringWidth(s)
	if sw > w {
		return ansi.Truncate(s, w, "…")
	}
	pad := padding(w - sw)
	if right {
		return pad + s
	}
	return s + pad
}

// spaces pads cells without making the padding (a frame pads every cell
// of every row drawn: an allocation each with strings.Repeat).
const spaces = "                                                                                                                                "

func padding(n int) string {
	if n <= len(spaces) {
		return spaces[:n]
	}
	return strings.Repeat(" ", n)
}

// row joins cells: mark is the two-cell prefix (cursor and selection).
func joinRow(mark string, cells []string) string {
	return mark + strings.Join(cells, " ")
}

func header(t *theme.Theme, cols []column, widths []int) string {
	cells := make([]string, len(cols))
	for i, c := range cols {
		cells[i] = cell(c.title, widths[i], c.right)
	}
	return t.Header.Render(joinRow("  ", cells))
}

// fit makes s exactly h lines of at most w cells.
func fit(s string, w, h int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		if ansi.StringWidth(l) > w {
			lines[i] = ansi.Truncate(l, w, "")
		}
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

// vlist is the cursor and scroll offset of a virtual list: only the rows in
// [offset, offset+height) are ever rendered.
type vlist struct {
	cursor, offset, height, n int
	first                     int // the page line of the first row drawn (set by View), for clicks
}

// click puts the cursor on the row drawn at page line y; false when no
// row is drawn there.
func (v *vlist) click(y int) bool {
	i := v.offset + y - v.first
	if y < v.first || i >= v.offset+v.height || i >= v.n {
		return false
	}
	v.cursor = i
	v.clamp()
	return true
}

// listed is a page with a list a click can move in.
type listed interface{ listPtr() *vlist }

func (v *vlist) setLen(n int) {
	v.n = n
	v.clamp()
}

func (v *vlist) setHeight(h int) {
	v.height = max(h, 1)
	v.clamp()
}

func (v *vlist) move(d int) {
	v.cursor += d
	v.clamp()
}

func (v *vlist) top()    { v.cursor = 0; v.clamp() }
func (v *vlist) bottom() { v.cursor = v.n - 1; v.clamp() }

func (v *vlist) clamp() {
	if v.cursor >= v.n {
		v.cursor = v.n - 1
	}
	if v.cursor < 0 {
		v.cursor = 0
	}
	if v.cursor < v.offset {
		v.offset = v.cursor
	}
	if v.height > 0 && v.cursor >= v.offset+v.height {
		v.offset = v.cursor - v.height + 1
	}
	if v.offset > max(v.n-v.height, 0) {
		v.offset = max(v.n-v.height, 0)
	}
	if v.offset < 0 {
		v.offset = 0
	}
}

// window returns the visible range [start, end).
func (v *vlist) window() (int, int) {
	return v.offset, min(v.offset+v.height, v.n)
}

// navigate applies the shared movement keys; it reports whether msg was one.
func (v *vlist) navigate(k *KeyMap, msg fmt.Stringer) bool {
	switch {
	case keyIs(msg, k.Up):
		v.move(-1)
	case keyIs(msg, k.Down):
		v.move(1)
	case keyIs(msg, k.PageUp):
		v.move(-max(v.height-1, 1))
	case keyIs(msg, k.PageDown):
		v.move(max(v.height-1, 1))
	case keyIs(msg, k.Top):
		v.top()
	case keyIs(msg, k.Bottom):
		v.bottom()
	default:
		return false
	}
	return true
}

// scrollInfo says where the window is, e.g. "1-20 of 10000".
func (v *vlist) scrollInfo() string {
	if v.n == 0 {
		return "0 of 0"
	}
	s, e := v.window()
	return fmt.Sprintf("%d-%d of %d", s+1, e, v.n)
}

// fmtDuration renders a duration compactly and deterministically.
func fmtDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// plural renders "1 host" / "3 hosts", "1 process" / "2 processes".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	if strings.HasSuffix(word, "s") {
		return fmt.Sprintf("%d %ses", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// renderRow draws one table row. The row under the cursor is drawn plain in
// the cursor style (so it stays visible in mono); other rows style their
// cells one by one (styles[i] nil = plain, or the selection style).
func renderRow(t *theme.Theme, cursor, selected bool, cells []string, styles []*lipgloss.Style) string {
	mark := " "
	if cursor {
		mark = "›"
	}
	sel := " "
	if selected {
		sel = "✓"
	}
	if cursor {
		return t.Cursor.Render(joinRow(mark+sel, cells))
	}
	out := make([]string, len(cells))
	for i, c := range cells {
		switch {
		case i < len(styles) && styles[i] != nil:
			out[i] = styles[i].Render(c)
		case selected:
			out[i] = t.Selected.Render(c)
		default:
			out[i] = c
		}
	}
	if selected {
		sel = t.Selected.Render(sel)
	}
	return mark + sel + strings.Join(out, " ")
}
