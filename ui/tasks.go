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
	s      *shared
	id     int
	tasks  []model.Task
	list   vlist
	loaded bool
	err    error // the last load failed
	w, h   int
}

type tasksLoadedMsg struct {
	id    int
	tasks []model.Task
	err   error
}

func (m tasksLoadedMsg) pageID() int { return m.id }

func newTasksPage(s *shared) *tasksPage { return &tasksPage{s: s, id: s.newID()} }

func (p *tasksPage) ID() int          { return p.id }
func (p *tasksPage) Title() string    { return "recent tasks" }
func (p *tasksPage) Capturing() bool  { return false }
func (p *tasksPage) Close()           {}
func (p *tasksPage) Init() tea.Cmd    { return p.load() }
func (p *tasksPage) Resume() tea.Cmd  { return p.load() }
func (p *tasksPage) SetSize(w, h int) { p.w, p.h = w, h; p.list.setHeight(h - 2) }

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
	return keyHelp{short: []binding{k.Open, k.Reload}, full: [][]binding{k.nav(), {k.Open, k.Reload}}}
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
		p.tasks = msg.tasks
		p.list.setLen(len(p.tasks))
	case tea.KeyMsg:
		if p.list.navigate(k, msg) {
			return nil
		}
		if !p.loaded && !keyIs(msg, k.Reload) {
			return p.s.notReady("tasks")
		}
		switch {
		case keyIs(msg, k.Open):
			if p.list.cursor < len(p.tasks) {
				return p.s.post(pushMsg{newWatchPage(p.s, p.tasks[p.list.cursor])})
			}
		case keyIs(msg, k.Reload):
			return p.load()
		}
	}
	return nil
}

func taskCols() []column {
	return []column{
		{title: "CREATED", width: 8}, {title: "OP", width: 10}, {title: "STATUS", width: 11},
		{title: "DONE", width: 11, right: true}, {title: "BAD", width: 5, right: true},
		{title: "NAMESPACES", width: 10, flex: true}, {title: "TASK", width: 16, flex: true},
	}
}

// taskSelection is what a task acted on, as far as the task says.
func taskSelection(t model.Task) string {
	if len(t.Namespace) == 0 {
		return plural(t.Targets, "target")
	}
	return strings.Join(t.Namespace, ",") + " · " + plural(t.Targets, "target")
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
	if p.err != nil {
		b.WriteString(staleLine(p.s, p.err) + "\n")
	} else {
		b.WriteString(t.Muted.Render(fmt.Sprintf("%s, newest first · enter reopens one", plural(len(p.tasks), "task"))) + "\n")
	}
	wd := layout(taskCols(), p.w)
	b.WriteString(header(t, taskCols(), wd))
	if len(p.tasks) == 0 {
		b.WriteString("\n" + t.Muted.Render("  No task yet: browse to some hosts and press o."))
	}
	s, e := p.list.window()
	for i := s; i < e; i++ {
		tk := p.tasks[i]
		g := taskGlyph(tk.Status)
		cells := []string{cell(tk.Created.Local().Format("15:04:05"), wd[0], false), cell(tk.Op.String(), wd[1], false),
			cell(g.text(), wd[2], false), cell(fmt.Sprintf("%d/%d", tk.Counts.Final(), tk.Targets), wd[3], true),
			cell(fmt.Sprint(tk.Counts.Bad()), wd[4], true), cell(strings.Join(tk.Namespace, ","), wd[5], false),
			cell(tail(tk.ID, wd[6]), wd[6], false)}
		st := g.style(t)
		b.WriteString("\n" + renderRow(t, i == p.list.cursor, false, cells, []*lipgloss.Style{nil, nil, &st}))
	}
	return b.String()
}

// ---- host events ---------------------------------------------------------

// eventsPage shows the host events the root collects (newest first).
type eventsPage struct {
	s    *shared
	id   int
	list vlist
	w, h int
}

func newEventsPage(s *shared) *eventsPage { return &eventsPage{s: s, id: s.newID()} }

func (p *eventsPage) ID() int          { return p.id }
func (p *eventsPage) Title() string    { return "host events" }
func (p *eventsPage) Capturing() bool  { return false }
func (p *eventsPage) Close()           {}
func (p *eventsPage) Init() tea.Cmd    { return nil }
func (p *eventsPage) Resume() tea.Cmd  { return nil }
func (p *eventsPage) SetSize(w, h int) { p.w, p.h = w, h; p.list.setHeight(h - 2) }

func (p *eventsPage) Help() keyHelp {
	k := p.s.keys
	open := k.Open
	open.SetHelp(open.Help().Key, "read whole")
	return keyHelp{short: []binding{open, k.Up, k.Down}, full: [][]binding{k.nav(), {open}}}
}

func (p *eventsPage) Update(msg tea.Msg) tea.Cmd {
	p.list.setLen(len(p.s.events))
	km, ok := msg.(tea.KeyMsg)
	if !ok || p.list.navigate(p.s.keys, km) {
		return nil
	}
	if keyIs(km, p.s.keys.Open) && p.list.cursor < len(p.s.events) {
		ev := p.s.events[len(p.s.events)-1-p.list.cursor]
		return p.s.post(pushMsg{newEventPage(p.s, ev)})
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
		{title: "TIME", width: 8}, {title: "HOST", width: 17, min: 12}, {title: "PROC", width: 14, flex: true},
		{title: "EVENT", width: 16}, {title: "DETAIL", width: 20, flex: true, grow: 3},
	}
}

func (p *eventsPage) View() string {
	t := p.s.theme
	evs := p.s.events
	p.list.setLen(len(evs))
	var b strings.Builder
	b.WriteString(t.Muted.Render(fmt.Sprintf("%s seen since the console started, newest first", plural(len(evs), "event"))) + "\n")
	wd := layout(eventCols(), p.w)
	b.WriteString(header(t, eventCols(), wd))
	s, e := p.list.window()
	for i := s; i < e; i++ {
		ev := evs[len(evs)-1-i]
		g := eventGlyph(ev.Kind)
		cells := []string{cell(ev.Time.Local().Format("15:04:05"), wd[0], false), cell(ev.Host.AgentID(), wd[1], false),
			cell(ev.ProcKey, wd[2], false), cell(g.text(), wd[3], false), cell(oneLine(ev.Message), wd[4], false)}
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
	}
	return glyph{"•", string(k), styleMuted}
}
