package ui

import (
	"fmt"
	"sort"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"gseproc/backend"
	"gseproc/model"
)

// ---- namespaces ----------------------------------------------------------

type nsPage struct {
	fresh
	tableList
	items  []backend.NamespaceSummary
	loaded bool
	err    error // the last load failed
}

type nsLoadedMsg struct {
	id    int
	items []backend.NamespaceSummary
	err   error
}

func (m nsLoadedMsg) pageID() int { return m.id }

func newNSPage(s *shared) *nsPage {
	return &nsPage{tableList: newTableList(s, "namespace:web labels:app · other words: any column")}
}

func (p *nsPage) Title() string   { return "namespaces" }
func (p *nsPage) Init() tea.Cmd   { return p.load() }
func (p *nsPage) Resume() tea.Cmd { return p.load() }

func (p *nsPage) load() tea.Cmd {
	ctx, be, id := p.s.ctx, p.s.be, p.id
	return func() tea.Msg {
		items, err := be.Namespaces(ctx)
		return nsLoadedMsg{id: id, items: items, err: err}
	}
}

func (p *nsPage) Help() keyHelp {
	k := p.s.keys
	return keyHelp{
		short: []binding{k.Open, k.Filter, p.s.change(k.New), k.Tasks},
		full:  [][]binding{k.nav(), {k.Open, k.Filter, k.Sort, k.SortReverse}, {p.s.change(k.New), k.Reload}},
	}
}

func (p *nsPage) selected() (backend.NamespaceSummary, bool) {
	if p.list.cursor < 0 || p.list.cursor >= len(p.tb.shown) {
		return backend.NamespaceSummary{}, false
	}
	return p.items[p.tb.shown[p.list.cursor]], true
}

func nsCols() []column {
	return []column{{title: "NAMESPACE", width: 16, flex: true}, {title: "PROCS", width: 6, right: true},
		{title: "HOSTS", width: 7, right: true}, {title: "LABELS", width: 20, flex: true}}
}

func (p *nsPage) cells(i int) []string {
	ns := p.items[i]
	keys := make([]string, 0, len(ns.Labels))
	for k, vs := range ns.Labels {
		keys = append(keys, fmt.Sprintf("%s(%d)", k, len(vs)))
	}
	sort.Strings(keys)
	return []string{ns.Name, fmt.Sprint(ns.Processes), fmt.Sprint(ns.Hosts), strings.Join(keys, " ")}
}

func (p *nsPage) curName() string { ns, _ := p.selected(); return ns.Name }

// rebuild applies the filter and the sort, keeping the cursor on the
// namespace cur.
func (p *nsPage) rebuild(cur string) {
	p.tb.refresh(&p.list, nsCols(), len(p.items), p.cells, func(i int) string { return p.items[i].Name }, cur)
}

func (p *nsPage) Update(msg tea.Msg) tea.Cmd {
	k := p.s.keys
	switch msg := msg.(type) {
	case nsLoadedMsg:
		p.loaded = true
		if msg.err != nil {
			p.err = msg.err
			return errCmd("list namespaces", msg.err)
		}
		if p.err != nil {
			p.err = nil
			p.s.resolved("list namespaces")
		}
		p.fresh.at = p.s.now()
		cur := p.curName() // of the rows before the new ones
		p.items = msg.items
		sort.Slice(p.items, func(i, j int) bool { return p.items[i].Name < p.items[j].Name })
		p.rebuild(cur)
	case tea.KeyMsg:
		if !p.tb.filter.typing && p.list.navigate(k, msg) {
			return nil
		}
		if !p.loaded && !keyIs(msg, k.Reload) {
			return p.s.notReady("namespaces")
		}
		if ok, cmd := p.tb.key(k, msg, len(nsCols())); ok {
			p.rebuild(p.curName())
			return cmd
		}
		switch {
		case keyIs(msg, k.Back):
			p.tb.filter.clear()
			p.rebuild(p.curName())
		case keyIs(msg, k.Open):
			if ns, ok := p.selected(); ok {
				return p.s.post(pushMsg{newLabelsPage(p.s, ns)})
			}
		case keyIs(msg, k.New):
			ns, _ := p.selected()
			return openForm(p.s, newDef(ns.Name), true)
		case keyIs(msg, k.Reload):
			return p.load()
		}
	}
	return nil
}

