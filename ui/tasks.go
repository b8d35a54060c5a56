package ui

import (
	"fmt"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"gseproc/model"
)

// tasksPage lists recent tasks, newest first; enter reopens one's watch.
type tasksPage struct {
	fresh
	tableList
	tasks  []model.Task
	loaded bool
	err    error // the last load failed
}

type tasksLoadedMsg struct {
	id    int
	tasks []model.Task
	err   error
}

func (m tasksLoadedMsg) pageID() int { return m.id }

func newTasksPage(s *shared) *tasksPage {
	return &tasksPage{tableList: newTableList(s, "op=restart status:fail selection:app=nginx · other words: any column")}
}

func (p *tasksPage) Title() string   { return "recent tasks" }
func (p *tasksPage) Init() tea.Cmd   { return p.load() }
func (p *tasksPage) Resume() tea.Cmd { return p.load() }

func (p *tasksPage) load() tea.Cmd {
	ctx, be, id, n := p.s.ctx, p.s.be, p.id, p.s.cfg.RecentTasks
	if n <= 0 {
		n = 50
	}
	return func() tea.Msg {
		ts, err := be.Tasks(ctx, n)
		return tasksLoadedMsg{id: id, tasks: ts, err: err}
	}
}

func (p *tasksPage) Help() keyHelp {
	k := p.s.keys
	return keyHelp{short: []binding{k.Open, k.Filter, k.Sort, k.Reload}, full: [][]binding{k.nav(), {k.Open, k.Filter, k.Sort, k.SortReverse, k.Reload}}}
}

func (p *tasksPage) cells(i int) []string {
	tk := p.tasks[i]
	return []string{tk.Created.Local().Format("15:04:05"), tk.Op.String(), taskGlyph(tk.Status).text(),
		fmt.Sprintf("%d/%d", tk.Counts.Final(), tk.Targets), fmt.Sprint(tk.Counts.Bad()), taskSelection(tk), tk.ID}
}

func (p *tasksPage) cursorTask() (model.Task, bool) {
	if p.list.cursor < 0 || p.list.cursor >= len(p.tb.shown) {
		return model.Task{}, false
	}
	return p.tasks[p.tb.shown[p.list.cursor]], true
}

func (p *tasksPage) curID() string { tk, _ := p.cursorTask(); return tk.ID }

// rebuild applies the filter and the sort, keeping the cursor on the task cur.
func (p *tasksPage) rebuild(cur string) {
	p.tb.refresh(&p.list, taskCols(), len(p.tasks), p.cells, func(i int) string { return p.tasks[i].ID }, cur)
}

func (p *tasksPage) Update(msg tea.Msg) tea.Cmd {
	k := p.s.keys
	switch msg := msg.(type) {
	case tasksLoadedMsg:
		p.loaded = true
		if msg.err != nil {
			p.err = msg.err
			return errCmd("list tasks", msg.err)
		}
		if p.err != nil {
			p.err = nil
			p.s.resolved("list tasks")
		}
		p.fresh.at = p.s.now()
		cur := p.curID() // of the rows before the new ones
		p.tasks = msg.tasks
		p.rebuild(cur)
	case tea.KeyMsg:
		if !p.tb.filter.typing && p.list.navigate(k, msg) {
			return nil
		}
		if !p.loaded && !keyIs(msg, k.Reload) {
			return p.s.notReady("tasks")
		}
		if ok, cmd := p.tb.key(k, msg, len(taskCols())); ok {
			p.rebuild(p.curID())
			return cmd
		}
		switch {
		case keyIs(msg, k.Back):
			p.tb.filter.clear()
			p.rebuild(p.curID())
		case keyIs(msg, k.Open):
			if tk, ok := p.cursorTask(); ok {
				return p.s.post(pushMsg{newWatchPage(p.s, tk)})
			}
		case keyIs(msg, k.Reload):
			return p.load()
		}
	}
	return nil
}

func taskCols() []column {
	return []column{
		{title: "CREATED", width: 8, newest: true}, {title: "OP", width: 10}, {title: "STATUS", width: 11},
		{title: "DONE", width: 11, right: true}, {title: "BAD", width: 5, right: true},
		// What the task acted on is worth the width (the labels, the
		// hosts); the id is on the watch and c copies it, so it goes first.
		{title: "SELECTION", width: 24, flex: true, grow: 2, min: 16}, {title: "TASK", width: 16, flex: true, optional: true},
	}
}

