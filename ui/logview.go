package ui

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"gseproc/backend"
	"gseproc/model"
)

// The live log page: one process's log on one or more hosts, followed as
// it grows (backend.Logs), interleaved with the host as a prefix or side
// by side, with / search (matches highlighted, n/N between them). Lines
// are kept without any escape sequence or control character (clipSafe):
// a log cannot drive the terminal or break the frame.

// logKeep bounds the lines kept per host, and the interleaved lines.
const logKeep = 5000

// logMaxHosts bounds the hosts one logs page follows.
const logMaxHosts = 20

// logBack is how far before the end a tail starts.
const logBack = 16 << 10

type logsPage struct {
	s       *shared
	id      int
	proc    string
	hosts   []model.Host
	stream  model.LogStream
	gen     int // bumped when the streams are opened again (another stream)
	ctx     context.Context
	cancel  context.CancelFunc
	lines   [][]string // per host
	all     []logLine  // interleaved, in arrival order
	status  []string   // per host: following, exited, the error
	side    bool       // side by side (else interleaved)
	follow  bool       // stay at the end
	off     int        // lines scrolled back from the end
	search  listFilter // the / input
	query   string     // the search in force
	matches []logLine  // of query, in order
	cur     int        // the current match, -1 none
	w, h    int
}

// logLine is line i of host h.
type logLine struct{ h, i int }

type (
	logOpenedMsg struct {
		id, gen, h int
		ch         <-chan model.TailChunk
		err        error
	}
	logChunksMsg struct {
		id, gen, h int
		chunks     []model.TailChunk
		ch         <-chan model.TailChunk
		closed     bool
	}
)

func (m logOpenedMsg) pageID() int { return m.id }
func (m logChunksMsg) pageID() int { return m.id }

func newLogsPage(s *shared, proc string, hosts []model.Host) *logsPage {
	p := &logsPage{s: s, id: s.newID(), proc: proc, hosts: hosts, stream: model.LogStdout, follow: true, cur: -1,
		search: newListFilter("search the log (enter keeps it; n/N next/previous match)")}
	p.side = len(hosts) > 1 && len(hosts) <= 3
	return p
}

func (p *logsPage) ID() int          { return p.id }
func (p *logsPage) Capturing() bool  { return p.search.typing }
func (p *logsPage) Resume() tea.Cmd  { return nil }
func (p *logsPage) Init() tea.Cmd    { return p.open() }
func (p *logsPage) SetSize(w, h int) { p.w, p.h = w, h; p.search.input.Width = max(w-4, 10) }

func (p *logsPage) Title() string {
	t := "logs " + p.proc + " " + string(p.stream)
	if len(p.hosts) == 1 {
		return t + " @" + p.hosts[0].AgentID()
	}
	return fmt.Sprintf("%s (%d hosts)", t, len(p.hosts))
}

func (p *logsPage) Close() {
	if p.cancel != nil {
		p.cancel()
	}
}

// Keys of the page (beside the lists' movement).
var (
	logFollow = key.NewBinding(key.WithKeys("f"), key.WithHelp("f", "follow (stay at the end)"))
	logLayout = key.NewBinding(key.WithKeys("v"), key.WithHelp("v", "side by side / interleaved"))
	logStream = key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "next stream: stdout, stderr, file"))
	logNext   = key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "next match"))
	logPrev   = key.NewBinding(key.WithKeys("N"), key.WithHelp("N", "previous match"))
)

func (p *logsPage) Help() keyHelp {
	k := p.s.keys
	search := k.Filter
	search.SetHelp(k.Filter.Help().Key, "search")
	return keyHelp{
		short: []binding{search, logNext, logFollow, logLayout, logStream},
		full:  [][]binding{k.nav(), {search, logNext, logPrev}, {logFollow, logLayout, logStream}},
	}
}

// open (re)opens every host's stream.
func (p *logsPage) open() tea.Cmd {
	p.Close()
	p.ctx, p.cancel = context.WithCancel(p.s.ctx)
	p.gen++
	p.lines, p.all, p.matches, p.cur, p.off = make([][]string, len(p.hosts)), nil, nil, -1, 0
	p.status = make([]string, len(p.hosts))
	cmds := make([]tea.Cmd, len(p.hosts))
	for h, host := range p.hosts {
		p.status[h] = "opening"
		ctx, be, id, gen, h := p.ctx, p.s.be, p.id, p.gen, h
		q := backend.LogQuery{Process: p.proc, Host: host, Stream: p.stream, Bytes: logBack, Follow: true}
		cmds[h] = func() tea.Msg {
			ch, err := be.Logs(ctx, q)
			return logOpenedMsg{id: id, gen: gen, h: h, ch: ch, err: err}
		}
	}
	return tea.Batch(cmds...)
}