func (p *nsPage) View() string {
	t := p.s.theme
	if !p.loaded {
		return t.Muted.Render("loading namespaces…")
	}
	if p.err != nil && len(p.items) == 0 {
		return loadFailed(p.s, "the namespaces", p.err, p.w)
	}
	if len(p.items) == 0 {
		return t.Muted.Render("No namespaces yet: no process is registered.\nPress n to define a process, R to refresh.")
	}
	cols := p.tb.sort.mark(nsCols())
	wd := layout(cols, p.w)
	var b strings.Builder
	switch {
	case p.tb.filter.typing:
		b.WriteString(p.tb.filter.input.View() + "\n")
	case p.err != nil:
		b.WriteString(staleLine(p.s, p.err) + "\n")
	default:
		b.WriteString(t.Muted.Render(plural(len(p.items), "namespace")+p.tb.info(t, cols, len(p.items))+" · enter to browse") + "\n")
	}
	b.WriteString(header(t, cols, wd))
	if len(p.tb.shown) == 0 {
		b.WriteString("\n" + t.Muted.Render("  No namespace matches the filter (esc clears it)."))
	}
	p.list.first = strings.Count(b.String(), "\n") + 1 // where a click finds the rows
	s, e := p.list.window()
	for i := s; i < e; i++ {
		c := p.cells(p.tb.shown[i])
		cells := []string{cell(c[0], wd[0], false), cell(c[1], wd[1], true), cell(c[2], wd[2], true), cell(c[3], wd[3], false)}
		b.WriteString("\n" + renderRow(t, i == p.list.cursor, false, cells, nil))
	}
	return b.String()
}

// ---- labels and processes of a namespace --------------------------------

type lblKind int

const (
	lblAll lblKind = iota
	lblLabel
	lblProc
)

type lblItem struct {
	kind     lblKind
	key, val string // label, or process name in key
	procs    int
	hosts    int
	def      model.ProcessDef
}

type labelsPage struct {
	fresh
	tableList
	ns     backend.NamespaceSummary
	defs   []model.ProcessDef
	items  []lblItem
	loaded bool
	err    error // the last load failed
}

type procsLoadedMsg struct {
	id   int
	defs []model.ProcessDef
	err  error
}

func (m procsLoadedMsg) pageID() int { return m.id }

func newLabelsPage(s *shared, ns backend.NamespaceSummary) *labelsPage {
	return &labelsPage{tableList: newTableList(s, "selector:nginx detail:resident · other words: any column"), ns: ns}
}

func (p *labelsPage) Title() string   { return p.ns.Name }
func (p *labelsPage) Init() tea.Cmd   { return p.load() }
func (p *labelsPage) Resume() tea.Cmd { return p.load() }

func (p *labelsPage) load() tea.Cmd {
	ctx, be, id, ns := p.s.ctx, p.s.be, p.id, p.ns.Name
	return func() tea.Msg {
		defs, err := be.Processes(ctx, backend.ProcQuery{Namespace: ns})
		return procsLoadedMsg{id: id, defs: defs, err: err}
	}
}

func labelCols() []column {
	return []column{{title: "SELECT BY", width: 10}, {title: "SELECTOR", width: 24, flex: true},
		{title: "PROCS", width: 5, right: true}, {title: "HOSTS", width: 6, right: true}, {title: "DETAIL", width: 16, flex: true}}
}

// cells is item i's row.
func (p *labelsPage) cells(i int) []string {
	it := p.items[i]
	var kind, sel, detail string
	switch it.kind {
	case lblAll:
		kind, sel = "all", "every process in "+p.ns.Name
	case lblLabel:
		kind, sel = "label", it.key+"="+it.val
	case lblProc:
		kind, sel = "process", it.key
		detail = it.def.Process.Spec.Identity.ProcName + " · " + it.def.Process.Spec.Policy.AutoType.String()
	}
	return []string{kind, sel, fmt.Sprint(it.procs), fmt.Sprint(it.hosts), detail}
}

