// Package ui is gseproc's terminal console: a bubbletea program over a
// backend.Backend (the embedded engine or a remote server).
//
// One root Model holds the shared context (window size, theme, keys,
// backend, config, read-only) and a stack of pages: namespaces -> labels and
// processes -> hosts, the op picker, a task's live results, one result,
// recent tasks, host events, the process form and its review. A dialog layer
// (the confirmation) takes keys before the `:` command palette (palette.go),
// which takes them before any page. Every backend call runs in
// a tea.Cmd; live results and events are drained in batches by commands that
// block on their channel, so nothing ticks while nothing moves, and a page's
// subscription is cancelled when it closes.
package ui

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/model"
	"gseproc/theme"
)

// Minimum terminal size; below it the console says so instead of drawing.
const (
	MinWidth  = 64
	MinHeight = 16
)

// Options configure the console. Config is the [console] section as
// config.Load filled it (its defaults are there, once): New refuses one
// that does not validate instead of defaulting its fields again. The other
// fields are the console's own, not in the config: their defaults are
// here, and only here.
type Options struct {
	Backend backend.Backend
	Config  config.ConsoleConfig
	// Theme defaults to Config.Theme on lipgloss's default renderer.
	Theme *theme.Theme
	// ReadOnly disables changes (in addition to Config.ReadOnly and the
	// backend's own read-only flag).
	ReadOnly bool
	// Namespace, Labels and Op open the console straight onto a namespace,
	// a label selection and the op picker (with Op chosen).
	Namespace string
	Labels    map[string]string
	Op        *model.OpType
	// Operator is recorded on tasks (required: the caller knows who it is,
	// e.g. the SSH key's operator or the local login name).
	Operator string
	// Now is the clock (default time.Now); Guard is how long a new dialog
	// ignores keys (default 300ms).
	Now   func() time.Time
	Guard time.Duration
	// Static turns live clocks off (the elapsed-time tick), for golden files.
	Static bool
	// Notice is shown in the status bar at start; Warnings (e.g. the
	// config's unknown keys) go to the message log, the status bar says
	// how many there are.
	Notice   string
	Warnings []string
	// InfoEvery is how often the status bar asks the backend for its
	// counts (default 5s; none when Static).
	InfoEvery time.Duration
	// BatchMax and BatchWindow bound one batch of live results (default 2000, 15ms).
	BatchMax    int
	BatchWindow time.Duration
	// Commands are added to the `:` command palette (see Register).
	Commands []Command
	// Copy puts text on the clipboard of the terminal the console draws on
	// (termenv.Output.Copy: an OSC 52 sequence); c uses it. It runs in a
	// command, never in Update. Nil: copying says it cannot.
	Copy func(text string)
	// ReleaseMemory gives the process's unused memory back to the system
	// (debug.FreeOSMemory); a watch calls it, in a command, once the live
	// results of a task over releaseMin targets have ended. Nil: never.
	// The embedded console sets it: its heap grows through an op over
	// 100,000 hosts well past what it holds after (the engine's run and
	// the results streamed), and the runtime gives the rest back slowly.
	ReleaseMemory func()
}

// Model is the root bubbletea model.
type Model struct {
	s        *shared
	stack    []page
	dialog   *dialog
	showHelp bool
	info     backend.Info
	infoErr  error     // the last Info call failed: the counts are not shown
	infoAt   time.Time // when Info last answered
	infoSeen int       // the seq of the Info answer shown
	banner   *logEntry // the latest error, shown whole until dismissed
	flash    string
	help     help.Model
	cancel   context.CancelFunc
	guard    *guarded

	palette    *palette  // the open command palette
	paletteSeq int       // palettes opened (answers to an older one are dropped)
	commands   []Command // registered palette commands

	infoEvery time.Duration
	crumbCut  int // the stack's first titles the breadcrumb drew as "…" (where a click finds them)
}

// infoTickMsg asks the backend for its counts again.
type infoTickMsg struct{}

type recentEventsMsg struct{ events []model.Event }

// quitMsg quits after the quit confirmation.
type quitMsg struct{}

// quitCheckMsg is the running-task count asked for when q was pressed.
type quitCheckMsg struct {
	info backend.Info
	err  error
}

type eventsSubMsg struct {
	ch  <-chan model.Event
	err error
}