// taskSelection is what a task acted on, as far as the task says.
func taskSelection(t model.Task) string {
	parts := []string{strings.Join(t.Namespace, ",")}
	if t.Selection != "" {
		parts = append(parts, t.Selection)
	}
	return strings.Join(parts, " · ")
}

// tail keeps the end of s (a task id's unique part) within w cells.
func tail(s string, w int) string {
	if ansi.StringWidth(s) <= w || w < 2 {
		return s
	}
	r := []rune(s)
	return "…" + string(r[len(r)-(w-1):])
}

func (p *tasksPage) View() string {
	t := p.s.theme
	if !p.loaded {
		return t.Muted.Render("loading tasks…")
	}
	if p.err != nil && len(p.tasks) == 0 {
		return loadFailed(p.s, "the recent tasks", p.err, p.w)
	}
	var b strings.Builder
	cols := p.tb.sort.mark(taskCols())
	switch {
	case p.tb.filter.typing:
		b.WriteString(p.tb.filter.input.View() + "\n")
	case p.err != nil:
		b.WriteString(staleLine(p.s, p.err) + "\n")
	default:
		order := ", newest first"
		if p.tb.sort.col >= 0 {
			order = ""
		}
		b.WriteString(t.Muted.Render(plural(len(p.tasks), "task")+order+p.tb.info(t, cols, len(p.tasks))+" · enter reopens one") + "\n")
	}
	wd := layout(cols, p.w)
	b.WriteString(header(t, cols, wd))
	switch {
	case len(p.tasks) == 0:
		b.WriteString("\n" + t.Muted.Render("  No task yet: browse to some hosts and press o."))
	case len(p.tb.shown) == 0:
		b.WriteString("\n" + t.Muted.Render("  No task matches the filter (esc clears it)."))
	}
	p.list.first = strings.Count(b.String(), "\n") + 1 // where a click finds the rows
	s, e := p.list.window()
	for i := s; i < e; i++ {
		tk := p.tasks[p.tb.shown[i]]
		g := taskGlyph(tk.Status)
		c := p.cells(p.tb.shown[i])
		cells := []string{cell(c[0], wd[0], false), cell(c[1], wd[1], false), cell(c[2], wd[2], false), cell(c[3], wd[3], true),
			cell(c[4], wd[4], true), cell(c[5], wd[5], false), cell(tail(tk.ID, wd[6]), wd[6], false)}
		st := g.style(t)
		b.WriteString("\n" + renderRow(t, i == p.list.cursor, false, cells, []*lipgloss.Style{nil, nil, &st}))
	}
	return b.String()
}

// ---- host events ---------------------------------------------------------

// eventsPage shows the host events the root collects (newest first).
type eventsPage struct{ tableList }

func newEventsPage(s *shared) *eventsPage {
	p := &eventsPage{newTableList(s, "event:restart host:10.0.1 proc=web:nginx · other words: any column")}
	p.rebuild()
	return p
}

func (p *eventsPage) Title() string   { return "host events" }
func (p *eventsPage) Init() tea.Cmd   { return nil }
func (p *eventsPage) Resume() tea.Cmd { p.rebuild(); return nil } // events came while another page was on top

func (p *eventsPage) Help() keyHelp {
	k := p.s.keys
	open := k.Open
	open.SetHelp(open.Help().Key, "read whole")
	return keyHelp{short: []binding{open, k.Filter, k.Sort}, full: [][]binding{k.nav(), {open, k.Filter, k.Sort, k.SortReverse}}}
}

// event is row i: the events newest first.
func (p *eventsPage) event(i int) model.Event { return p.s.events[len(p.s.events)-1-i] }

func (p *eventsPage) cells(i int) []string {
	ev := p.event(i)
	return []string{ev.Time.Local().Format("15:04:05"), ev.Host.AgentID(), ev.ProcKey, eventGlyph(ev.Kind).text(), oneLine(ev.Message)}
}

// rebuild applies the filter and the sort to the events known now.
func (p *eventsPage) rebuild() {
	p.tb.rebuild(eventCols(), len(p.s.events), p.cells)
	p.list.setLen(len(p.tb.shown))
}

