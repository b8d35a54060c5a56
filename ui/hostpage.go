package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"gseproc/backend"
	"gseproc/model"
)

// hostPage shows one host whole: its agent (state, version, agent id, last
// heartbeat, labels), every process on it across namespaces with its last
// known status, and the host's recent events; o operates on the host.
type hostPage struct {
	textView
	fresh
	host   model.Host
	v      backend.HostView
	loaded bool
	found  bool
	err    error
	// tb filters (/) and sorts (s, S) the process table.
	tb table
}

type hostLoadedMsg struct {
	id    int
	hosts []backend.HostView
	err   error
}

func (m hostLoadedMsg) pageID() int { return m.id }

// newHostPage opens h; v (possibly only some of its processes) is shown
// until the whole host is loaded.
func newHostPage(s *shared, h model.Host, v *backend.HostView) *hostPage {
	p := &hostPage{host: h, tb: newTable("process:web state=running pid:12 · other words: any column")}
	if v != nil {
		p.v, p.found = *v, true
	}
	p.textView = newTextView(s, p.content)
	return p
}

// SetSize sizes the text and the filter's input (its text scrolls within
// the screen, the end being typed in sight).
func (p *hostPage) SetSize(w, h int) {
	p.textView.SetSize(w, h)
	p.tb.filter.input.Width = max(w-4, 10)
}

func (p *hostPage) Title() string   { return p.host.AgentID() }
func (p *hostPage) Init() tea.Cmd   { return p.load() }
func (p *hostPage) Resume() tea.Cmd { return p.load() }

func (p *hostPage) load() tea.Cmd {
	ctx, be, id, h := p.s.ctx, p.s.be, p.id, p.host
	return func() tea.Msg {
		hv, err := be.Hosts(ctx, backend.HostQuery{Hosts: []model.Host{h}})
		return hostLoadedMsg{id: id, hosts: hv, err: err}
	}
}

func (p *hostPage) Help() keyHelp {
	k := p.s.keys
	return keyHelp{short: []binding{k.Op, k.Logs, k.Filter, k.Sort, k.Reload}, full: [][]binding{k.nav(), {k.Op, k.Logs, k.Reload}, {k.Filter, k.Sort, k.SortReverse}}}
}

// The process table's / input has the keys while typed; esc clears a
// filter before it goes back.
func (p *hostPage) Capturing() bool    { return p.tb.filter.typing }
func (p *hostPage) filterTyping() bool { return p.tb.filter.typing }
func (p *hostPage) consumesBack() bool { return p.tb.filter.value() != "" }

func hostProcCols() []column {
	return []column{
		{title: "PROCESS", width: 24, flex: true, grow: 2, min: 12}, {title: "STATE", width: 11}, {title: "PID", width: 7, right: true},
		{title: "SINCE", width: 20, optional: true}, {title: "CPU", width: 6, right: true}, {title: "MEM", width: 6, right: true},
		{title: "RESTARTS", width: 8, right: true}, {title: "HOSTED", width: 6, optional: true},
	}
}

// procCells is process i's cells, as the table filters and sorts them
// (the state as its word, state=running; drawn with its glyph).
func (p *hostPage) procCells(i int) []string {
	st := p.v.Procs[i].Status
	pid, since, hosted := "", "", ""
	if st.PID > 0 && st.State.Up() {
		pid = fmt.Sprint(st.PID)
	}
	if !st.StartTime.IsZero() && st.State.Up() {
		since = st.StartTime.UTC().Format("2006-01-02 15:04:05Z")
	}
	if st.Hosted {
		hosted = "yes"
	}
	return []string{p.v.Procs[i].Key, procGlyph(st.State).word, pid, since, fmt.Sprintf("%.1f%%", st.CPU), fmt.Sprintf("%.1f%%", st.Mem),
		fmt.Sprint(st.Restarts), hosted}
}

// onEvents redraws when an event of this host arrives.
func (p *hostPage) onEvents(evs []model.Event) tea.Cmd {
	for _, e := range evs {
		if e.Host == p.host {
			p.SetSize(p.w, p.h)
			break
		}
	}
	return nil
}