// New builds the console.
func New(ctx context.Context, o Options) (*Model, error) {
	if o.Backend == nil {
		return nil, fmt.Errorf("console: no backend")
	}
	if o.Operator == "" {
		return nil, fmt.Errorf("console: no operator (the name recorded on tasks)")
	}
	if err := o.Config.Validate(); err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	keys, keyWarnings, err := NewKeyMap(o.Config.Keys)
	if err != nil {
		return nil, err
	}
	o.Warnings = append(o.Warnings, keyWarnings...)
	th := o.Theme
	if th == nil {
		if th, err = theme.New(o.Config.Theme, nil, false); err != nil {
			return nil, err
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Guard == 0 {
		o.Guard = 300 * time.Millisecond
	}
	if o.BatchMax <= 0 {
		o.BatchMax = 2000
	}
	if o.BatchWindow == 0 {
		o.BatchWindow = 15 * time.Millisecond
	}
	if o.InfoEvery <= 0 {
		o.InfoEvery = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	g := guard(o.Backend)
	s := &shared{
		ctx: ctx, be: g, theme: th, keys: keys, cfg: o.Config, readOnly: o.ReadOnly || o.Config.ReadOnly,
		operator: o.Operator, now: o.Now, guard: o.Guard, copy: o.Copy, release: o.ReleaseMemory, batchMax: o.BatchMax, batchWin: o.BatchWindow, static: o.Static,
		width: 80, height: 24,
	}
	h := help.New()
	h.ShortSeparator = " · "
	h.Styles.ShortKey, h.Styles.ShortDesc, h.Styles.ShortSeparator = th.HelpKey, th.HelpDesc, th.HelpSep
	h.Styles.FullKey, h.Styles.FullDesc, h.Styles.FullSeparator = th.HelpKey, th.HelpDesc, th.HelpSep
	h.Styles.Ellipsis = th.HelpSep
	m := &Model{s: s, help: h, cancel: cancel, guard: g, flash: o.Notice, infoEvery: o.InfoEvery}
	if o.Notice != "" {
		s.addLog(levelNotice, "", o.Notice)
	}
	for _, w := range o.Warnings {
		s.addLog(levelWarning, "", w)
	}
	if n := len(o.Warnings); n > 0 && m.flash == "" {
		m.flash = fmt.Sprintf("%s at start: %s shows %s", plural(n, "warning"), keys.Messages.Help().Key, map[bool]string{true: "it", false: "them"}[n == 1])
	}
	m.Register(simCommands(s)...)
	m.Register(o.Commands...)
	m.stack = []page{newNSPage(s)}
	if o.Namespace != "" {
		m.stack = append(m.stack, newLabelsPage(s, backend.NamespaceSummary{Name: o.Namespace}))
		if len(o.Labels) > 0 || o.Op != nil {
			m.stack = append(m.stack, newHostsPage(s, backend.HostQuery{Namespace: o.Namespace, Labels: o.Labels}))
		}
		if o.Op != nil {
			op := newOpPage(s, target{sel: backend.Selector{Namespace: o.Namespace, Labels: o.Labels}})
			op.point(*o.Op)
			m.stack = append(m.stack, op)
		}
	}
	return m, nil
}

// Close cancels every subscription and waits for the backend calls in
// flight; later calls fail. The backend can be closed once it returns.
func (m *Model) Close() {
	for _, p := range m.stack {
		p.Close()
	}
	m.cancel()
	m.guard.close()
}

// Init loads every page of the initial stack and subscribes to host events.
func (m *Model) Init() tea.Cmd {
	cmds := []tea.Cmd{m.s.refreshInfo(), m.subscribeEvents(), m.infoTick()}
	for _, p := range m.stack {
		cmds = append(cmds, p.Init())
	}
	return tea.Batch(cmds...)
}

func (m *Model) subscribeEvents() tea.Cmd {
	ctx, be := m.s.ctx, m.s.be
	return tea.Batch(
		func() tea.Msg {
			evs, err := be.RecentEvents(ctx, 50)
			if err != nil {
				return errMsg{"recent events", err}
			}
			return recentEventsMsg{evs}
		},
		func() tea.Msg {
			ch, err := be.Events(ctx)
			return eventsSubMsg{ch: ch, err: err}
		})
}

// infoTick schedules the next Info call (the status bar's counts and
// whether the backend answers at all).
func (m *Model) infoTick() tea.Cmd {
	if m.s.static {
		return nil
	}
	return tea.Tick(m.infoEvery, func(time.Time) tea.Msg { return infoTickMsg{} })
}

func (m *Model) top() page { return m.stack[len(m.stack)-1] }

func (m *Model) bodySize() (int, int) {
	return m.s.width, max(m.s.height-4-len(m.bannerLines()), 1)
}

func (m *Model) bannerLines() []string {
	if m.banner == nil || m.tooSmall() {
		return nil
	}
	return banner(m.s.theme, *m.banner, m.s.keys, m.s.width)
}

// setBanner shows e (nil: none) and gives the pages the height left.
func (m *Model) setBanner(e *logEntry) {
	m.banner = e
	m.resize()
}

func (m *Model) resize() {
	w, h := m.bodySize()
	for _, p := range m.stack {
		p.SetSize(w, h)
	}
	m.help.Width = m.s.width
}

func (m *Model) tooSmall() bool { return m.s.width < MinWidth || m.s.height < MinHeight }

// maxStack bounds the screens stacked: past it the oldest above the
// namespaces go (closed), so that going in and out by other ways than esc
// (M then enter, from map to host and back) never stacks without end.
const maxStack = 12

func (m *Model) push(p page) tea.Cmd {
	p.SetSize(m.bodySize())
	if len(m.stack) >= maxStack {
		m.stack[1].Close()
		m.stack = append(m.stack[:1], m.stack[2:]...)
	}
	m.stack = append(m.stack, p)
	return p.Init()
}

// jump goes back to the page of the stack that is (closing the ones
// above it), or opens a new one: t, E and L never stack a second copy,
// so the stack stays as deep as the places the operator went.
func (m *Model) jump(is func(page) bool, open func() page) tea.Cmd {
	for i := len(m.stack) - 1; i >= 0; i-- {
		if !is(m.stack[i]) {
			continue
		}
		if i == len(m.stack)-1 {
			return nil
		}
		for _, p := range m.stack[i+1:] {
			p.Close()
		}
		m.stack = m.stack[:i+1]
		return m.top().Resume()
	}
	return m.push(open())
}

// goTo closes every page above the namespaces and opens ps on it.
func (m *Model) goTo(ps ...page) tea.Cmd {
	for _, p := range m.stack[1:] {
		p.Close()
	}
	m.stack = m.stack[:1]
	cmds := []tea.Cmd{m.top().Resume()}
	for _, p := range ps {
		cmds = append(cmds, m.push(p))
	}
	return tea.Batch(cmds...)
}

func (m *Model) openTasks() tea.Cmd {
	return m.jump(func(p page) bool { _, ok := p.(*tasksPage); return ok }, func() page { return newTasksPage(m.s) })
}

func (m *Model) openEvents() tea.Cmd {
	return m.jump(func(p page) bool { _, ok := p.(*eventsPage); return ok }, func() page { return newEventsPage(m.s) })
}

// openMap opens the fleet map of the screen's selection: a hosts table's
// query, a namespace's hosts, else the whole fleet.
func (m *Model) openMap() tea.Cmd {
	q := backend.HostQuery{}
	switch p := m.top().(type) {
	case *fleetMapPage:
		return nil
	case *hostsPage:
		q = p.q
	case *labelsPage:
		q.Namespace = p.ns.Name
	}
	// The map of the same hosts further down is gone back to (a host
	// opened from a map, then M, stacked a map and a host each time).
	return m.jump(func(p page) bool { mp, ok := p.(*fleetMapPage); return ok && sameHostQuery(mp.q, q) },
		func() page { return newFleetMapPage(m.s, q) })
}

func sameHostQuery(a, b backend.HostQuery) bool {
	return a.Namespace == b.Namespace && a.Name == b.Name && maps.Equal(a.Labels, b.Labels) && slices.Equal(a.Hosts, b.Hosts) &&
		slices.Equal(a.AgentIDs, b.AgentIDs) && a.Limit == b.Limit
}

func (m *Model) openMessages() tea.Cmd {
	return m.jump(func(p page) bool { _, ok := p.(*messagesPage); return ok }, func() page { return newMessagesPage(m.s) })
}

// askQuit quits, first asking when the embedded engine runs tasks that
// quitting would end (on a fresh count: the status bar's may be older than
// the task's end).
func (m *Model) askQuit() tea.Cmd {
	if m.info.Mode == "embedded" && m.info.Running > 0 {
		ctx, be := m.s.ctx, m.s.be
		return func() tea.Msg {
			info, err := be.Info(ctx)
			return quitCheckMsg{info: info, err: err}
		}
	}
	return m.quit()
}

func (m *Model) pop() tea.Cmd {
	if len(m.stack) <= 1 {
		return nil
	}
	m.top().Close()
	m.stack = m.stack[:len(m.stack)-1]
	return m.top().Resume()
}

// Update routes messages: keys to the dialog first, then global keys, then
// the top page; page messages to their page by id. Messages pages post
// (navigation, dialogs) are handled before it returns.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	cmds := []tea.Cmd{m.handle(msg)}
	for i := 0; len(m.s.pending) > 0 && i < 100; i++ {
		next := m.s.pending[0]
		m.s.pending = m.s.pending[1:]
		cmds = append(cmds, m.handle(next))
	}
	m.s.pending = m.s.pending[:0]
	m.s.topID = m.top().ID()
	return m, tea.Batch(cmds...)
}

func (m *Model) handle(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.s.width, m.s.height = msg.Width, msg.Height
		m.resize()
		return nil
	case tea.KeyMsg:
		return m.key(msg)
	case tea.MouseMsg:
		// Only with [console] mouse = true: the wheel scrolls like ↑/↓, a
		// click moves the cursor.
		if m.dialog != nil || m.palette != nil || m.tooSmall() || tea.MouseEvent(msg).Action != tea.MouseActionPress {
			return nil
		}
		switch msg.Button {
		case tea.MouseButtonWheelUp:
			return m.top().Update(tea.KeyMsg{Type: tea.KeyUp})
		case tea.MouseButtonWheelDown:
			return m.top().Update(tea.KeyMsg{Type: tea.KeyDown})
		case tea.MouseButtonLeft:
			if msg.Y == 0 {
				return m.clickCrumb(msg.X)
			}
			// A click on a row puts the cursor there (the first line is
			// the breadcrumb); in the hosts' selection column it selects.
			y := msg.Y - 1
			switch p := m.top().(type) {
			case interface{ click(x, y int) }:
				p.click(msg.X, y)
			case listed:
				p.listPtr().click(y)
			}
		}
		return nil
	case pageMsg:
		for _, p := range m.stack {
			if p.ID() == msg.pageID() {
				return p.Update(msg)
			}
		}
		return nil // its page has closed
	case pushMsg:
		return m.push(msg.p)
	case popMsg:
		return m.pop()
	case quitMsg:
		return m.quit()
	case quitCheckMsg:
		running := msg.info.Running
		if msg.err != nil {
			running = m.info.Running // not known better: ask
		} else {
			m.info.Running = running
		}
		if running == 0 {
			return m.quit()
		}
		quit := func() tea.Msg { return quitMsg{} }
		return m.handle(confirmMsg{newDialog("Quit?", []string{fmt.Sprintf("%s still running in the embedded engine; quitting stops them.",
			plural(running, "task"))}, "", "", true, quit)})
	case replaceMsg:
		m.top().Close()
		m.stack = m.stack[:len(m.stack)-1]
		return m.push(msg.p)
	case confirmMsg:
		msg.d.opened = m.s.now()
		m.dialog = msg.d
		return nil
	case taskStartedMsg:
		m.flash = "started " + msg.task.ID
		m.s.addLog(levelNotice, "", m.flash) // the id stays readable once the status bar moves on
		w := newWatchPage(m.s, msg.task)
		if op, ok := m.top().(*opPage); ok && op.ID() == msg.from {
			m.top().Close()
			m.stack = m.stack[:len(m.stack)-1]
		}
		return tea.Batch(m.push(w), m.s.refreshInfo())
	case errMsg:
		text := msg.err.Error()
		if isReadOnly(msg.err) {
			text = "refused, the backend is read-only"
		}
		e := m.s.addLog(levelError, msg.what, text)
		m.setBanner(&e)
		return nil
	case resolvedMsg:
		if m.banner != nil && m.banner.what == msg.what {
			m.setBanner(nil)
		}
		return nil
	case infoTickMsg:
		return tea.Batch(m.s.refreshInfo(), m.infoTick())
	case infoMsg:
		if msg.seq < m.infoSeen {
			return nil // an older call answered late
		}
		m.infoSeen = msg.seq
		m.info = msg.info
		m.infoAt = m.s.now()
		if msg.info.ReadOnly {
			m.s.readOnly = true
		}
		if m.infoErr != nil {
			m.infoErr = nil
			m.s.addLog(levelNotice, "", "the backend answers again")
			if m.banner != nil && m.banner.what == whatBackend {
				m.setBanner(nil)
			}
		}
		return nil
	case infoFailedMsg:
		if msg.seq < m.infoSeen {
			return nil
		}
		m.infoSeen = msg.seq
		// Reported once when the backend stops answering, not every tick.
		if m.infoErr == nil {
			e := m.s.addLog(levelError, whatBackend, msg.err.Error())
			m.setBanner(&e)
		}
		m.infoErr = msg.err
		return nil
	case flashMsg:
		m.flash = msg.text
		m.s.addLog(levelNotice, "", msg.text)
		return nil
	case Notice:
		return m.handle(flashMsg{string(msg)})
	case Failure:
		return m.handle(errMsg{msg.What, msg.Err})
	case chooseMsg:
		m.openChooser(msg)
		return nil
	case paletteLoadedMsg:
		m.paletteLoaded(msg)
		return nil
	case recentEventsMsg:
		m.addEvents(msg.events)
		if p, ok := m.top().(*eventsPage); ok {
			p.rebuild() // the history can come after the page opened (live events come through onEvents)
		}
		return nil
	case eventsSubMsg:
		if msg.err != nil {
			e := m.s.addLog(levelError, "subscribe to host events", msg.err.Error())
			m.setBanner(&e)
			return nil
		}
		m.s.eventsLive = true
		return m.s.drainEvents(msg.ch)
	case eventsMsg:
		m.addEvents(msg.events)
		var refresh tea.Cmd
		if ea, ok := m.top().(interface{ onEvents([]model.Event) tea.Cmd }); ok {
			refresh = ea.onEvents(msg.events)
		}
		if msg.closed {
			m.s.eventsLive = false
			return refresh
		}
		return tea.Batch(refresh, m.s.drainEvents(msg.ch))
	}
	// Anything else (cursor blinks, form internals) belongs to the top page.
	return m.top().Update(msg)
}

func (m *Model) addEvents(evs []model.Event) {
	for _, e := range evs {
		if !e.Time.IsZero() && !e.Time.After(m.s.lastEventSeen) && len(m.s.events) > 0 && containsEvent(m.s.events, e) {
			continue
		}
		m.s.events = append(m.s.events, e)
		if e.Time.After(m.s.lastEventSeen) {
			m.s.lastEventSeen = e.Time
		}
	}
	if n := len(m.s.events); n > maxEvents {
		m.s.events = append([]model.Event(nil), m.s.events[n-maxEvents:]...)
	}
}

func containsEvent(evs []model.Event, e model.Event) bool {
	for i := len(evs) - 1; i >= 0 && i >= len(evs)-100; i-- {
		x := evs[i]
		if x.Time.Equal(e.Time) && x.Host == e.Host && x.ProcKey == e.ProcKey && x.Kind == e.Kind && x.Message == e.Message {
			return true
		}
	}
	return false
}

// whatBackend is the banner's what when the backend stops answering.
const whatBackend = "reach the backend"

// backConsumer is a page that uses esc itself before it means "back".
type backConsumer interface{ consumesBack() bool }

func (p *hostsPage) consumesBack() bool { return p.filter.value() != "" }
func (p *watchPage) consumesBack() bool { return p.filter.value() != "" }

func (m *Model) key(msg tea.KeyMsg) tea.Cmd {
	// Keys typed quickly (or held down) can arrive as one message with
	// several runes; outside text inputs each one is a key of its own.
	if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 && !msg.Paste && (m.dialog != nil || !m.top().Capturing()) {
		var cmds []tea.Cmd
		for _, r := range msg.Runes {
			cmds = append(cmds, m.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: msg.Alt}))
		}
		return tea.Batch(cmds...)
	}
	k := m.s.keys
	m.flash = ""
	if msg.Type == tea.KeyCtrlC {
		// A changed form asks first, as esc does.
		if f, ok := m.top().(*formPage); ok && f.changed() && m.dialog == nil {
			quit := func() tea.Msg { return quitMsg{} }
			return m.handle(confirmMsg{newDialog("Quit and discard changes?",
				[]string{"The form has unsaved changes to " + f.Title() + "."}, "", "", true, quit)})
		}
		return m.quit()
	}
	if m.dialog != nil {
		done, cmd := m.dialog.update(m.s, msg)
		if done {
			m.dialog = nil
		}
		return cmd
	}
	top := m.top()
	if m.tooSmall() {
		if keyIs(msg, k.Quit) {
			return m.quit()
		}
		return nil
	}
	if m.palette != nil {
		return m.paletteKey(msg)
	}
	if m.showHelp {
		switch {
		case keyIs(msg, k.Quit) && !top.Capturing():
			return m.quit()
		case keyIs(msg, k.Help), keyIs(msg, k.Back), msg.Type == tea.KeyEnter:
			m.showHelp = false
		}
		return nil
	}
	if top.Capturing() {
		// Only non-printable quit keys (ctrl+c) and esc on the form reach the root.
		if keyIs(msg, k.Quit) && !printable(msg) {
			return m.quit()
		}
		if f, ok := top.(*formPage); ok && keyIs(msg, k.Back) && !editKey(msg) {
			if !f.changed() {
				return m.pop()
			}
			discard := func() tea.Msg { return popMsg{} }
			return m.handle(confirmMsg{newDialog("Discard changes?", []string{"The form has unsaved changes to " + f.Title() + "."}, "", "", false, discard)})
		}
		return top.Update(msg)
	}
	// The console-wide keys, before the screen's, in rootActions' order
	// (keys.go: a key bound to two actions is reported by that order).
	switch {
	case keyIs(msg, k.Quit):
		return m.askQuit()
	case keyIs(msg, k.Help):
		m.showHelp = true
		return nil
	case keyIs(msg, k.Back):
		if m.banner != nil {
			m.setBanner(nil) // the error was read: esc dismisses it first
			return nil
		}
		if bc, ok := top.(backConsumer); ok && bc.consumesBack() {
			return top.Update(msg)
		}
		return m.pop()
	case keyIs(msg, k.FindHost):
		return m.push(newFindPage(m.s))
	case keyIs(msg, k.Messages):
		return m.openMessages()
	case keyIs(msg, k.Tasks):
		return m.openTasks()
	case keyIs(msg, k.Events):
		return m.openEvents()
	case keyIs(msg, k.FleetMap):
		return m.openMap()
	case keyIs(msg, k.Palette):
		return m.openPalette()
	case keyIs(msg, k.Copy):
		if c, ok := top.(copier); ok {
			if what, text, ok := c.copyText(); ok {
				return m.s.copyCmd(what, text)
			}
		}
		return m.s.post(flashMsg{"nothing to copy here"})
	}
	return top.Update(msg)
}