// read waits for the next chunks of host h's stream (those already
// waiting come in the same message). The channel closes when p.ctx ends
// (backend.Logs), so the read ends with the page.
func (p *logsPage) read(h int, ch <-chan model.TailChunk) tea.Cmd {
	id, gen := p.id, p.gen
	return func() tea.Msg {
		chunks, closed := drain(ch, 64, 0)
		return logChunksMsg{id: id, gen: gen, h: h, chunks: chunks, ch: ch, closed: closed}
	}
}

func (p *logsPage) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case logOpenedMsg:
		if msg.gen != p.gen {
			return nil
		}
		if msg.err != nil {
			p.status[msg.h] = "error: " + clipSafe(msg.err.Error())
			return errCmd("logs of "+p.proc+" on "+p.hosts[msg.h].AgentID(), msg.err)
		}
		p.status[msg.h] = "following"
		return p.read(msg.h, msg.ch)
	case logChunksMsg:
		if msg.gen != p.gen {
			return nil
		}
		for _, c := range msg.chunks {
			p.add(msg.h, c)
		}
		if msg.closed {
			if p.status[msg.h] == "following" {
				p.status[msg.h] = "ended"
			}
			return nil
		}
		return p.read(msg.h, msg.ch)
	case tea.KeyMsg:
		return p.key(msg)
	}
	return nil
}

// add keeps a chunk's lines (without escapes or controls) and says how
// the stream stands.
func (p *logsPage) add(h int, c model.TailChunk) {
	switch {
	case c.Error != "":
		p.status[h] = "error: " + clipSafe(c.Error)
	case c.Done():
		p.status[h] = "exited"
	}
	if c.Reset {
		p.push(h, "── "+string(p.stream)+" was truncated or replaced: from its start ──")
	}
	data := strings.TrimSuffix(c.Data, "\n")
	if data == "" {
		return
	}
	for _, l := range strings.Split(data, "\n") {
		p.push(h, strings.ReplaceAll(clipSafe(l), "\t", "    "))
	}
}

func (p *logsPage) push(h int, line string) {
	p.lines[h] = append(p.lines[h], line)
	p.all = append(p.all, logLine{h, len(p.lines[h]) - 1})
	if p.query != "" && containsFold(line, p.query) {
		p.matches = append(p.matches, logLine{h, len(p.lines[h]) - 1})
	}
	if !p.follow && !p.side {
		p.off++ // the view stays on what the operator reads
	}
	if n := len(p.lines[h]); n > 2*logKeep {
		p.trim(h, n-logKeep)
	}
}

// trim drops host h's first n lines.
func (p *logsPage) trim(h, n int) {
	p.lines[h] = append([]string(nil), p.lines[h][n:]...)
	shift := func(ls []logLine) []logLine {
		out := ls[:0]
		for _, l := range ls {
			if l.h == h {
				if l.i < n {
					continue
				}
				l.i -= n
			}
			out = append(out, l)
		}
		return out
	}
	p.all = shift(p.all)
	// The current match stays on its line: back by the matches dropped
	// before it, none when its own line was dropped.
	if p.cur >= 0 {
		if c := p.matches[p.cur]; c.h == h && c.i < n {
			p.cur = -1
		} else {
			for _, m := range p.matches[:p.cur] {
				if m.h == h && m.i < n {
					p.cur--
				}
			}
		}
	}
	p.matches = shift(p.matches)
	p.off = min(p.off, p.maxOff()) // a view on dropped lines shows the first kept
}

