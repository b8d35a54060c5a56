package ui

import (
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"gseproc/model"
	"gseproc/theme"
)

// The message log keeps every error, warning and notice the console showed,
// with its time, so that nothing cut at the terminal's width is lost: the
// status bar and the error banner show the latest, L lists them all and
// enter opens one whole.

type logLevel int

const (
	levelNotice logLevel = iota
	levelWarning
	levelError
)

func (l logLevel) glyph() glyph {
	switch l {
	case levelError:
		return glyph{"✗", "error", styleErr}
	case levelWarning:
		return glyph{"▲", "warning", styleWarn}
	}
	return glyph{"•", "notice", styleMuted}
}

type logEntry struct {
	at    time.Time
	level logLevel
	what  string // what was being done ("list hosts"), "" for notices
	text  string // the whole message
}

// full is the entry's message with what was being done.
func (e logEntry) full() string {
	if e.what == "" {
		return e.text
	}
	return e.what + ": " + e.text
}

const maxLog = 1000

// addLog records one message (oldest dropped past maxLog) and returns it.
// Its text is made plain (model.PlainText): an error can quote a server's
// answer, or the fleet's words in it, drawn in the log, the banner and
// the status bar and copied with c.
func (s *shared) addLog(level logLevel, what, text string) logEntry {
	e := logEntry{at: s.now(), level: level, what: model.PlainText(what), text: model.PlainText(text)}
	s.log = append(s.log, e)
	s.logged++
	if n := len(s.log); n > maxLog {
		s.log = append([]logEntry(nil), s.log[n-maxLog:]...)
	}
	return e
}

// bannerLines is the most lines the error banner takes; longer errors end
// with a pointer to the message log.
const bannerLines = 4

// banner renders the latest error in full (wrapped to w) for the screen's
// foot, with how to dismiss it.
func banner(t *theme.Theme, e logEntry, k *KeyMap, w int) []string {
	text := "✗ " + e.at.Local().Format("15:04:05") + " " + e.full()
	lines := strings.Split(ansi.Wrap(oneLine(text), w, " ,/"), "\n")
	hint := fmt.Sprintf("%s dismisses · %s lists every message", k.Back.Help().Key, k.Messages.Help().Key)
	if len(lines) > bannerLines-1 {
		lines = lines[:bannerLines-1]
		hint = "(cut) " + hint
	}
	out := make([]string, 0, len(lines)+1)
	for _, l := range lines {
		out = append(out, t.Error.Render(l))
	}
	return append(out, t.Muted.Render(ansi.Truncate(hint, w, "…")))
}

// ---- the message log page ------------------------------------------------

type messagesPage struct {
	tableList
	seen int // s.logged when tb was last rebuilt
}

func newMessagesPage(s *shared) *messagesPage {
	p := &messagesPage{tableList: newTableList(s, "level:error message:refused · other words: any column")}
	p.rebuild()
	return p
}

func (p *messagesPage) Title() string   { return "messages" }
func (p *messagesPage) Init() tea.Cmd   { return nil }
func (p *messagesPage) Resume() tea.Cmd { p.rebuild(); return nil }

func (p *messagesPage) Help() keyHelp {
	k := p.s.keys
	open := k.Open
	open.SetHelp(k.Open.Help().Key, "read whole")
	return keyHelp{short: []binding{open, k.Filter, k.Sort}, full: [][]binding{k.nav(), {open, k.Filter, k.Sort, k.SortReverse}}}
}

// entry returns the i-th message, newest first (before the filter).
func (p *messagesPage) entry(i int) logEntry { return p.s.log[len(p.s.log)-1-i] }

func (p *messagesPage) cells(i int) []string {
	en := p.entry(i)
	return []string{en.at.Local().Format("15:04:05"), en.level.glyph().text(), oneLine(en.full())}
}

// rebuild applies the filter and the sort to the messages logged so far.
func (p *messagesPage) rebuild() {
	p.seen = p.s.logged
	p.tb.rebuild(messageCols(), len(p.s.log), p.cells)
	p.list.setLen(len(p.tb.shown))
}

// current rebuilds when messages came since the last rebuild (they are
// logged by the root, whichever page is on top). Counted, not measured
// by the log's length: a full log keeps its length, and was rebuilt whole
// at every frame and message.
func (p *messagesPage) current() {
	if p.s.logged != p.seen {
		p.rebuild()
	}
}

// cursorEntry is the message under the cursor.
func (p *messagesPage) cursorEntry() (logEntry, bool) {
	if p.list.cursor >= len(p.tb.shown) {
		return logEntry{}, false
	}
	return p.entry(p.tb.shown[p.list.cursor]), true
}