// clickCrumb goes back to the screen whose title is at column x of the
// breadcrumb as last drawn. Not from a page taking typed text (a form asks
// before its changes are dropped; a filter being typed), nor from the help.
func (m *Model) clickCrumb(x int) tea.Cmd {
	if m.top().Capturing() || m.showHelp {
		return nil
	}
	sep := ansi.StringWidth(crumbSep)
	pos := ansi.StringWidth(crumbRoot) + sep
	if m.crumbCut > 0 {
		pos += ansi.StringWidth(crumbCutMark) + sep
	}
	for i := m.crumbCut; i < len(m.stack); i++ {
		w := ansi.StringWidth(m.stack[i].Title())
		if x >= pos && x < pos+w {
			target := m.stack[i]
			return m.jump(func(p page) bool { return p == target }, func() page { return target })
		}
		pos += w + sep
	}
	return nil
}

func (m *Model) quit() tea.Cmd {
	m.Close()
	return tea.Quit
}

// ---- view -------------------------------------------------------------------

// View draws the breadcrumb, the body (page, help or dialog), the host-event
// ticker, the status bar and the short help line.
// View is the frame, with no escape sequence from data in it (termSafe).
func (m *Model) View() string { return termSafe(m.frame()) }

func (m *Model) frame() string {
	t := m.s.theme
	w, h := m.s.width, m.s.height
	if m.tooSmall() {
		msg := fmt.Sprintf("Terminal too small: %dx%d.\nThe console needs at least %dx%d.\nEnlarge the window, or press q to quit.",
			w, h, MinWidth, MinHeight)
		return lipgloss.Place(w, h, lipgloss.Center, lipgloss.Center, t.Warn.Render(msg))
	}
	bw, bh := m.bodySize()
	var body string
	switch {
	case m.dialog != nil:
		body = overlay(m.top().View(), m.dialog.view(m.s, bw, bh), bw, bh)
	case m.palette != nil:
		// At the top, so that it does not move as the matches narrow.
		body = overlayAt(m.top().View(), m.palette.view(m.s, bw, bh), bw, bh, 0)
	case m.showHelp:
		body = m.fullHelp()
	default:
		body = m.top().View()
	}
	parts := []string{fit(m.breadcrumb(), w, 1), fit(body, bw, bh), fit(m.ticker(), w, 1)}
	parts = append(parts, m.bannerLines()...)
	return strings.Join(append(parts, m.statusBar(), fit(m.shortHelp(), w, 1)), "\n")
}

