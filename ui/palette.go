package ui

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/sahilm/fuzzy"

	"gseproc/backend"
	"gseproc/model"
)

// The `:` command palette finds anything by name, fuzzily: a screen
// (tasks, events, messages), a namespace, a label of a namespace, a recent
// task, an op to run on the current screen's target, a host by address,
// and the commands other parts of gseproc register (the simulator's
// controls in the demo). It is a layer like the confirmation dialog: it
// takes keys before the screen under it, and a confirmation takes keys
// before it. Nothing it does skips a confirmation: an op opens the op
// picker pointed at that op.

// Command is one entry of the command palette, added with Options.Commands
// or Model.Register.
type Command struct {
	// Name is what the operator types: lower-case words ("sim latency").
	// A name registered twice replaces the first.
	Name string
	// Help says in one line what the command does.
	Help string
	// Arg names the argument when the command takes one ("MS", "PERCENT"):
	// the palette shows it, and passes what is typed after the name.
	Arg string
	// Changes marks a command that changes something: it is not offered
	// when the console is read-only.
	Changes bool
	// Run is called in Update with the argument (trimmed, "" when Arg is
	// empty). Any I/O goes inside the returned command, whose message may be
	// a Notice or a Failure (or nil).
	Run func(arg string) tea.Cmd
}

// Notice is a message a Command's tea.Cmd returns to say what it did: the
// status bar shows it and the message log keeps it.
type Notice string

// Failure is a message a Command's tea.Cmd returns when it failed: it is
// shown whole in the error banner and kept in the message log.
type Failure struct {
	What string // what was being done, e.g. "set the fleet's latency"
	Err  error
}

// Register adds commands to the palette (before or while the console runs;
// call it from the goroutine that runs the program, or before Run).
func (m *Model) Register(cmds ...Command) {
	for _, c := range cmds {
		c.Name = strings.Join(strings.Fields(strings.ToLower(c.Name)), " ")
		if c.Name == "" || c.Run == nil {
			continue
		}
		m.commands = slices.DeleteFunc(m.commands, func(x Command) bool { return x.Name == c.Name })
		m.commands = append(m.commands, c)
	}
}

// palKind groups the palette's entries (shown in its first column).
type palKind string

const (
	kindScreen  palKind = "screen"
	kindAction  palKind = "action"
	kindOp      palKind = "op"
	kindNS      palKind = "namespace"
	kindLabel   palKind = "label"
	kindTask    palKind = "task"
	kindCommand palKind = "command"
	kindProcess palKind = "process"
)

type palEntry struct {
	Command
	kind palKind
}

type palMatch struct {
	e   *palEntry
	arg string // what was typed after an argument command's name
	idx []int  // matched positions in e.Name (for highlighting)
}

// palette is the open palette's state.
type palette struct {
	seq     int // the load this palette waits for
	input   textinput.Model
	fixed   []palEntry // screens, actions, ops, registered commands
	loaded  []palEntry // namespaces, labels, recent tasks
	loading bool
	loadErr error
	matches []palMatch
	cursor  int
	note    string // why enter did nothing
}

// paletteLoadedMsg carries the namespaces and recent tasks the palette lists.
type paletteLoadedMsg struct {
	seq   int
	nss   []backend.NamespaceSummary
	tasks []model.Task
	err   error
}

// chooseMsg opens the palette on a fixed list of choices only, e.g. which
// of a host's processes to edit.
type chooseMsg struct {
	prompt string
	kind   palKind
	cmds   []Command
}

// openChooser opens the palette on msg's choices.
func (m *Model) openChooser(msg chooseMsg) {
	in := textinput.New()
	in.Prompt = "? "
	in.Placeholder = msg.prompt
	in.CharLimit = 200
	in.Focus()
	m.paletteSeq++
	p := &palette{seq: m.paletteSeq, input: in}
	for _, c := range msg.cmds {
		p.fixed = append(p.fixed, palEntry{Command: c, kind: msg.kind})
	}
	p.match()
	m.palette = p
}

// paletteRows is how many entries the palette shows at most.
const paletteRows = 10

