package ui

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"gseproc/backend"
	"gseproc/model"
	"gseproc/theme"
)

// The fleet map: every host of a selection as one cell, glyphed and
// coloured by its processes' state (the worst of them), grouped by
// namespace or by a host label, so a whole fleet is seen at a glance.
// When the hosts do not fit one cell each, a cell stands for a run of
// hosts: its glyph is their worst state and its shade (░▒▓█) the share of
// them not running, so it reads in mono and without colour. enter opens
// the hosts of the cell under the cursor; b changes the grouping. It
// reloads when host events arrive (at most every reloadGap).

// mapCat is a host's state on the map, in order of severity.
type mapCat uint8

const (
	catNone mapCat = iota // no process of the selection
	catRunning
	catStopped
	catBackoff
	catFatal
	catOffline
	numCats
)

// catOf is the map's category of a process state.
func catOf(s model.ProcState) mapCat {
	switch s {
	case model.ProcRunning, model.ProcStarting, model.ProcStopping:
		return catRunning
	case model.ProcStopped, model.ProcExited:
		return catStopped
	case model.ProcBackoff:
		return catBackoff
	case model.ProcFatal:
		return catFatal
	}
	return catNone
}

func (c mapCat) glyph() glyph {
	switch c {
	case catRunning:
		return procGlyph(model.ProcRunning)
	case catStopped:
		return procGlyph(model.ProcStopped)
	case catBackoff:
		return procGlyph(model.ProcBackoff)
	case catFatal:
		return procGlyph(model.ProcFatal)
	case catOffline:
		return agentGlyph(model.AgentOffline)
	}
	return procGlyph("")
}

// mapHost is one host in one group.
type mapHost struct {
	host model.Host
	cat  mapCat
}

// mapGroup is a namespace's or a label value's hosts, in host order.
type mapGroup struct {
	name   string
	hosts  []mapHost
	counts [numCats]int
}

// groupByNamespace is the grouping that puts a host under each namespace
// it runs processes of.
const groupByNamespace = "namespace"

// buildGroups groups the hosts: by the namespace of their processes (a
// host in each of its namespaces, with the worst state of that
// namespace's processes) or by the value of a host label. An offline
// agent is offline in every group. Groups come in name order.
func buildGroups(views []backend.HostView, by string) []mapGroup {
	idx := map[string]int{}
	var groups []mapGroup
	add := func(name string, h model.Host, c mapCat) {
		i, ok := idx[name]
		if !ok {
			i = len(groups)
			idx[name] = i
			groups = append(groups, mapGroup{name: name})
		}
		g := &groups[i]
		g.hosts = append(g.hosts, mapHost{h, c})
		g.counts[c]++
	}
	type nsCat struct {
		ns  string
		cat mapCat
	}
	var worst [8]nsCat
	for i := range views {
		v := &views[i]
		off := v.State == model.AgentOffline
		if by != groupByNamespace {
			c := catNone
			for _, p := range v.Procs {
				c = max(c, catOf(p.Status.State))
			}
			if off {
				c = catOffline
			}
			name := v.Labels[by]
			if name == "" {
				name = "(no " + by + ")"
			}
			add(name, v.Host, c)
			continue
		}
		// A host's namespaces, each with its worst state (few per host).
		nss := worst[:0]
		for _, p := range v.Procs {
			ns, _, _ := model.SplitKey(p.Key)
			c := catOf(p.Status.State)
			j := slices.IndexFunc(nss, func(x nsCat) bool { return x.ns == ns })
			if j < 0 {
				nss = append(nss, nsCat{ns, c})
			} else {
				nss[j].cat = max(nss[j].cat, c)
			}
		}
		if len(nss) == 0 {
			c := catNone
			if off {
				c = catOffline
			}
			add("(no processes)", v.Host, c)
		}
		for _, x := range nss {
			if off {
				x.cat = catOffline
			}
			add(x.ns, v.Host, x.cat)
		}
	}
	slices.SortFunc(groups, func(a, b mapGroup) int { return strings.Compare(a.name, b.name) })
	return groups
}

// mapCell is a run of hosts [lo, hi) of one group.
type mapCell struct {
	lo, hi int
	counts [numCats]int32
	worst  mapCat
}

// mapRow is one line of the map: a group's header, or cells of a group.
type mapRow struct {
	group  int
	header bool
	cells  []mapCell
}