// The breadcrumb's parts, as drawn (breadcrumb) and as a click reads them
// (clickCrumb).
const crumbRoot, crumbSep, crumbCutMark = "gseproc", " › ", "…"

// breadcrumb is "gseproc › namespaces › web › …"; when it does not fit,
// the oldest parts give way to "…".
func (m *Model) breadcrumb() string {
	t := m.s.theme
	titles := make([]string, 0, len(m.stack)+1)
	for _, p := range m.stack {
		titles = append(titles, p.Title())
	}
	if m.showHelp {
		titles = append(titles, "help")
	}
	sep := t.Muted.Render(crumbSep)
	render := func(ts []string, cut bool) string {
		parts := []string{t.Title.Render(crumbRoot)}
		if cut {
			parts = append(parts, t.Muted.Render(crumbCutMark))
		}
		for i, s := range ts {
			st := t.Breadcrumb
			if i == len(ts)-1 {
				st = t.Title
			}
			parts = append(parts, st.Render(s))
		}
		return strings.Join(parts, sep)
	}
	// The age of a live list's data, on the right.
	fresh := ""
	if r, ok := m.top().(refresher); ok && !m.showHelp && !r.refreshedAt().IsZero() {
		fresh = t.Muted.Render("↻ refreshed " + m.s.age(r.refreshedAt()))
	}
	// A list the host events keep current is as live as their stream:
	// closed, or its backend not answering, it shows what came before.
	if _, ok := m.top().(streamed); ok && !m.showHelp {
		if m.s.eventsLive && m.infoErr == nil {
			fresh = t.Muted.Render("● live")
		} else {
			fresh = t.Warn.Render("○ not live")
		}
	}
	room := m.s.width
	if fresh != "" {
		room -= ansi.StringWidth(fresh) + 2
	}
	out := render(titles, false)
	m.crumbCut = 0
	for cut := 1; ansi.StringWidth(out) > room && cut < len(titles); cut++ {
		out = render(titles[cut:], true)
		m.crumbCut = cut
	}
	if fresh != "" && ansi.StringWidth(out) <= room {
		out += strings.Repeat(" ", m.s.width-ansi.StringWidth(out)-ansi.StringWidth(fresh)) + fresh
	}
	return out
}