func (p *messagesPage) Update(msg tea.Msg) tea.Cmd {
	p.current()
	km, ok := msg.(tea.KeyMsg)
	if !ok {
		return nil
	}
	k := p.s.keys
	if !p.tb.filter.typing && p.list.navigate(k, km) {
		return nil
	}
	if ok, cmd := p.tb.key(k, km, len(messageCols())); ok {
		p.rebuild()
		return cmd
	}
	switch {
	case keyIs(km, k.Back):
		p.tb.filter.clear()
		p.rebuild()
	case keyIs(km, k.Open):
		if e, ok := p.cursorEntry(); ok {
			return p.s.post(pushMsg{newMessagePage(p.s, e)})
		}
	}
	return nil
}

func messageCols() []column {
	return []column{{title: "TIME", width: 8, newest: true}, {title: "LEVEL", width: 9}, {title: "MESSAGE", width: 20, flex: true}}
}

func (p *messagesPage) View() string {
	t := p.s.theme
	p.current()
	cols := p.tb.sort.mark(messageCols())
	var b strings.Builder
	if p.tb.filter.typing {
		b.WriteString(p.tb.filter.input.View() + "\n")
	} else {
		order := ", newest first"
		if p.tb.sort.col >= 0 {
			order = ""
		}
		// Filtered or sorted, the line says so before the guidance: it is
		// cut at the screen's edge.
		line := fmt.Sprintf("%s since the console started%s · enter reads one whole", plural(len(p.s.log), "message"), order)
		if info := p.tb.info(t, cols, len(p.s.log)); info != "" {
			line = plural(len(p.s.log), "message") + info + " · enter reads one whole"
		}
		b.WriteString(t.Muted.Render(line) + "\n")
	}
	wd := layout(cols, p.w)
	b.WriteString(header(t, cols, wd))
	switch {
	case len(p.s.log) == 0:
		b.WriteString("\n" + t.Muted.Render("  No message yet."))
	case len(p.tb.shown) == 0:
		b.WriteString("\n" + t.Muted.Render("  No message matches the filter (esc clears it)."))
	}
	p.list.first = strings.Count(b.String(), "\n") + 1 // where a click finds the rows
	s, e := p.list.window()
	for i := s; i < e; i++ {
		c := p.cells(p.tb.shown[i])
		g := p.entry(p.tb.shown[i]).level.glyph()
		cells := []string{cell(c[0], wd[0], false), cell(c[1], wd[1], false), cell(c[2], wd[2], false)}
		st := g.style(t)
		b.WriteString("\n" + renderRow(t, i == p.list.cursor, false, cells, []*lipgloss.Style{nil, &st}))
	}
	return b.String()
}

// messagePage shows one message whole.
type messagePage struct {
	textView
	e logEntry
}

func newMessagePage(s *shared, e logEntry) *messagePage {
	p := &messagePage{e: e}
	p.textView = newTextView(s, p.content)
	return p
}

func (p *messagePage) Title() string { return p.e.level.glyph().word }

func (p *messagePage) content() string {
	t := p.s.theme
	g := p.e.level.glyph()
	var b strings.Builder
	b.WriteString(g.style(t).Render(g.text()) + " " + t.Muted.Render(p.e.at.Local().Format("2006-01-02 15:04:05")) + "\n")
	if p.e.what != "" {
		b.WriteString(t.Muted.Render("while: ") + p.e.what + "\n")
	}
	b.WriteString("\n" + p.e.text)
	return b.String()
}

// loadFailed is the body of a page whose load failed: what failed, the
// error whole, and how to retry.
func loadFailed(s *shared, what string, err error, w int) string {
	t := s.theme
	msg := ansi.Wrap(err.Error(), max(w-4, 20), " ,/")
	return t.Error.Render("✗ Could not load "+what+".") + "\n\n" +
		indent(msg, "  ") + "\n\n" +
		t.Muted.Render(fmt.Sprintf("%s retries · %s lists every message", s.keys.Reload.Help().Key, s.keys.Messages.Help().Key))
}

// staleLine heads a list whose last refresh failed: the rows are the ones
// loaded before.
func staleLine(s *shared, err error) string {
	return s.theme.Error.Render("✗ refresh failed, showing what was loaded before: "+oneLine(err.Error())) +
		s.theme.Muted.Render(" · "+s.keys.Reload.Help().Key+" retries")
}

func indent(s, pre string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = pre + l
	}
	return strings.Join(lines, "\n")
}