// itemID names item i across reloads (the cursor stays on it).
func (p *labelsPage) itemID(i int) string {
	it := p.items[i]
	return fmt.Sprint(it.kind) + "\x00" + it.key + "\x00" + it.val
}

// cursorItem is the row under the cursor, among those shown.
func (p *labelsPage) cursorItem() (lblItem, bool) {
	if p.list.cursor >= len(p.tb.shown) {
		return lblItem{}, false
	}
	return p.items[p.tb.shown[p.list.cursor]], true
}

func (p *labelsPage) Help() keyHelp {
	k := p.s.keys
	return keyHelp{
		short: []binding{k.Open, k.Op, k.Filter, p.s.change(k.Edit), p.s.change(k.New)},
		full:  [][]binding{k.nav(), {k.Open, k.Op, p.s.change(k.Edit), p.s.change(k.New), k.Reload}, {k.Filter, k.Sort, k.SortReverse}},
	}
}

// build lists "all", each label key=value with the processes carrying it,
// and each process.
func (p *labelsPage) build() {
	items := []lblItem{{kind: lblAll, procs: len(p.defs), hosts: uniqueHosts(p.defs)}}
	type kv struct{ k, v string }
	byLabel := map[kv][]model.ProcessDef{}
	for k, vs := range p.ns.Labels {
		for _, v := range vs {
			byLabel[kv{k, v}] = nil
		}
	}
	for _, d := range p.defs {
		for k, v := range d.Process.Meta.Labels {
			byLabel[kv{k, v}] = append(byLabel[kv{k, v}], d)
		}
	}
	var labels []lblItem
	for l, defs := range byLabel {
		labels = append(labels, lblItem{kind: lblLabel, key: l.k, val: l.v, procs: len(defs), hosts: uniqueHosts(defs)})
	}
	sort.Slice(labels, func(i, j int) bool {
		if labels[i].key != labels[j].key {
			return labels[i].key < labels[j].key
		}
		return labels[i].val < labels[j].val
	})
	items = append(items, labels...)
	defs := append([]model.ProcessDef(nil), p.defs...)
	sort.Slice(defs, func(i, j int) bool { return defs[i].Process.Meta.Name < defs[j].Process.Meta.Name })
	for _, d := range defs {
		items = append(items, lblItem{kind: lblProc, key: d.Process.Meta.Name, procs: 1, hosts: len(d.Hosts), def: d})
	}
	cur := ""
	if len(p.tb.shown) > 0 && p.list.cursor < len(p.tb.shown) && len(p.items) > 0 {
		cur = p.itemID(p.tb.shown[p.list.cursor]) // of the rows before the new ones
	}
	p.items = items
	p.tb.refresh(&p.list, labelCols(), len(items), p.cells, p.itemID, cur)
}

func uniqueHosts(defs []model.ProcessDef) int {
	seen := map[model.Host]bool{}
	for _, d := range defs {
		for _, h := range d.Hosts {
			seen[h] = true
		}
	}
	return len(seen)
}

func (it lblItem) query(ns string) backend.HostQuery {
	q := backend.HostQuery{Namespace: ns}
	switch it.kind {
	case lblLabel:
		q.Labels = map[string]string{it.key: it.val}
	case lblProc:
		q.Name = it.key
	}
	return q
}