func (m *Model) ticker() string {
	t := m.s.theme
	evs := m.s.events
	if len(evs) == 0 {
		return t.Muted.Render("no host events yet · " + m.s.keys.Events.Help().Key + " lists them")
	}
	e := evs[len(evs)-1]
	g := eventGlyph(e.Kind)
	s := fmt.Sprintf("%s %s %s", e.Time.Local().Format("15:04:05"), e.Host.AgentID(), e.ProcKey)
	if e.Message != "" {
		s += ": " + oneLine(e.Message)
	}
	more := ""
	if len(evs) > 1 {
		more = t.Muted.Render(fmt.Sprintf(" (%d events, %s lists them)", len(evs), m.s.keys.Events.Help().Key))
	}
	return g.style(t).Render(g.text()) + " " + s + more
}

func (m *Model) statusBar() string {
	t := m.s.theme
	w := m.s.width
	mode := m.info.Mode
	if mode == "" {
		mode = "connecting"
	}
	if m.info.Endpoint != "" {
		mode += " " + m.info.Endpoint
	}
	segs := []string{t.StatusKey.Render(" " + mode + " ")}
	if m.s.readOnly {
		segs = append(segs, t.StatusKey.Render(" read-only "))
	}
	if m.infoErr != nil {
		// Counts from before the backend stopped answering would be wrong.
		segs = append(segs, t.StatusBar.Render(" ")+t.Error.Render("✗ not answering")+t.StatusBar.Render(" "))
	} else {
		segs = append(segs, t.StatusBar.Render(fmt.Sprintf(" %s running ", plural(m.info.Running, "task"))))
		if m.info.Hosts > 0 {
			segs = append(segs, t.StatusBar.Render(fmt.Sprintf(" %d/%d hosts online ", m.info.Online, m.info.Hosts)))
		}
	}
	if m.flash != "" {
		segs = append(segs, t.StatusBar.Render(" "+m.flash+" "))
	}
	line := strings.Join(segs, t.StatusBar.Render("│"))
	if lw := ansi.StringWidth(line); lw < w {
		line += t.StatusBar.Render(strings.Repeat(" ", w-lw))
	} else if lw > w {
		line = ansi.Truncate(line, w, "…")
	}
	return line
}