// openPalette opens the palette and loads what it lists from the backend.
func (m *Model) openPalette() tea.Cmd {
	in := textinput.New()
	in.Prompt = ":"
	in.Placeholder = "screen, namespace, label, task, op, host… (fuzzy)"
	in.CharLimit = 200
	in.Focus()
	m.paletteSeq++
	p := &palette{seq: m.paletteSeq, input: in, fixed: m.fixedEntries(), loading: true}
	p.match()
	m.palette = p
	ctx, be, seq, n := m.s.ctx, m.s.be, p.seq, m.s.cfg.RecentTasks
	if n <= 0 {
		n = 50
	}
	return func() tea.Msg {
		nss, err := be.Namespaces(ctx)
		if err != nil {
			return paletteLoadedMsg{seq: seq, err: fmt.Errorf("list namespaces: %w", err)}
		}
		ts, err := be.Tasks(ctx, n)
		if err != nil {
			return paletteLoadedMsg{seq: seq, nss: nss, err: fmt.Errorf("list tasks: %w", err)}
		}
		return paletteLoadedMsg{seq: seq, nss: nss, tasks: ts}
	}
}

// fixedEntries are the entries known without asking the backend.
func (m *Model) fixedEntries() []palEntry {
	s := m.s
	var out []palEntry
	add := func(kind palKind, c Command) {
		if c.Changes && s.readOnly {
			return
		}
		out = append(out, palEntry{Command: c, kind: kind})
	}
	add(kindScreen, Command{Name: "namespaces", Help: "every namespace (the first screen)", Run: func(string) tea.Cmd { return m.goTo() }})
	add(kindScreen, Command{Name: "tasks", Help: "recent tasks", Run: func(string) tea.Cmd { return m.openTasks() }})
	add(kindScreen, Command{Name: "events", Help: "host events (restarts, give-ups, limit breaches)", Run: func(string) tea.Cmd { return m.openEvents() }})
	add(kindScreen, Command{Name: "map", Help: "the fleet map of this screen's hosts (the whole fleet from the top)", Run: func(string) tea.Cmd { return m.openMap() }})
	add(kindScreen, Command{Name: "messages", Help: "every error, warning and notice shown", Run: func(string) tea.Cmd { return m.openMessages() }})
	add(kindScreen, Command{Name: "help", Help: "every key of this screen", Run: func(string) tea.Cmd { m.showHelp = true; return nil }})
	add(kindAction, Command{Name: "host", Arg: "CLOUD:IP", Help: "open a host (an IP alone is in cloud area 0)", Run: func(arg string) tea.Cmd {
		h, err := parseHostArg(arg)
		if err != nil {
			return s.post(flashMsg{"host: " + err.Error()})
		}
		return m.push(newHostPage(s, h, nil))
	}})
	add(kindAction, Command{Name: "new process", Help: "define a process in a form", Changes: true, Run: func(string) tea.Cmd {
		return openForm(s, newDef(""), true)
	}})
	add(kindAction, Command{Name: "quit", Help: "leave the console (asks while tasks run in the embedded engine)", Run: func(string) tea.Cmd { return m.askQuit() }})
	for _, op := range model.AllOps() {
		add(kindOp, Command{Name: "op " + op.String(), Help: op.Describe(), Changes: op.Mutating(), Run: func(string) tea.Cmd {
			o, ok := m.top().(operable)
			if !ok {
				return s.post(flashMsg{"op " + op.String() + ": open a namespace, a label's hosts or a host first"})
			}
			return s.openOp(o, &op)
		}})
	}
	for _, c := range m.commands {
		add(kindCommand, c)
	}
	return out
}