func (p *labelsPage) Update(msg tea.Msg) tea.Cmd {
	k := p.s.keys
	switch msg := msg.(type) {
	case procsLoadedMsg:
		p.loaded = true
		if msg.err != nil {
			p.err = msg.err
			return errCmd("list processes", msg.err)
		}
		if p.err != nil {
			p.err = nil
			p.s.resolved("list processes")
		}
		p.fresh.at = p.s.now()
		p.defs = msg.defs
		p.build()
	case tea.KeyMsg:
		if !p.tb.filter.typing && p.list.navigate(k, msg) {
			return nil
		}
		if !p.loaded && !keyIs(msg, k.Reload) {
			return p.s.notReady("processes")
		}
		// A filter or sort keeps the cursor on its row while it is shown.
		cur := ""
		if p.list.cursor < len(p.tb.shown) {
			cur = p.itemID(p.tb.shown[p.list.cursor])
		}
		if ok, cmd := p.tb.key(k, msg, len(labelCols())); ok {
			p.tb.refresh(&p.list, labelCols(), len(p.items), p.cells, p.itemID, cur)
			return cmd
		}
		if keyIs(msg, k.Back) { // a filter to clear (consumesBack)
			p.tb.filter.clear()
			p.tb.refresh(&p.list, labelCols(), len(p.items), p.cells, p.itemID, cur)
			return nil
		}
		it, ok := p.cursorItem()
		if !ok {
			if keyIs(msg, k.New) {
				return openForm(p.s, newDef(p.ns.Name), true)
			}
			return nil
		}
		switch {
		case keyIs(msg, k.Open):
			return p.s.post(pushMsg{newHostsPage(p.s, it.query(p.ns.Name))})
		case keyIs(msg, k.Op):
			return p.s.openOp(p, nil)
		case keyIs(msg, k.Edit):
			if it.kind != lblProc {
				return p.s.post(flashMsg{"move to a process row to edit it (processes are listed after the labels)"})
			}
			return openForm(p.s, it.def, false)
		case keyIs(msg, k.New):
			return openForm(p.s, newDef(p.ns.Name), true)
		case keyIs(msg, k.Reload):
			return p.load()
		}
	}
	return nil
}

// opTarget is the row under the cursor: all, a label or a process.
func (p *labelsPage) opTarget() (target, bool) {
	if !p.loaded {
		p.s.notReady("processes")
		return target{}, false
	}
	it, ok := p.cursorItem()
	if !ok {
		return target{}, false
	}
	q := it.query(p.ns.Name)
	return target{sel: backend.Selector{Namespace: q.Namespace, Name: q.Name, Labels: q.Labels}, hosts: it.hosts}, true
}

func (p *labelsPage) View() string {
	t := p.s.theme
	if !p.loaded {
		return t.Muted.Render("loading processes…")
	}
	if p.err != nil && len(p.items) == 0 {
		return loadFailed(p.s, "the processes of "+p.ns.Name, p.err, p.w)
	}
	cols := p.tb.sort.mark(labelCols())
	wd := layout(cols, p.w)
	var b strings.Builder
	switch {
	case p.tb.filter.typing:
		b.WriteString(p.tb.filter.input.View() + "\n")
	case p.err != nil:
		b.WriteString(staleLine(p.s, p.err) + "\n")
	default:
		// Filtered or sorted, the line says so first: it is cut at the
		// screen's edge.
		line := "Choose hosts by label or process · enter hosts · o operate on all of them"
		if info := p.tb.info(t, cols, len(p.items)); info != "" {
			line = plural(len(p.items), "selector") + info + " · enter hosts · o operate"
		}
		b.WriteString(t.Muted.Render(line) + "\n")
	}
	b.WriteString(header(t, cols, wd))
	if len(p.tb.shown) == 0 && len(p.items) > 0 {
		b.WriteString("\n" + t.Muted.Render("  Nothing matches the filter (esc clears it)."))
	}
	p.list.first = strings.Count(b.String(), "\n") + 1 // where a click finds the rows
	s, e := p.list.window()
	for i := s; i < e; i++ {
		c := p.cells(p.tb.shown[i])
		cells := []string{cell(c[0], wd[0], false), cell(c[1], wd[1], false), cell(c[2], wd[2], true),
			cell(c[3], wd[3], true), cell(c[4], wd[4], false)}
		b.WriteString("\n" + renderRow(t, i == p.list.cursor, false, cells, nil))
	}
	return b.String()
}