// onEvents shows new events as they come.
func (p *eventsPage) onEvents([]model.Event) tea.Cmd { p.rebuild(); return nil }

func (p *eventsPage) Update(msg tea.Msg) tea.Cmd {
	k := p.s.keys
	km, ok := msg.(tea.KeyMsg)
	if !ok {
		return nil
	}
	if !p.tb.filter.typing && p.list.navigate(k, km) {
		return nil
	}
	if ok, cmd := p.tb.key(k, km, len(eventCols())); ok {
		p.rebuild()
		return cmd
	}
	switch {
	case keyIs(km, k.Back):
		p.tb.filter.clear()
		p.rebuild()
	case keyIs(km, k.Open) && p.list.cursor < len(p.tb.shown):
		return p.s.post(pushMsg{newEventPage(p.s, p.event(p.tb.shown[p.list.cursor]))})
	}
	return nil
}

// eventPage shows one host event whole.
type eventPage struct {
	textView
	ev model.Event
}

func newEventPage(s *shared, ev model.Event) *eventPage {
	p := &eventPage{ev: ev}
	p.textView = newTextView(s, p.content)
	return p
}

func (p *eventPage) Title() string { return "event" }

func (p *eventPage) content() string {
	t := p.s.theme
	g := eventGlyph(p.ev.Kind)
	kv := func(k, v string) string { return t.Muted.Render(fmt.Sprintf("%-8s", k)) + " " + v + "\n" }
	return kv("time", p.ev.Time.Local().Format("2006-01-02 15:04:05")) + kv("host", p.ev.Host.AgentID()) +
		kv("process", orDash(p.ev.ProcKey)) + kv("event", g.style(t).Render(g.text())+" ("+string(p.ev.Kind)+")") +
		"\n" + p.ev.Message
}

func eventCols() []column {
	return []column{
		{title: "TIME", width: 8, newest: true}, {title: "HOST", width: 17, min: 12}, {title: "PROC", width: 14, flex: true},
		{title: "EVENT", width: 16}, {title: "DETAIL", width: 20, flex: true, grow: 3},
	}
}

func (p *eventsPage) View() string {
	t := p.s.theme
	var b strings.Builder
	cols := p.tb.sort.mark(eventCols())
	if p.tb.filter.typing {
		b.WriteString(p.tb.filter.input.View() + "\n")
	} else {
		order := ", newest first"
		if p.tb.sort.col >= 0 {
			order = ""
		}
		b.WriteString(t.Muted.Render(plural(len(p.s.events), "event")+" seen since the console started"+order+p.tb.info(t, cols, len(p.s.events))) + "\n")
	}
	wd := layout(cols, p.w)
	b.WriteString(header(t, cols, wd))
	p.list.first = strings.Count(b.String(), "\n") + 1 // where a click finds the rows
	s, e := p.list.window()
	for i := s; i < e; i++ {
		c := p.cells(p.tb.shown[i])
		g := eventGlyph(p.event(p.tb.shown[i]).Kind)
		cells := []string{cell(c[0], wd[0], false), cell(c[1], wd[1], false), cell(c[2], wd[2], false), cell(c[3], wd[3], false), cell(c[4], wd[4], false)}
		st := g.style(t)
		b.WriteString("\n" + renderRow(t, i == p.list.cursor, false, cells, []*lipgloss.Style{nil, nil, nil, &st}))
	}
	return b.String()
}

func eventGlyph(k model.EventKind) glyph {
	switch k {
	case model.EventRestartSuccess:
		return glyph{"↻", "restarted", styleWarn}
	case model.EventRestartFailed:
		return glyph{"✗", "restart failed", styleErr}
	case model.EventGiveUp:
		return glyph{"✗", "gave up", styleErr}
	case model.EventLimitExceeded:
		return glyph{"▲", "over limit", styleErr}
	case model.EventAgentOnline:
		return glyph{"●", "agent online", styleOK}
	case model.EventAgentOffline:
		return glyph{"○", "agent offline", styleErr}
	case model.EventResultCorrected:
		return glyph{"✎", "result corrected", styleWarn}
	}
	return glyph{"•", string(k), styleMuted}
}