// loadedEntries are the namespaces, their labels and the recent tasks.
func (m *Model) loadedEntries(nss []backend.NamespaceSummary, tasks []model.Task) []palEntry {
	s := m.s
	var out []palEntry
	nss = slices.Clone(nss)
	sort.Slice(nss, func(i, j int) bool { return nss[i].Name < nss[j].Name })
	for _, ns := range nss {
		out = append(out, palEntry{kind: kindNS, Command: Command{Name: "ns " + ns.Name,
			Help: fmt.Sprintf("%s on %s", plural(ns.Processes, "process"), plural(ns.Hosts, "host")),
			Run:  func(string) tea.Cmd { return m.goTo(newLabelsPage(s, ns)) }}})
	}
	for _, ns := range nss {
		keys := make([]string, 0, len(ns.Labels))
		for k := range ns.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			vals := slices.Clone(ns.Labels[k])
			sort.Strings(vals)
			for _, v := range vals {
				q := backend.HostQuery{Namespace: ns.Name, Labels: map[string]string{k: v}}
				out = append(out, palEntry{kind: kindLabel, Command: Command{Name: "label " + ns.Name + " " + k + "=" + v,
					Help: "the hosts of " + ns.Name + " labelled " + k + "=" + v,
					Run:  func(string) tea.Cmd { return m.goTo(newLabelsPage(s, ns), newHostsPage(s, q)) }}})
			}
		}
	}
	for _, t := range tasks {
		out = append(out, palEntry{kind: kindTask, Command: Command{Name: "task " + t.ID,
			Help: fmt.Sprintf("%s %s %s · %s", t.Created.Local().Format("15:04:05"), t.Op, taskGlyph(t.Status).word, taskSelection(t)),
			Run:  func(string) tea.Cmd { return m.push(newWatchPage(s, t)) }}})
	}
	return out
}

// match recomputes the matches of the typed text: an argument command
// typed whole and followed by a space first, then fuzzy matches of the
// names, best first (everything, in order, when nothing is typed).
func (p *palette) match() {
	text := strings.ToLower(strings.TrimLeft(p.input.Value(), " "))
	all := append(slices.Clip(p.fixed), p.loaded...)
	p.matches = p.matches[:0]
	p.cursor = 0
	p.note = ""
	for i := range all {
		e := &all[i]
		if e.Arg != "" && strings.HasPrefix(text, e.Name+" ") {
			p.matches = append(p.matches, palMatch{e: e, arg: strings.TrimSpace(p.input.Value()[len(p.input.Value())-len(text)+len(e.Name):])})
		}
	}
	if len(p.matches) > 0 {
		return
	}
	q := strings.TrimSpace(text)
	if q == "" {
		for i := range all {
			p.matches = append(p.matches, palMatch{e: &all[i]})
		}
		return
	}
	for _, r := range fuzzy.FindFrom(q, palSource(all)) {
		p.matches = append(p.matches, palMatch{e: &all[r.Index], idx: r.MatchedIndexes})
	}
}

type palSource []palEntry

func (s palSource) String(i int) string { return s[i].Name }
func (s palSource) Len() int            { return len(s) }

// selected is the entry under the cursor.
func (p *palette) selected() (palMatch, bool) {
	if p.cursor < 0 || p.cursor >= len(p.matches) {
		return palMatch{}, false
	}
	return p.matches[p.cursor], true
}

// complete puts the selected entry's name in the input (with a space
// after it when it takes an argument).
func (p *palette) complete() {
	mt, ok := p.selected()
	if !ok || mt.arg != "" {
		return
	}
	v := mt.e.Name
	if mt.e.Arg != "" {
		v += " "
	}
	p.input.SetValue(v)
	p.input.CursorEnd()
	p.match()
}

// paletteKey handles a key while the palette is open.
func (m *Model) paletteKey(msg tea.KeyMsg) tea.Cmd {
	p := m.palette
	switch msg.Type {
	case tea.KeyEsc:
		m.palette = nil
		return nil
	case tea.KeyUp, tea.KeyCtrlP:
		p.cursor = max(p.cursor-1, 0)
		return nil
	case tea.KeyDown, tea.KeyCtrlN:
		p.cursor = min(p.cursor+1, max(len(p.matches)-1, 0))
		return nil
	case tea.KeyTab:
		p.complete()
		return nil
	case tea.KeyEnter:
		mt, ok := p.selected()
		switch {
		case p.loading && (!ok || !p.exact(mt)):
			// Typed ahead of the list: what matches now may not be what
			// matches once namespaces and tasks are there.
			p.note = "still loading namespaces and tasks: press enter again when they are listed"
			return nil
		case !ok:
			p.note = "nothing matches: esc closes"
			return nil
		case mt.e.Arg != "" && mt.arg == "":
			p.complete() // the argument comes next
			return nil
		}
		m.palette = nil
		return mt.e.Run(mt.arg)
	}
	var cmd tea.Cmd
	p.input, cmd = p.input.Update(msg)
	p.match()
	return cmd
}