func (m *Model) globalKeys() []binding {
	k := m.s.keys
	if m.top().Capturing() {
		// Printable keys type into the page: ? and q are not global here,
		// and the page lists its own way out.
		return nil
	}
	back := k.Back
	if len(m.stack) <= 1 {
		back.SetEnabled(false)
	}
	return []binding{k.Help, k.Palette, back, k.Quit}
}

// shortHelp is the page's main keys, then the global ones, which always
// fit (the page's part is cut with an ellipsis when the line is short).
func (m *Model) shortHelp() string {
	if m.dialog != nil {
		return m.s.theme.Muted.Render("answer the dialog: " + dialogHint(m.dialog))
	}
	if m.palette != nil {
		return m.s.theme.Muted.Render("type to find · ↑/↓ · tab complete · enter run · esc close")
	}
	h := m.help
	h.Width = 0
	global := h.ShortHelpView(m.globalKeys())
	if m.showHelp {
		return global
	}
	if ft, ok := m.top().(filterTyper); ok && ft.filterTyping() {
		// The page's keys would type into the filter.
		return m.s.theme.Muted.Render("type a filter · ") + fitShortHelp(h, filterTypingKeys(), max(m.s.width-16, 10))
	}
	if global == "" {
		h.Width = m.s.width
		return h.ShortHelpView(m.top().Help().short)
	}
	return fitShortHelp(h, m.top().Help().short, max(m.s.width-ansi.StringWidth(global)-3, 10)) +
		m.s.theme.HelpSep.Render(" · ") + global
}