func (p *hostPage) Update(msg tea.Msg) tea.Cmd {
	k := p.s.keys
	switch msg := msg.(type) {
	case hostLoadedMsg:
		p.loaded = true
		if msg.err != nil {
			p.err = msg.err
			p.SetSize(p.w, p.h)
			return errCmd("load host "+p.host.AgentID(), msg.err)
		}
		if p.err != nil {
			p.err = nil
			p.s.resolved("load host " + p.host.AgentID())
		}
		p.fresh.at = p.s.now()
		p.found = len(msg.hosts) > 0
		if p.found {
			p.v = msg.hosts[0]
		}
		p.SetSize(p.w, p.h)
		return nil
	case tea.KeyMsg:
		if ok, cmd := p.tb.key(k, msg, len(hostProcCols())); ok {
			p.SetSize(p.w, p.h) // the table is drawn again filtered or sorted
			return cmd
		}
		switch {
		case keyIs(msg, k.Back): // a filter to clear (consumesBack)
			p.tb.filter.clear()
			p.SetSize(p.w, p.h)
			return nil
		case keyIs(msg, k.Reload):
			return p.load()
		case keyIs(msg, k.Op):
			return p.s.openOp(p, nil)
		case keyIs(msg, k.Logs) && p.found:
			on := make([]procOn, 0, len(p.v.Procs))
			for _, pv := range p.v.Procs {
				on = append(on, procOn{pv.Key, p.host})
			}
			return p.s.openLogs(on)
		}
	}
	return p.textView.Update(msg)
}

// opTarget is every process of the host.
func (p *hostPage) opTarget() (target, bool) {
	if !p.loaded || !p.found {
		p.s.notReady("the host")
		return target{}, false
	}
	nss, procs := map[string]bool{}, map[string]bool{}
	for _, pv := range p.v.Procs {
		ns, name, _ := model.SplitKey(pv.Key)
		nss[ns], procs[name] = true, true
	}
	if len(procs) == 0 {
		p.s.post(flashMsg{"no process is deployed on " + p.host.AgentID()})
		return target{}, false
	}
	return target{sel: backend.Selector{Hosts: []model.Host{p.host}}, hosts: 1, procs: sortedKeys(procs), nsAll: sortedKeys(nss)}, true
}

func (p *hostPage) content() string {
	t := p.s.theme
	kv := func(k, val string) string { return t.Muted.Render(fmt.Sprintf("%-10s", k)) + " " + val + "\n" }
	var b strings.Builder
	switch {
	case p.err != nil && !p.found:
		return loadFailed(p.s, "host "+p.host.AgentID(), p.err, p.w)
	case !p.found && !p.loaded:
		return t.Muted.Render("loading " + p.host.AgentID() + "…")
	case !p.found:
		return t.Warn.Render("No host " + p.host.AgentID() + " is known: check the cloud area and the IP (cloud:ip).")
	}
	if !p.loaded {
		b.WriteString(t.Muted.Render("loading every process of the host…") + "\n")
	}
	v := p.v
	ag := agentGlyph(v.State)
	b.WriteString(kv("host", v.Host.AgentID()))
	b.WriteString(kv("agent", ag.style(t).Render(ag.text())))
	if v.AgentID != "" {
		b.WriteString(kv("agent id", v.AgentID))
	}
	b.WriteString(kv("version", orDash(v.Version)))
	hb := "-"
	if v.LastSeen > 0 {
		at := time.Unix(v.LastSeen, 0)
		hb = at.UTC().Format("2006-01-02 15:04:05Z")
		if !p.s.static {
			hb += fmt.Sprintf(" (%s ago)", fmtDuration(p.s.now().Sub(at).Truncate(time.Second)))
		}
	}
	b.WriteString(kv("heartbeat", hb))
	b.WriteString(kv("labels", orDash(strings.Join(model.SortedLabels(v.Labels), " "))))
	b.WriteString("\n" + p.procTable() + "\n")
	var evs []model.Event
	for i := len(p.s.events) - 1; i >= 0 && len(evs) < 20; i-- {
		if p.s.events[i].Host == p.host {
			evs = append(evs, p.s.events[i])
		}
	}
	b.WriteString("\n" + t.Title.Render(fmt.Sprintf("Recent events (%d)", len(evs))) + "\n")
	if len(evs) == 0 {
		b.WriteString(t.Muted.Render("None since the console started.") + "\n")
	}
	for _, e := range evs {
		g := eventGlyph(e.Kind)
		b.WriteString(e.Time.Local().Format("15:04:05") + " " + g.style(t).Render(g.text()) + " " + e.ProcKey + " " + oneLine(e.Message) + "\n")
	}
	return b.String()
}