// mapLayout places the groups on the page.
type mapLayout struct {
	per   int // hosts per cell
	cellW int // 1 (a host a cell) or 2 (glyph and shade)
	rows  []mapRow
}

// layoutMap picks the fewest hosts per cell that fit the groups in w x h
// (a header line per group, then its cells); when even one row of cells
// per group does not fit, rows scroll. Pure.
func layoutMap(groups []mapGroup, w, h int) mapLayout {
	if w < 4 || h < 1 || len(groups) == 0 {
		return mapLayout{per: 1, cellW: 1}
	}
	lines := func(per, cellW int) int {
		cols := w / cellW
		n := 0
		for i := range groups {
			cells := (len(groups[i].hosts) + per - 1) / per
			n += 1 + (cells+cols-1)/cols
		}
		return n
	}
	per, cellW := 1, 1
	if lines(1, 1) > h {
		cellW = 2
		most := 0
		for i := range groups {
			most = max(most, len(groups[i].hosts))
		}
		cols := w / cellW
		hi := max(2, (most+cols-1)/cols) // one row per group: the most that can help
		lo := 2
		for lo < hi {
			mid := (lo + hi) / 2
			if lines(mid, cellW) <= h {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		per = lo
	}
	l := mapLayout{per: per, cellW: cellW}
	cols := w / cellW
	for gi := range groups {
		g := &groups[gi]
		l.rows = append(l.rows, mapRow{group: gi, header: true})
		var row []mapCell
		for lo := 0; lo < len(g.hosts); lo += per {
			c := mapCell{lo: lo, hi: min(lo+per, len(g.hosts))}
			for _, h := range g.hosts[c.lo:c.hi] {
				c.counts[h.cat]++
				c.worst = max(c.worst, h.cat)
			}
			row = append(row, c)
			if len(row) == cols {
				l.rows = append(l.rows, mapRow{group: gi, cells: row})
				row = nil
			}
		}
		if len(row) > 0 {
			l.rows = append(l.rows, mapRow{group: gi, cells: row})
		}
	}
	return l
}

// shade is the share of a cell's hosts not running: blank for none.
func (c mapCell) shade() string {
	n, bad := int32(0), int32(0)
	for k := catRunning; k < numCats; k++ {
		n += c.counts[k]
		if k != catRunning {
			bad += c.counts[k]
		}
	}
	switch {
	case bad == 0 || n == 0:
		return " "
	case bad*4 < n:
		return "░"
	case bad*2 < n:
		return "▒"
	case bad*4 < n*3:
		return "▓"
	}
	return "█"
}

// text is the cell as drawn (cellW runes).
func (c mapCell) text(cellW int) string {
	g := c.worst.glyph().g
	if cellW == 1 {
		return g
	}
	return g + c.shade()
}

// fleetMapPage is the fleet map of a host query.
type fleetMapPage struct {
	s      *shared
	id     int
	q      backend.HostQuery
	by     string   // groupByNamespace or a host label key
	bys    []string // the groupings offered (b cycles)
	groups []mapGroup
	total  int // hosts
	layout mapLayout
	lines  []string // rendered rows without the cursor
	row    int      // cursor: a row of cells, and a cell in it
	col    int
	top    int // first row shown
	loaded bool
	err    error
	rl     reloads
	w, h   int
}

// mapLoadedMsg is the map's hosts, grouped already (off the UI's
// goroutine: grouping 100,000 hosts takes a while).
type mapLoadedMsg struct {
	id     int
	by     string
	groups []mapGroup
	bys    []string
	total  int
	layout mapLayout // for w x h
	w, h   int
	err    error
}

// mapLoaded groups views by by (falling back to namespace when by is not
// a label of theirs) and lays them out for a page of w x h.
func mapLoaded(id int, views []backend.HostView, by string, w, h int) mapLoadedMsg {
	bys := mapGroupings(views)
	if !slices.Contains(bys, by) {
		by = groupByNamespace
	}
	m := mapLoadedMsg{id: id, by: by, groups: buildGroups(views, by), bys: bys, total: len(views), w: w, h: h}
	m.layout = layoutMap(m.groups, w, max(h-mapChrome, 1))
	return m
}

func (m mapLoadedMsg) pageID() int { return m.id }

type mapReloadMsg struct{ id int }

func (m mapReloadMsg) pageID() int { return m.id }

func newFleetMapPage(s *shared, q backend.HostQuery) *fleetMapPage {
	return &fleetMapPage{s: s, id: s.newID(), q: q, by: groupByNamespace}
}

// consumesBack: left and h move the cursor on the map (esc goes back).
func (p *fleetMapPage) consumesBack() bool { return true }

func (p *fleetMapPage) ID() int         { return p.id }
func (p *fleetMapPage) Capturing() bool { return false }
func (p *fleetMapPage) Close()          {}
func (p *fleetMapPage) Init() tea.Cmd   { return p.load() }
func (p *fleetMapPage) Resume() tea.Cmd { return p.load() }

func (p *fleetMapPage) Title() string {
	parts := []string{"map"}
	if p.q.Name != "" {
		parts = append(parts, p.q.Name)
	}
	parts = append(parts, model.SortedLabels(p.q.Labels)...)
	return strings.Join(parts, " ")
}

func (p *fleetMapPage) load() tea.Cmd {
	p.rl.started(p.s.now())
	ctx, be, id, q, by, w, h := p.s.ctx, p.s.be, p.id, p.q, p.by, p.w, p.h
	return func() tea.Msg {
		hosts, err := be.Hosts(ctx, q)
		if err != nil {
			return mapLoadedMsg{id: id, err: err}
		}
		return mapLoaded(id, hosts, by, w, h)
	}
}

// onEvents reloads when host events arrive, at most every reloadGap.
func (p *fleetMapPage) onEvents([]model.Event) tea.Cmd {
	return p.pace(p.rl.changed(p.s.now()))
}

func (p *fleetMapPage) pace(load bool, wait time.Duration) tea.Cmd {
	return paced(load, wait, p.load, mapReloadMsg{p.id})
}

func (p *fleetMapPage) SetSize(w, h int) {
	p.w, p.h = w, h
	p.relayout()
}

// mapChrome is the lines around the cells: the summary above, the cell
// under the cursor and the legend below.
const mapChrome = 3

func (p *fleetMapPage) relayout() {
	if !p.loaded || p.w == 0 {
		return
	}
	p.layout = layoutMap(p.groups, p.w, max(p.h-mapChrome, 1))
	p.render()
}

// render draws every row once (View redraws only the cursor's).
func (p *fleetMapPage) render() {
	p.lines = make([]string, len(p.layout.rows))
	for i := range p.layout.rows {
		p.lines[i] = p.renderRow(i, -1)
	}
	p.clampCursor()
}

// renderRow draws row i, with the cell at cursor reversed (-1: none).
// Runs of cells of one state are styled together.
func (p *fleetMapPage) renderRow(i, cursor int) string {
	t := p.s.theme
	r := p.layout.rows[i]
	g := &p.groups[r.group]
	if r.header {
		return p.header(t, g)
	}
	var b strings.Builder
	run, runCat := strings.Builder{}, mapCat(255)
	flush := func() {
		if run.Len() > 0 {
			b.WriteString(runCat.glyph().style(t).Render(run.String()))
			run.Reset()
		}
	}
	for j, c := range r.cells {
		if j == cursor {
			flush()
			b.WriteString(t.Cursor.Render(c.text(p.layout.cellW)))
			runCat = 255
			continue
		}
		if c.worst != runCat {
			flush()
			runCat = c.worst
		}
		run.WriteString(c.text(p.layout.cellW))
	}
	flush()
	return b.String()
}

// header is a group's line: its name, its hosts and the count per state.
func (p *fleetMapPage) header(t *theme.Theme, g *mapGroup) string {
	var b strings.Builder
	b.WriteString(t.Title.Render(g.name))
	fmt.Fprintf(&b, " %s", t.Muted.Render(plural(len(g.hosts), "host")))
	for c := numCats - 1; c >= catRunning; c-- {
		if n := g.counts[c]; n > 0 {
			gl := c.glyph()
			b.WriteString("  " + gl.style(t).Render(fmt.Sprintf("%s %d %s", gl.g, n, gl.word)))
		}
	}
	return cut(b.String(), p.w)
}

func (p *fleetMapPage) clampCursor() {
	rows := p.layout.rows
	if len(rows) == 0 {
		p.row, p.col = 0, 0
		return
	}
	p.row = min(max(p.row, 0), len(rows)-1)
	if rows[p.row].header { // the cursor sits on cells
		if p.row+1 < len(rows) && !rows[p.row+1].header {
			p.row++
		}
	}
	p.col = min(max(p.col, 0), max(len(rows[p.row].cells)-1, 0))
}

// move goes to the next row of cells up (-1) or down (+1), skipping headers.
func (p *fleetMapPage) move(d int) {
	for r := p.row + d; r >= 0 && r < len(p.layout.rows); r += d {
		if !p.layout.rows[r].header {
			p.row = r
			p.col = min(p.col, len(p.layout.rows[r].cells)-1)
			return
		}
	}
}

// cell is the cell under the cursor.
func (p *fleetMapPage) cell() (*mapGroup, mapCell, bool) {
	if p.row >= len(p.layout.rows) {
		return nil, mapCell{}, false
	}
	r := p.layout.rows[p.row]
	if r.header || p.col >= len(r.cells) {
		return nil, mapCell{}, false
	}
	return &p.groups[r.group], r.cells[p.col], true
}

func (p *fleetMapPage) Help() keyHelp {
	k := p.s.keys
	open := k.Open
	open.SetHelp(k.Open.Help().Key, "open")
	return keyHelp{
		short: []binding{open, mapGroupKey, k.Reload},
		full:  [][]binding{{k.Up, k.Down, mapLeft, mapRight, k.Top, k.Bottom}, {open, mapGroupKey, k.Reload}},
	}
}

var (
	mapGroupKey = key.NewBinding(key.WithKeys("b"), key.WithHelp("b", "group by"))
	mapLeft     = key.NewBinding(key.WithKeys("left", "h"), key.WithHelp("←/h", "left"))
	mapRight    = key.NewBinding(key.WithKeys("right", "l"), key.WithHelp("→/l", "right"))
)

// cut shortens s to w cells.
func cut(s string, w int) string { return ansi.Truncate(s, w, "…") }

func (p *fleetMapPage) Update(msg tea.Msg) tea.Cmd {
	k := p.s.keys
	switch msg := msg.(type) {
	case mapLoadedMsg:
		next := p.pace(p.rl.done(p.s.now())) // for the events told meanwhile
		if msg.err != nil {
			p.err = msg.err
			return tea.Batch(errCmd("load the fleet map", msg.err), next)
		}
		p.err = nil
		p.loaded = true
		p.total, p.bys, p.by, p.groups = msg.total, msg.bys, msg.by, msg.groups
		if msg.w == p.w && msg.h == p.h {
			p.layout = msg.layout
			p.render()
		} else { // resized meanwhile
			p.relayout()
		}
		p.s.resolved("load the fleet map")
		return next
	case mapReloadMsg:
		p.rl.fired()
		return p.load()
	case tea.KeyMsg:
		switch {
		case keyIs(msg, k.Up):
			p.move(-1)
		case keyIs(msg, k.Down):
			p.move(1)
		case keyIs(msg, mapLeft):
			if p.col > 0 {
				p.col--
			} else if r := p.row; r > 0 {
				p.move(-1)
				if p.row != r {
					p.col = len(p.layout.rows[p.row].cells) - 1
				}
			}
		case keyIs(msg, k.Back): // esc (left and h move)
			return p.s.post(popMsg{})
		case keyIs(msg, mapRight):
			if p.row < len(p.layout.rows) && p.col+1 < len(p.layout.rows[p.row].cells) {
				p.col++
			} else if r := p.row; r+1 < len(p.layout.rows) {
				p.move(1)
				if p.row != r {
					p.col = 0
				}
			}
		case keyIs(msg, k.Top):
			p.row, p.col = 0, 0
			p.clampCursor()
		case keyIs(msg, k.Bottom):
			p.row = len(p.layout.rows) - 1
			p.clampCursor()
		case keyIs(msg, mapGroupKey):
			if len(p.bys) > 1 {
				i := slices.Index(p.bys, p.by)
				p.by = p.bys[(i+1)%len(p.bys)]
				p.row, p.col = 0, 0
				return p.load()
			}
		case keyIs(msg, k.Reload):
			return p.load()
		case keyIs(msg, k.Open):
			return p.open()
		}
	}
	return nil
}

// open drills into the cell under the cursor: one host opens whole, a run
// of hosts opens as a hosts table.
func (p *fleetMapPage) open() tea.Cmd {
	g, c, ok := p.cell()
	if !ok {
		return nil
	}
	hosts := make([]model.Host, 0, c.hi-c.lo)
	for _, h := range g.hosts[c.lo:c.hi] {
		hosts = append(hosts, h.host)
	}
	if len(hosts) == 1 {
		return p.s.post(pushMsg{newHostPage(p.s, hosts[0], nil)})
	}
	q := p.q
	q.Hosts = hosts
	if p.by == groupByNamespace && q.Namespace == "" && !strings.HasPrefix(g.name, "(") {
		q.Namespace = g.name
	}
	return p.s.post(pushMsg{newHostsPage(p.s, q)})
}

// mapGroupings are the groupings b cycles through: namespace, then the
// host label keys, in name order.
func mapGroupings(views []backend.HostView) []string {
	seen := map[string]bool{}
	for i := range views { // every host: a key only some hosts carry is offered too
		for k := range views[i].Labels {
			seen[k] = true
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return append([]string{groupByNamespace}, keys...)
}

func (p *fleetMapPage) View() string {
	t := p.s.theme
	switch {
	case p.err != nil && !p.loaded:
		return t.Error.Render("could not load the fleet map: "+p.err.Error()) + "\n" + t.Muted.Render(p.s.keys.Reload.Help().Key+" retries")
	case !p.loaded:
		return t.Muted.Render("loading the fleet map…")
	case p.total == 0:
		return t.Muted.Render("no hosts in this selection")
	}
	avail := max(p.h-mapChrome, 1)
	if p.row < p.top {
		p.top = p.row
	}
	if p.row >= p.top+avail {
		p.top = p.row - avail + 1
	}
	p.top = min(p.top, max(len(p.lines)-avail, 0))
	// The group header of the cursor's first row stays in sight.
	if p.top > 0 && p.top == p.row && p.top < len(p.layout.rows) && p.top-1 >= 0 && p.layout.rows[p.top-1].header {
		p.top--
	}
	cell := "a cell is a host"
	if p.layout.per > 1 {
		cell = fmt.Sprintf("a cell is %d hosts, shaded ░▒▓█ by the share not running", p.layout.per)
	}
	by := "namespace"
	if p.by != groupByNamespace {
		by = "label " + p.by
	}
	out := make([]string, 0, p.h)
	out = append(out, cut(t.Title.Render(plural(p.total, "host"))+t.Muted.Render(fmt.Sprintf(" · by %s · %s", by, cell)), p.w))
	for i := p.top; i < min(p.top+avail, len(p.lines)); i++ {
		if i == p.row {
			out = append(out, p.renderRow(i, p.col))
			continue
		}
		out = append(out, p.lines[i])
	}
	for len(out) < avail+1 {
		out = append(out, "")
	}
	out = append(out, cut(p.cursorLine(t), p.w), cut(p.legend(t), p.w))
	return strings.Join(out, "\n")
}

// cursorLine says what the cell under the cursor holds.
func (p *fleetMapPage) cursorLine(t *theme.Theme) string {
	g, c, ok := p.cell()
	if !ok {
		return ""
	}
	first, last := g.hosts[c.lo].host, g.hosts[c.hi-1].host
	var b strings.Builder
	b.WriteString("› " + g.name + " ")
	if c.hi-c.lo == 1 {
		b.WriteString(first.String())
	} else {
		fmt.Fprintf(&b, "%s … %s (%d hosts)", first, last, c.hi-c.lo)
	}
	for k := numCats - 1; k >= catRunning; k-- {
		if n := c.counts[k]; n > 0 {
			gl := k.glyph()
			b.WriteString("  " + fmt.Sprintf("%s %d", gl.g, n))
		}
	}
	return b.String() + t.Muted.Render("  · "+p.s.keys.Open.Help().Key+" opens")
}

// legend names every glyph and the grouping key.
func (p *fleetMapPage) legend(t *theme.Theme) string {
	var parts []string
	for _, c := range []mapCat{catRunning, catStopped, catBackoff, catFatal, catOffline} {
		gl := c.glyph()
		parts = append(parts, gl.style(t).Render(gl.text()))
	}
	return strings.Join(parts, " ") + t.Muted.Render(" · b groups by "+nextGrouping(p.bys, p.by))
}

func nextGrouping(bys []string, by string) string {
	if len(bys) < 2 {
		return "namespace"
	}
	return bys[(slices.Index(bys, by)+1)%len(bys)]
}