// fitShortHelp is the short help of bs in at most width cells: whole
// keys, then " …" when some are left out. help.Model's own Width does not
// hold it: when the ellipsis does not fit either it adds the key anyway,
// and the line cut at the screen's edge lost the global keys (the labels
// page at 80 columns ended "? help · : palette · e").
func fitShortHelp(h help.Model, bs []binding, width int) string {
	h.Width = 0
	for n := len(bs); n >= 0; n-- {
		s := h.ShortHelpView(bs[:n])
		if n < len(bs) {
			s += " " + h.Styles.Ellipsis.Inline(true).Render(h.Ellipsis)
		}
		if ansi.StringWidth(s) <= width {
			return s
		}
	}
	return ""
}

// keyNames is how the help writes a binding's keys: "esc/h/←".
func keyNames(keys []string) string {
	names := make([]string, len(keys))
	for i, k := range keys {
		switch k {
		case "left":
			k = "←"
		case "right":
			k = "→"
		case "up":
			k = "↑"
		case "down":
			k = "↓"
		case " ":
			k = "space"
		}
		names[i] = k
	}
	return strings.Join(names, "/")
}

func dialogHint(d *dialog) string {
	if d.require != "" {
		return "type " + d.require + " then enter · esc cancels"
	}
	return "y yes · n, enter or esc no"
}