// exact reports whether the typed text names mt's entry whole.
func (p *palette) exact(mt palMatch) bool {
	return mt.arg != "" || strings.EqualFold(strings.TrimSpace(p.input.Value()), mt.e.Name)
}

// paletteLoaded adds the namespaces and tasks to the open palette.
func (m *Model) paletteLoaded(msg paletteLoadedMsg) {
	p := m.palette
	if p == nil || p.seq != msg.seq {
		return // closed, or an older palette's answer
	}
	p.loading = false
	p.loadErr = msg.err
	if msg.err != nil {
		m.s.addLog(levelError, "list the palette's namespaces and tasks", msg.err.Error())
	}
	cur, _ := p.selected()
	p.loaded = m.loadedEntries(msg.nss, msg.tasks)
	p.match()
	if cur.e != nil {
		for i, mt := range p.matches {
			if mt.e.Name == cur.e.Name {
				p.cursor = i
				break
			}
		}
	}
}

// view draws the palette in a box w cells wide at most.
func (p *palette) view(s *shared, w, h int) string {
	t := s.theme
	width := min(max(w-8, 40), 90)
	inner := width - 4
	p.input.Width = inner - 2
	var b strings.Builder
	b.WriteString(p.input.View() + "\n")
	// The frame, margin, input and count take 6 lines; a note one more.
	rows := min(paletteRows, max(h-6, 1))
	if p.note != "" {
		rows = max(rows-1, 1)
	}
	start := 0
	if p.cursor >= rows {
		start = p.cursor - rows + 1
	}
	end := min(start+rows, len(p.matches))
	label := func(mt palMatch) string {
		switch {
		case mt.arg != "":
			return mt.e.Name + " " + mt.arg
		case mt.e.Arg != "":
			return mt.e.Name + " " + mt.e.Arg
		}
		return mt.e.Name
	}
	kindW, nameW := 9, 0
	for _, mt := range p.matches[start:end] {
		nameW = max(nameW, ansi.StringWidth(label(mt)))
	}
	nameW = min(nameW, max(inner*3/5, 16), inner-kindW-4)
	for i := start; i < end; i++ {
		mt := p.matches[i]
		name := ansi.Truncate(label(mt), nameW, "…")
		nameCell := highlight(t.Title.Render, name, mt.idx) + strings.Repeat(" ", max(nameW-ansi.StringWidth(name), 0))
		help := ansi.Truncate(mt.e.Help, max(inner-kindW-nameW-4, 0), "…")
		line := t.Muted.Render(fmt.Sprintf("%-*s", kindW, mt.e.kind)) + " " + nameCell + "  " + t.Muted.Render(help)
		if i == p.cursor {
			line = t.Selected.Render("›") + " " + line
		} else {
			line = "  " + line
		}
		b.WriteString(line + "\n")
	}
	if len(p.matches) == 0 {
		b.WriteString(t.Muted.Render("  nothing matches") + "\n")
	}
	status := fmt.Sprintf("%d of %d", len(p.matches), len(p.fixed)+len(p.loaded))
	switch {
	case p.loading:
		status += " · loading namespaces and tasks…"
	case p.loadErr != nil:
		status += " · " + t.Error.Render("could not list namespaces or tasks (L shows why)")
	}
	b.WriteString(t.Muted.Render(status))
	if p.note != "" {
		b.WriteString("\n" + t.Warn.Render(ansi.Truncate(p.note, inner, "…")))
	}
	return t.Dialog.Width(width).Render(b.String())
}

// highlight renders the runes of s at idx (byte offsets of matched runes)
// with style.
func highlight(style func(...string) string, s string, idx []int) string {
	if len(idx) == 0 {
		return s
	}
	at := make(map[int]bool, len(idx))
	for _, i := range idx {
		at[i] = true
	}
	var b strings.Builder
	for i, r := range s {
		if at[i] {
			b.WriteString(style(string(r)))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// parseHostArg reads a host as cloud:ip, or an IP alone in cloud area 0.
func parseHostArg(text string) (model.Host, error) {
	text = strings.TrimSpace(text)
	if !isCloud(text) {
		text = "0:" + text
	}
	h, err := model.ParseAgentID(text)
	if err != nil {
		return model.Host{}, err
	}
	var v model.Validator
	h.Validate(&v, "host")
	return h, v.Err()
}