func (p *logsPage) key(msg tea.KeyMsg) tea.Cmd {
	k := p.s.keys
	if p.search.typing {
		p.search.key(msg)
		if !p.search.typing {
			p.setQuery(p.search.value())
		}
		return nil
	}
	page := max(p.bodyHeight()-1, 1)
	switch {
	case keyIs(msg, k.Filter):
		return p.search.start()
	case keyIs(msg, logNext), keyIs(msg, logPrev):
		if len(p.matches) == 0 {
			return p.s.post(flashMsg{"no match"})
		}
		d := 1
		if keyIs(msg, logPrev) {
			d = -1
		}
		p.cur = (p.cur + d + len(p.matches)) % len(p.matches)
		p.show(p.matches[p.cur])
	case keyIs(msg, logFollow), keyIs(msg, k.Bottom):
		p.follow = !p.follow || keyIs(msg, k.Bottom)
		if p.follow {
			p.off = 0
		}
	case keyIs(msg, logLayout):
		p.side = !p.side
		p.off, p.follow = 0, true
	case keyIs(msg, logStream):
		switch p.stream {
		case model.LogStdout:
			p.stream = model.LogStderr
		case model.LogStderr:
			p.stream = model.LogFile
		default:
			p.stream = model.LogStdout
		}
		return p.open()
	case keyIs(msg, k.Up):
		p.scroll(1)
	case keyIs(msg, k.Down):
		p.scroll(-1)
	case keyIs(msg, k.PageUp):
		p.scroll(page)
	case keyIs(msg, k.PageDown):
		p.scroll(-page)
	case keyIs(msg, k.Top):
		p.scroll(1 << 30)
	}
	return nil
}

// scroll moves the view d lines back (d < 0: forward); at the end it
// follows again.
func (p *logsPage) scroll(d int) {
	p.off = max(0, min(p.off+d, p.maxOff()))
	p.follow = p.off == 0
}

// maxOff is the furthest back the view goes: the first lines fill the
// screen (a column's rows are below the hosts' header side by side).
func (p *logsPage) maxOff() int {
	rows := p.bodyHeight()
	if p.side {
		rows--
	}
	return max(p.length()-rows, 0)
}

// length is the lines the view scrolls over.
func (p *logsPage) length() int {
	if !p.side {
		return len(p.all)
	}
	n := 0
	for _, ls := range p.lines {
		n = max(n, len(ls))
	}
	return n
}

// setQuery puts a search in force and goes to its last match (a flash
// says when no line has it).
func (p *logsPage) setQuery(q string) {
	p.query, p.matches, p.cur = q, nil, -1
	if q == "" {
		return
	}
	for _, l := range p.all {
		if containsFold(p.lines[l.h][l.i], q) {
			p.matches = append(p.matches, l)
		}
	}
	if len(p.matches) == 0 {
		p.s.post(flashMsg{"no line has " + q})
		return
	}
	p.cur = len(p.matches) - 1
	p.show(p.matches[p.cur])
}

// show scrolls so that l is in view (a third from the top).
func (p *logsPage) show(l logLine) {
	var fromEnd int
	if p.side {
		fromEnd = len(p.lines[l.h]) - 1 - l.i
	} else {
		for i := len(p.all) - 1; i >= 0; i-- {
			if p.all[i] == l {
				fromEnd = len(p.all) - 1 - i
				break
			}
		}
	}
	p.off = min(max(0, fromEnd-p.bodyHeight()/3), p.maxOff())
	p.follow = p.off == 0
}

func (p *logsPage) bodyHeight() int { return max(p.h-2, 1) }

func (p *logsPage) View() string {
	t := p.s.theme
	mode := "interleaved"
	if p.side {
		mode = "side by side"
	}
	follow := "paused (f follows)"
	if p.follow {
		follow = "following"
	}
	head := fmt.Sprintf("%s · %s · %s · %s", p.proc, p.stream, mode, follow)
	if p.query != "" {
		head += fmt.Sprintf(" · /%s %d/%d", p.query, p.cur+1, len(p.matches))
	}
	out := []string{t.Title.Render(clipSafe(head))}
	body := p.bodyHeight()
	if p.side {
		out = append(out, p.sideView(body)...)
	} else {
		out = append(out, p.interleavedView(body)...)
	}
	if p.search.typing {
		out = append(out, p.search.input.View())
	} else {
		out = append(out, p.statusLine())
	}
	return strings.Join(out, "\n")
}

func (p *logsPage) statusLine() string {
	t := p.s.theme
	parts := make([]string, len(p.hosts))
	for h, host := range p.hosts {
		st := t.OK
		switch {
		case strings.HasPrefix(p.status[h], "error"):
			st = t.Error
		case p.status[h] != "following":
			st = t.Muted
		}
		parts[h] = host.AgentID() + " " + st.Render(p.status[h])
	}
	return strings.Join(parts, "  ")
}