func (m *Model) fullHelp() string {
	t := m.s.theme
	k := m.s.keys
	groups := append([][]binding{}, m.top().Help().full...)
	// The console-wide keys in two columns of five, so that with a page's
	// keys they fit 80x24 (one column of ten pushed the last lines off).
	groups = append(groups,
		[]binding{k.Palette, k.Copy, k.Tasks, k.Events, k.FleetMap},
		[]binding{k.Messages, k.FindHost, k.Help, k.Back, k.Quit})
	// Going in and out has several keys (enter or →, esc, h or ←): the
	// full help names them all, the footer only the first.
	for i, g := range groups {
		g = append([]binding{}, g...)
		for j, b := range g {
			if slices.Equal(b.Keys(), k.Open.Keys()) || slices.Equal(b.Keys(), k.Back.Keys()) {
				g[j].SetHelp(keyNames(b.Keys()), b.Help().Desc)
			}
		}
		groups[i] = g
	}
	full := m.help
	full.ShowAll = true
	full.Width = 0
	// Columns of keys side by side while they fit, then another row.
	var rows []string
	var row [][]binding
	for _, g := range groups {
		try := append(append([][]binding{}, row...), g)
		if len(row) > 0 && lipgloss.Width(full.FullHelpView(try)) > m.s.width {
			rows = append(rows, full.FullHelpView(row))
			row = [][]binding{g}
			continue
		}
		row = try
	}
	if len(row) > 0 {
		rows = append(rows, full.FullHelpView(row))
	}
	return t.Title.Render("Keys of "+m.top().Title()) + "\n\n" + strings.Join(rows, "\n\n") +
		"\n\n" + t.Muted.Render("Keys can be changed in the [console.keys] section of the config, by action name.\nPress ? or esc to close.")
}