// procTable is the processes' title line (or the filter being typed),
// the header with the sort shown, and a row a process shown (its
// message under it).
func (p *hostPage) procTable() string {
	t, v := p.s.theme, p.v
	p.tb.rebuild(hostProcCols(), len(v.Procs), p.procCells) // the titles a filter names, unmarked
	cols := p.tb.sort.mark(hostProcCols())
	var b strings.Builder
	if p.tb.filter.typing {
		b.WriteString(p.tb.filter.input.View() + "\n")
	} else {
		b.WriteString(t.Title.Render(fmt.Sprintf("Processes (%d, every namespace)", len(v.Procs))) + t.Muted.Render(p.tb.info(t, cols, len(v.Procs))) + "\n")
	}
	if len(v.Procs) == 0 {
		return b.String() + t.Muted.Render("No process is deployed here.") + "\n"
	}
	wd := layout(cols, max(p.w-1, 20)) // the text view wraps at w-1
	b.WriteString(header(t, cols, wd) + "\n")
	if len(p.tb.shown) == 0 {
		b.WriteString(t.Muted.Render("  No process matches the filter (esc clears it).") + "\n")
	}
	for _, i := range p.tb.shown {
		c := p.procCells(i)
		g := procGlyph(v.Procs[i].Status.State)
		c[1] = g.text()
		cells := make([]string, len(c))
		for j := range c {
			cells[j] = cell(c[j], wd[j], cols[j].right)
		}
		st := g.style(t)
		b.WriteString(renderRow(t, false, false, cells, []*lipgloss.Style{nil, &st}) + "\n")
		if m := v.Procs[i].Status.Message; m != "" {
			b.WriteString("    " + t.Muted.Render(oneLine(m)) + "\n")
		}
	}
	return b.String()
}

// findPage asks for a host (cloud:ip, or an IP in cloud 0) and opens it.
type findPage struct {
	s     *shared
	id    int
	input textinput.Model
	err   string
	w, h  int
}

func newFindPage(s *shared) *findPage {
	in := textinput.New()
	in.Prompt = "host: "
	in.Placeholder = "cloud:ip, or an IP in cloud area 0"
	in.CharLimit = 64
	in.Focus()
	return &findPage{s: s, id: s.newID(), input: in}
}

func (p *findPage) ID() int          { return p.id }
func (p *findPage) Title() string    { return "find host" }
func (p *findPage) Capturing() bool  { return true }
func (p *findPage) Close()           {}
func (p *findPage) Init() tea.Cmd    { return textinput.Blink }
func (p *findPage) Resume() tea.Cmd  { return nil }
func (p *findPage) SetSize(w, h int) { p.w, p.h = w, h; p.input.Width = max(w-10, 10) }

func (p *findPage) Help() keyHelp {
	open := p.s.keys.Open
	open.SetHelp(open.Help().Key, "open the host")
	back := p.s.keys.Back
	return keyHelp{short: []binding{open, back}, full: [][]binding{{open, back}}}
}

func (p *findPage) Update(msg tea.Msg) tea.Cmd {
	km, ok := msg.(tea.KeyMsg)
	if !ok {
		var cmd tea.Cmd
		p.input, cmd = p.input.Update(msg)
		return cmd
	}
	switch km.Type {
	case tea.KeyEsc:
		return p.s.post(popMsg{})
	case tea.KeyEnter:
		h, err := parseHostArg(p.input.Value())
		if err != nil {
			p.err = err.Error()
			return nil
		}
		return p.s.post(replaceMsg{newHostPage(p.s, h, nil)})
	}
	p.err = ""
	var cmd tea.Cmd
	p.input, cmd = p.input.Update(km)
	return cmd
}

// isCloud reports whether s starts with a cloud area number and a colon.
func isCloud(s string) bool {
	c, _, ok := strings.Cut(s, ":")
	return ok && c != "" && strings.Trim(c, "0123456789") == ""
}

func (p *findPage) View() string {
	t := p.s.theme
	out := t.Title.Render("Open a host") + "\n\n" + p.input.View() + "\n"
	if p.err != "" {
		out += "\n" + t.Error.Render(p.err)
	}
	return out + "\n" + t.Muted.Render("e.g. 0:10.0.0.12 or 10.0.0.12 · enter opens it · esc goes back")
}