// window is the [from, to) of n lines the view shows in rows rows.
func (p *logsPage) window(n, rows int) (int, int) {
	to := max(n-p.off, 0)
	return max(to-rows, 0), to
}

func (p *logsPage) interleavedView(rows int) []string {
	from, to := p.window(len(p.all), rows)
	wid := 0
	for _, h := range p.hosts {
		wid = max(wid, len(h.AgentID()))
	}
	out := make([]string, 0, rows)
	for _, l := range p.all[from:to] {
		prefix := ""
		if len(p.hosts) > 1 {
			prefix = p.s.theme.Muted.Render(cell(p.hosts[l.h].AgentID(), wid, false) + " │ ")
		}
		out = append(out, prefix+p.render(l, p.w-ansi.StringWidth(prefix)))
	}
	for len(out) < rows {
		out = append(out, "")
	}
	return out
}

func (p *logsPage) sideView(rows int) []string {
	n := len(p.hosts)
	colW := max((p.w-(n-1)*3)/n, 8)
	cols := make([][]string, n)
	for h := range p.hosts {
		c := []string{p.s.theme.Header.Render(cell(p.hosts[h].AgentID(), colW, false))}
		from, to := p.window(len(p.lines[h]), rows-1)
		for i := from; i < to; i++ {
			c = append(c, p.render(logLine{h, i}, colW))
		}
		for len(c) < rows {
			c = append(c, "")
		}
		for i := range c {
			c[i] = cell(c[i], colW, false)
		}
		cols[h] = c
	}
	out := make([]string, rows)
	for r := range out {
		parts := make([]string, n)
		for h := range cols {
			parts[h] = cols[h][r]
		}
		out[r] = strings.Join(parts, " │ ")
	}
	return out
}

// render is line l cut to w cells, with the search's matches highlighted
// (the current match's line marked).
func (p *logsPage) render(l logLine, w int) string {
	text := ansi.Truncate(p.lines[l.h][l.i], max(w, 1), "…")
	if p.query == "" {
		return text
	}
	t := p.s.theme
	hl := t.Selected
	if p.cur >= 0 && p.cur < len(p.matches) && p.matches[p.cur] == l {
		hl = t.Cursor
	}
	return markMatches(text, p.query, hl)
}

// markMatches renders every case-insensitive occurrence of q in s with st.
func markMatches(s, q string, st lipgloss.Style) string {
	ls, lq := strings.ToLower(s), strings.ToLower(q)
	if lq == "" || len(ls) != len(s) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(ls, lq)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(st.Render(s[i : i+len(lq)]))
		s, ls = s[i+len(lq):], ls[i+len(lq):]
	}
}

// procOn is a process on a host.
type procOn struct {
	key  string
	host model.Host
}

// openLogs opens the live log of a process on the hosts of on that carry
// it; when they carry several processes, the palette asks which.
func (s *shared) openLogs(on []procOn) tea.Cmd {
	hosts := map[string][]model.Host{}
	var keys []string
	for _, o := range on {
		if _, ok := hosts[o.key]; !ok {
			keys = append(keys, o.key)
		}
		if !slices.Contains(hosts[o.key], o.host) {
			hosts[o.key] = append(hosts[o.key], o.host)
		}
	}
	// Each host is a stream (an agent asked piece after piece): a
	// selection of the whole fleet must not open one per host.
	open := func(key string) tea.Cmd {
		if hs := hosts[key]; len(hs) > logMaxHosts {
			return s.post(flashMsg{fmt.Sprintf("the logs of %s on %d hosts: at most %d at once, select fewer", key, len(hs), logMaxHosts)})
		}
		return s.post(pushMsg{newLogsPage(s, key, hosts[key])})
	}
	switch len(keys) {
	case 0:
		return s.post(flashMsg{"no process here to show the logs of"})
	case 1:
		return open(keys[0])
	}
	slices.Sort(keys)
	cmds := make([]Command, len(keys))
	for i, key := range keys {
		cmds[i] = Command{Name: key, Help: plural(len(hosts[key]), "host"), Run: func(string) tea.Cmd { return open(key) }}
	}
	return s.post(chooseMsg{prompt: "the logs of which process?", kind: kindProcess, cmds: cmds})
}
