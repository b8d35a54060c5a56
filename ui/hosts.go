package ui

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"gseproc/backend"
	"gseproc/model"
)

// hostsPage is the hosts table of a query: cloud, ip, agent state, the
// process and its state, hosting. `/` filters (fuzzy text and key=value
// labels), space selects, a selects all shown; the selection is kept by
// host id, so it survives filtering and refreshes.
type hostsPage struct {
	fresh
	s      *shared
	id     int
	q      backend.HostQuery
	rows   []hostRow
	names  []string            // the rows' distinct process names, sorted, and
	keys   []rowKey            // each row's key: both nil until a filter needs them
	shown  []int               // indexes into rows after the filter
	sel    map[model.Host]bool // selected hosts: keys share the rows' strings
	list   vlist
	filter listFilter
	sort   sortState
	loaded bool    // the whole list has loaded
	first  bool    // the rows are the first page only (loadFirst), the whole list is on its way
	err    error   // the last load failed
	rl     reloads // event-driven reloads: one in flight, one every reloadGap
	w, h   int
}

type hostRow struct {
	v     hostView
	state model.ProcState // the worst of its processes'
}

// hostView is what the list keeps of a backend.HostView: the host's agent
// and, of each process, what the list shows, filters and acts on. A
// process's whole status (~200 bytes) a (host, process) was most of a
// 100,000-host list's memory; the host page loads the host whole.
//
// A host's labels are a labelSet: from a server (the client hands each
// host's label map over to be copied) they are compact, pairs held once
// a listing; from a backend that keeps its own maps (the engine) they
// are its map, shared.
type hostView struct {
	Host    model.Host
	State   model.AgentState
	Version string
	AgentID string
	labels  labelSet
	Procs   []procView
}

// labelSet is a host's label set: either a map the backend keeps anyway
// (m), or a run of pair ids in a listing's labelTab, in the order
// model.SortedLabels gives (n pairs from off). A 100,000-host listing
// from a server had a map per host (~86,000 distinct sets of ~850
// distinct pairs: ~37 MB with their strings, the biggest part of the
// remote console's list); as runs of ids it is ~4 MB.
type labelSet struct {
	m      map[string]string
	tab    *labelTab
	off, n uint32
}

// labelPair is one label.
type labelPair struct{ k, v string }

// labelTab holds a listing's distinct label pairs once each and, in one
// array, the pair ids of its hosts' sets. It is filled by the goroutine
// that reads the listing and never changed once the rows are handed over.
type labelTab struct {
	ix    map[labelPair]uint32
	pairs []labelPair
	ids   []uint32
	// fromList is, by index in the table of the listing being read
	// (setIDs), the pair's id here plus one (0: not looked up yet);
	// fromPairs is that table's first pair, telling one listing's table
	// from another's of the same length.
	fromList  []uint32
	fromPairs *[2]string
}

// set is m as a compact labelSet of t (m is not kept: it may be reused).
func (t *labelTab) set(m map[string]string) labelSet {
	if len(m) == 0 {
		return labelSet{}
	}
	if t.ix == nil {
		t.ix = map[labelPair]uint32{}
	}
	off := len(t.ids)
	for k, v := range m {
		id, ok := t.ix[labelPair{k, v}]
		if !ok {
			id = uint32(len(t.pairs))
			t.ix[labelPair{k, v}] = id
			t.pairs = append(t.pairs, labelPair{k, v})
		}
		// Insertion in SortedLabels' order: a set is a few pairs.
		t.ids = append(t.ids, id)
		run := t.ids[off:]
		for j := len(run) - 1; j > 0 && pairLess(t.pairs[run[j]], t.pairs[run[j-1]]); j-- {
			run[j], run[j-1] = run[j-1], run[j]
		}
	}
	return labelSet{tab: t, off: uint32(off), n: uint32(len(t.ids) - off)}
}

// setIDs is the set of the pairs of a listing's table (pairs) that ids
// name, as set makes it of their map: each of the table's pairs is
// looked up in t once a listing (fromList), not hashed again for each
// host. Two pairs of one key are one label, the last, as in a map made
// of them.
func (t *labelTab) setIDs(pairs [][2]string, ids []uint32) labelSet {
	if len(ids) == 0 {
		return labelSet{}
	}
	if t.ix == nil {
		t.ix = map[labelPair]uint32{}
	}
	if len(t.fromList) != len(pairs) || t.fromPairs != &pairs[0] {
		t.fromList, t.fromPairs = make([]uint32, len(pairs)), &pairs[0]
	}
	off := len(t.ids)
	for _, i := range ids {
		id := t.fromList[i]
		if id == 0 {
			p := labelPair{pairs[i][0], pairs[i][1]}
			x, ok := t.ix[p]
			if !ok {
				x = uint32(len(t.pairs))
				t.ix[p] = x
				t.pairs = append(t.pairs, p)
			}
			t.fromList[i], id = x+1, x+1
		}
		id--
		run := t.ids[off:]
		if j := slices.IndexFunc(run, func(o uint32) bool { return t.pairs[o].k == t.pairs[id].k }); j >= 0 {
			run = slices.Delete(run, j, j+1)
			t.ids = t.ids[:off+len(run)]
		}
		// Insertion in SortedLabels' order: a set is a few pairs.
		t.ids = append(t.ids, id)
		run = t.ids[off:]
		for j := len(run) - 1; j > 0 && pairLess(t.pairs[run[j]], t.pairs[run[j-1]]); j-- {
			run[j], run[j-1] = run[j-1], run[j]
		}
	}
	return labelSet{tab: t, off: uint32(off), n: uint32(len(t.ids) - off)}
}

// pairLess orders pairs as their "key=value" texts sort (SortedLabels),
// without making the texts.
func pairLess(a, b labelPair) bool {
	if a.k == b.k {
		return a.v < b.v
	}
	// The texts differ first within the shorter key, or where it ends:
	// there one text has '=' and the other the longer key's next byte.
	n := min(len(a.k), len(b.k))
	if a.k[:n] != b.k[:n] {
		return a.k[:n] < b.k[:n]
	}
	switch {
	case len(a.k) < len(b.k) && b.k[n] != '=':
		return '=' < b.k[n]
	case len(a.k) > len(b.k) && a.k[n] != '=':
		return a.k[n] < '='
	}
	return a.k+"="+a.v < b.k+"="+b.v // a key with '=' (refused at the entrance)
}

// setOf is a labelSet holding m itself (a map its backend keeps anyway).
func setOf(m map[string]string) labelSet { return labelSet{m: m} }

// len is the number of labels.
func (l labelSet) len() int {
	if l.tab == nil {
		return len(l.m)
	}
	return int(l.n)
}

// get is the value of label k.
func (l labelSet) get(k string) (string, bool) {
	if l.tab == nil {
		v, ok := l.m[k]
		return v, ok
	}
	for _, id := range l.tab.ids[l.off : l.off+l.n] {
		if p := l.tab.pairs[id]; p.k == k {
			return p.v, true
		}
	}
	return "", false
}

// text is the labels as the list shows them: SortedLabels joined by
// spaces.
func (l labelSet) text() string {
	if l.tab == nil {
		return strings.Join(model.SortedLabels(l.m), " ")
	}
	var b strings.Builder
	for i, id := range l.tab.ids[l.off : l.off+l.n] {
		if i > 0 {
			b.WriteByte(' ')
		}
		p := l.tab.pairs[id]
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

// toMap is the labels as a map (nil: none); a new one for a compact set.
func (l labelSet) toMap() map[string]string {
	if l.tab == nil || l.n == 0 {
		return l.m
	}
	m := make(map[string]string, l.n)
	for _, id := range l.tab.ids[l.off : l.off+l.n] {
		p := l.tab.pairs[id]
		m[p.k] = p.v
	}
	return m
}

// agentState is s as the model's constant when it is one: each host of a
// listing decoded from a server came with its own copy of "online".
func agentState(s model.AgentState) model.AgentState {
	for _, k := range [...]model.AgentState{model.AgentOnline, model.AgentOffline, model.AgentUnknown} {
		if s == k {
			return k
		}
	}
	return s
}

// procView is one process of a hostView: what it shares with the
// listing's processes of the same key and state (procShape), its pid and
// hosting. With its key, labels and state in each, a 100,000-host list's
// processes were 56 bytes each (~14 MB of ~245,000); shared, 24.
type procView struct {
	*procShape
	PID    int
	Hosted bool
}

// procShape is a process's key, labels and state, held once a listing
// (viewKeeper.shape) for the processes that share them.
type procShape struct {
	Key    string
	Labels map[string]string
	State  model.ProcState
}

// viewKeeper makes hostViews of a listing, holding each distinct process
// key and process label set once: decoded from a server, every (host,
// process) came with copies of its own. The
// processes of the listing's hosts share one array (one allocation, not
// one a host).
//
// With tab set (a listing from a server, whose label maps are the
// reader's to reuse) host label sets are made compact in tab; without,
// the backend's own maps are kept (the engine shares them with its
// registry: held anyway).
type viewKeeper struct {
	keys   map[string]string
	labels map[string]map[string]string // by process key: the last set seen
	shapes map[shapeKey]*procShape
	procs  []procView // room for the processes still to keep
	tab    *labelTab
}

// str is s, held once.
func (k *viewKeeper) str(s string) string {
	if s == "" {
		return ""
	}
	if kept, ok := k.keys[s]; ok {
		return kept
	}
	k.keys[s] = s
	return s
}

// sameMap reports whether a and b are one map (a listing from the
// embedded engine shares its definitions' label maps).
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func (k *viewKeeper) keep(v backend.HostView) hostView {
	if k.keys == nil {
		k.keys, k.labels = map[string]string{}, map[string]map[string]string{}
	}
	// A backend's own label maps are kept as they came: holding each
	// set once (hostLabels) cost a 100,000-host open ~50 ms more than
	// the list's 0.5 s target leaves (OpenHosts100k).
	h := hostView{Host: v.Host, State: agentState(v.State), Version: v.Version, AgentID: v.AgentID, labels: setOf(v.Labels)}
	if k.tab != nil {
		h.labels = k.tab.set(v.Labels)
	}
	if len(v.Procs) == 0 {
		return h
	}
	if len(k.procs) < len(v.Procs) {
		k.procs = make([]procView, max(len(v.Procs), 256))
	}
	h.Procs, k.procs = k.procs[:len(v.Procs):len(v.Procs)], k.procs[len(v.Procs):]
	for i := range v.Procs {
		pv := &v.Procs[i]
		key := k.str(pv.Key)
		labels := pv.Labels
		if last, ok := k.labels[key]; ok && (sameMap(last, labels) || maps.Equal(last, labels)) {
			labels = last
		} else {
			k.labels[key] = labels
		}
		h.Procs[i] = procView{procShape: k.shape(key, labels, pv.Status.State), PID: pv.Status.PID, Hosted: pv.Status.Hosted}
	}
	return h
}

// shapeKey names a procShape: its key and state (its labels are the
// last set kept for the key).
type shapeKey struct {
	key   string
	state model.ProcState
}

// shape is the listing's procShape of (key, labels, state), made when
// new; labels is the set kept for key (keep), the last one seen.
func (k *viewKeeper) shape(key string, labels map[string]string, state model.ProcState) *procShape {
	if k.shapes == nil {
		k.shapes = map[shapeKey]*procShape{}
	}
	sk := shapeKey{key, state}
	if sh, ok := k.shapes[sk]; ok && sameMap(sh.Labels, labels) {
		return sh
	}
	sh := &procShape{Key: key, Labels: labels, State: state}
	k.shapes[sk] = sh
	return sh
}

type hostsLoadedMsg struct {
	id    int
	rows  []hostRow          // the listing's hosts made rows as they were read (listRows)
	hosts []backend.HostView // or the listing as views, made rows when taken
	err   error
	first bool // the answer of loadFirst
}

func (m hostsLoadedMsg) pageID() int { return m.id }

// rowsOf is the message's rows: rows, or hosts made rows.
func (m hostsLoadedMsg) rowsOf() []hostRow {
	if m.rows != nil {
		return m.rows
	}
	return viewRows(m.hosts)
}

// viewRows makes a listing held whole rows in one go, the processes of
// all its hosts in one array (nil: none).
func viewRows(hosts []backend.HostView) []hostRow {
	if hosts == nil {
		return nil
	}
	rows := make([]hostRow, len(hosts))
	var k viewKeeper
	n := 0
	for i := range hosts {
		n += len(hosts[i].Procs)
	}
	k.procs = make([]procView, n)
	for i, h := range hosts {
		rows[i] = k.row(h)
	}
	return rows
}

func newHostsPage(s *shared, q backend.HostQuery) *hostsPage {
	return &hostsPage{s: s, id: s.newID(), q: q, sel: map[model.Host]bool{}, filter: newListFilter(filterHint), sort: unsorted()}
}

func (p *hostsPage) ID() int         { return p.id }
func (p *hostsPage) Capturing() bool { return p.filter.typing }
func (p *hostsPage) Close()          {}
func (p *hostsPage) Init() tea.Cmd   { return tea.Batch(p.loadFirst(), p.load()) }
func (p *hostsPage) Resume() tea.Cmd { return p.load() }

func (p *hostsPage) Title() string {
	var parts []string
	if p.q.Name != "" {
		parts = append(parts, p.q.Name)
	}
	parts = append(parts, model.SortedLabels(p.q.Labels)...)
	if len(parts) == 0 {
		return "hosts"
	}
	return strings.Join(parts, ",")
}

// onEvents reloads the table when a host event concerns a shown host (one
// reload at a time; nothing happens while nothing happens).
func (p *hostsPage) onEvents(evs []model.Event) tea.Cmd {
	ids := make(map[model.Host]bool, len(evs))
	for _, e := range evs {
		ids[e.Host] = true
	}
	for i := range p.rows {
		if ids[p.rows[i].v.Host] {
			return p.pace(p.rl.changed(p.s.now()))
		}
	}
	return nil
}

type hostsReloadMsg struct{ id int }

func (m hostsReloadMsg) pageID() int { return m.id }

func (p *hostsPage) pace(load bool, wait time.Duration) tea.Cmd {
	return paced(load, wait, p.load, hostsReloadMsg{p.id})
}

func (p *hostsPage) load() tea.Cmd {
	p.rl.started(p.s.now())
	ctx, be, id, q := p.s.ctx, p.s.be, p.id, p.q
	return func() tea.Msg {
		rows, err := listRows(ctx, be, q)
		return hostsLoadedMsg{id: id, rows: rows, err: err}
	}
}

// listRows lists the hosts of q made rows as the backend hands them over
// (backend.HostListEach: from a server, in the list form, which carries
// what a row keeps of each process and no more). Held whole as views, a
// listing of 100,000 hosts (~90 MB, mostly process statuses) next to its
// rows was the remote console's peak as a list opened.
//
// A backend that lists in memory (the engine) gives its views at once:
// they are made rows in one go, the rows and processes allocated once
// (host by host, a 99,747-host open took ~240 ms more: OpenHosts100k).
func listRows(ctx context.Context, be backend.Backend, q backend.HostQuery) ([]hostRow, error) {
	if s, ok := be.(interface{ streamsHosts() bool }); !ok || !s.streamsHosts() {
		hv, err := be.Hosts(ctx, q)
		return viewRows(hv), err
	}
	// In chunks, then copied once into a slice of the exact size: a
	// slice grown by append (~160 bytes a row) was ~110 ms of a
	// 98,754-host open in copies and allocations.
	const chunk = 4096
	k := viewKeeper{tab: &labelTab{}}
	var (
		full [][]hostRow
		cur  []hostRow
	)
	add := func(r hostRow) {
		if len(cur) == cap(cur) {
			if cur != nil {
				full = append(full, cur)
			}
			cur = make([]hostRow, 0, chunk)
		}
		cur = append(cur, r)
	}
	// From a server, each host's labels as the list form carries them
	// (ids into the listing's table): made a map for each host, then
	// hashed pair by pair into the rows' table, they were ~40% of the
	// console's CPU of a 98,754-host open (BenchmarkOpenHostsRemote100k).
	var err error
	indexed := false
	if g, ok := be.(*guarded); ok {
		indexed, err = g.hostListIndexed(ctx, q, func(pairs [][2]string, ids []uint32, v *backend.HostView) {
			r := k.row(*v)
			if pairs != nil {
				r.v.labels = k.tab.setIDs(pairs, ids)
			}
			add(r)
		})
	}
	if !indexed {
		err = backend.HostListEach(ctx, be, q, func(v *backend.HostView) { add(k.row(*v)) })
	}
	if len(full) == 0 {
		return cur, err
	}
	rows := make([]hostRow, 0, len(full)*chunk+len(cur))
	for _, c := range full {
		rows = append(rows, c...)
	}
	return append(rows, cur...), err
}

// loadFirst asks for the first hosts only, a screen or two, while load
// lists them all: a list of 100,000 hosts opens with its first rows (the
// backend's first hosts, in the page's order) in the time of those,
// navigable, and takes action keys once it is whole. Its answer is
// dropped once anything else has been shown.
func (p *hostsPage) loadFirst() tea.Cmd {
	ctx, be, id, q := p.s.ctx, p.s.be, p.id, p.q
	q.Limit = max(2*p.h, 100)
	return func() tea.Msg {
		rows, err := listRows(ctx, be, q)
		return hostsLoadedMsg{id: id, rows: rows, err: err, first: true}
	}
}

func (p *hostsPage) SetSize(w, h int) {
	p.w, p.h = w, h
	p.filter.input.Width = max(w-4, 10)
	p.list.setHeight(h - 3)
}

func (p *hostsPage) Help() keyHelp {
	k := p.s.keys
	open := k.Open
	open.SetHelp(k.Open.Help().Key, "host details")
	return keyHelp{
		short: []binding{k.Select, k.SelectAll, k.Op, k.Filter, k.Sort},
		full: [][]binding{k.nav(), {k.Select, k.SelectAll, k.ClearSel, k.Filter, k.Sort, k.SortReverse},
			{k.Op, open, k.Logs, p.s.change(k.Edit), k.Reload}},
	}
}

// newHostRow keeps what sorting, filtering and selection need; the text
// of the other cells is built by display, for the rows drawn only (a list
// of 100,000 hosts draws 40 of them).
func newHostRow(v backend.HostView) hostRow {
	var k viewKeeper
	return k.row(v)
}

func (k *viewKeeper) row(v backend.HostView) hostRow {
	r := hostRow{v: k.keep(v)}
	for _, pv := range r.v.Procs {
		if r.state == "" || procRank(pv.State) < procRank(r.state) {
			r.state = pv.State
		}
	}
	return r
}

// hostCells is the text of a row's PROCESS, PID, HOSTED and LABELS cells.
type hostCells struct{ procs, pid, hosted, labels string }

func (r *hostRow) display() hostCells {
	v := &r.v
	c := hostCells{hosted: "-", pid: "-"}
	hosted := 0
	for _, pv := range v.Procs {
		if pv.Hosted {
			hosted++
		}
	}
	switch {
	case len(v.Procs) == 1:
		c.procs = procName(v.Procs[0].Key)
		if v.Procs[0].PID > 0 {
			c.pid = strconv.Itoa(v.Procs[0].PID)
		}
	case len(v.Procs) > 1:
		c.procs = fmt.Sprintf("%s +%d", procName(v.Procs[0].Key), len(v.Procs)-1)
	}
	switch {
	case len(v.Procs) == 0:
	case hosted == len(v.Procs):
		c.hosted = "yes"
	case hosted == 0:
		c.hosted = "no"
	default:
		c.hosted = fmt.Sprintf("%d/%d", hosted, len(v.Procs))
	}
	c.labels = v.labels.text()
	return c
}

// sortRows orders the rows by the sort column (hosts in their canonical
// order within equal keys, and when unsorted); the filter keeps this order.
func (p *hostsPage) sortRows() {
	p.keys = nil // by row
	col := p.sort.col
	if (col < 0 || col == 1) && p.sortByHostKey() {
		return
	}
	// One key per row, computed once (a label key over 100,000 rows),
	// and the host's place in the host order: its hostKey, or when a
	// host is not plain IPv4, every row's model.HostOrder (rows keep
	// neither: 48 bytes a row of a 100,000-host list).
	type keyed struct {
		n   int
		s   string
		row int
		hk  hostKey
	}
	keys := make([]keyed, len(p.rows))
	var ords []model.HostOrder
	for i := range p.rows {
		r := &p.rows[i]
		k := keyed{row: i}
		var plain bool
		if k.hk, plain = plainKey(r.v.Host); !plain && ords == nil {
			ords = make([]model.HostOrder, len(p.rows))
			for j := range p.rows {
				ords[j] = p.rows[j].v.Host.Order()
			}
		}
		switch col {
		case 0:
			k.n = int(r.v.Host.CloudID)
		case 2:
			k.s = string(r.v.State)
		case 3:
			if len(r.v.Procs) > 0 {
				k.s = procName(r.v.Procs[0].Key)
			}
		case 4:
			k.n = procRank(r.state)
		case 5:
			if len(r.v.Procs) == 1 {
				k.n = r.v.Procs[0].PID
			}
		case 6:
			for _, pv := range r.v.Procs {
				if pv.Hosted {
					k.n++
				}
			}
		case 7:
			k.s = r.v.labels.text()
		}
		keys[i] = k
	}
	hostOrder := func(a, b keyed) int {
		if ords != nil {
			return ords[a.row].Compare(ords[b.row])
		}
		return cmp.Compare(a.hk, b.hk)
	}
	order := func(a, b keyed) int {
		if col < 0 || col == 1 { // IP: the canonical order is the address order
			return p.sort.apply(hostOrder(a, b))
		}
		c := cmp.Compare(a.n, b.n)
		if c == 0 {
			c = strings.Compare(a.s, b.s)
		}
		if c == 0 {
			return hostOrder(a, b) // ties in host order, both directions
		}
		return p.sort.apply(c)
	}
	if slices.IsSortedFunc(keys, order) {
		return // a listing comes in host order: no copy of the rows
	}
	slices.SortStableFunc(keys, order)
	sorted := make([]hostRow, len(p.rows))
	for i, k := range keys {
		sorted[i] = p.rows[k.row]
	}
	p.rows = sorted
}

// sortByHostKey sorts the rows in host order (the list's own, or by IP,
// as sortRows would), when every host is a plain IPv4 one: by 8-byte keys
// and row numbers, not sortRows' 48-byte keys with their comparison
// through closures (a stable sort of those was ~45 ms of a 98,754-host
// open from a server, whose listing is not in host order). Ties (one host
// listed twice) stay in row order, as the stable sort leaves them. It
// reports false, having changed nothing, when a host is not plain.
func (p *hostsPage) sortByHostKey() bool {
	type keyed struct {
		k   hostKey
		row int
	}
	keys := make([]keyed, len(p.rows))
	sorted := true
	for i := range p.rows {
		k, plain := plainKey(p.rows[i].v.Host)
		if !plain {
			return false
		}
		keys[i] = keyed{k, i}
		if i > 0 && p.sort.apply(cmp.Compare(keys[i-1].k, k)) > 0 {
			sorted = false
		}
	}
	if sorted {
		return true // a listing in host order: no copy of the rows
	}
	slices.SortFunc(keys, func(a, b keyed) int {
		if c := p.sort.apply(cmp.Compare(a.k, b.k)); c != 0 {
			return c
		}
		return cmp.Compare(a.row, b.row)
	})
	rows := make([]hostRow, len(p.rows))
	for i, k := range keys {
		rows[i] = p.rows[k.row]
	}
	p.rows = rows
	return true
}

// procRank orders process states worst first.
func procRank(s model.ProcState) int {
	switch s {
	case model.ProcFatal:
		return 0
	case model.ProcBackoff:
		return 1
	case model.ProcExited:
		return 2
	case model.ProcUnknown:
		return 3
	case model.ProcStopped:
		return 4
	case model.ProcStarting, model.ProcStopping:
		return 5
	case model.ProcRunning:
		return 6
	}
	return 7
}

// applyFilter recomputes the shown rows (see filter.go for the syntax),
// keeping the cursor on the host it was on when that host is still shown.
func (p *hostsPage) applyFilter() { p.applyFilterOn(p.cursorID()) }

// cursorID is the host under the cursor (zero for none). Take it before
// p.rows change or are sorted: p.shown indexes the rows as they were.
func (p *hostsPage) cursorID() model.Host {
	if r, ok := p.cursorRow(); ok {
		return r.v.Host
	}
	return model.Host{}
}

// applyFilterOn is applyFilter with the cursor put back on host cur.
func (p *hostsPage) applyFilterOn(cur model.Host) {
	text := p.filter.value()
	keep := make([]int, 0, len(p.shown))
	if strings.TrimSpace(text) == "" {
		for i := range p.rows {
			keep = append(keep, i)
		}
	} else {
		if p.keys == nil {
			p.names = procNames(p.rows)
			p.keys = keyRows(p.rows, p.names)
		}
		m := newHostMatcherOf(text, p.names)
		for i := range p.rows {
			if m.matchKeyed(p.keys[i], &p.rows[i]) {
				keep = append(keep, i)
			}
		}
	}
	p.shown = keep
	p.list.setLen(len(keep))
	if cur == (model.Host{}) {
		return
	}
	for pos, i := range keep {
		if p.rows[i].v.Host == cur {
			p.list.cursor = pos
			p.list.clamp()
			break
		}
	}
}

// procLabels is the page's label selector plus the typed key=value filters
// that name process labels (those only naming host labels just narrow the
// hosts): an op then acts on the processes the operator filtered to.
func (p *hostsPage) procLabels() map[string]string {
	out := map[string]string{}
	for k, v := range p.q.Labels {
		out[k] = v
	}
	for _, tok := range strings.Fields(p.filter.value()) {
		k, v, ok := strings.Cut(tok, "=")
		if !ok || k == "" {
			continue
		}
		for _, r := range p.rows {
			if isProcLabel(r.v, k) {
				out[k] = v
				break
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func isProcLabel(v hostView, k string) bool {
	for _, pv := range v.Procs {
		if hasKey(pv.Labels, k) {
			return true
		}
	}
	return false
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

func (p *hostsPage) cursorRow() (*hostRow, bool) {
	if p.list.cursor < 0 || p.list.cursor >= len(p.shown) {
		return nil, false
	}
	return &p.rows[p.shown[p.list.cursor]], true
}

// targetHosts is the selection, or the host under the cursor when nothing
// is selected.
func (p *hostsPage) targetHosts() []model.Host {
	var out []model.Host
	if len(p.sel) > 0 {
		for _, r := range p.rows {
			if p.sel[r.v.Host] {
				out = append(out, r.v.Host)
			}
		}
		return out
	}
	if r, ok := p.cursorRow(); ok {
		out = append(out, r.v.Host)
	}
	return out
}

// opTarget is the selection, or the host under the cursor.
func (p *hostsPage) opTarget() (target, bool) {
	if !p.loaded {
		p.s.notReady("hosts")
		return target{}, false
	}
	hosts := p.targetHosts()
	if len(hosts) == 0 {
		p.s.post(flashMsg{"no host to operate on"})
		return target{}, false
	}
	return target{sel: backend.Selector{Namespace: p.q.Namespace, Name: p.q.Name, Labels: p.procLabels(), Hosts: hosts},
		hosts: len(hosts), cursor: len(p.sel) == 0}, true
}

func (p *hostsPage) Update(msg tea.Msg) tea.Cmd {
	k := p.s.keys
	switch msg := msg.(type) {
	case hostsReloadMsg:
		p.rl.fired()
		return p.load()
	case hostsLoadedMsg:
		if msg.first {
			// Only onto an empty page: never over the whole list, nor
			// over a failure (the whole list's load reports its own).
			if p.loaded || len(p.rows) > 0 || msg.err != nil {
				return nil
			}
			p.first = true
			p.setRows(msg.rowsOf(), model.Host{})
			return nil
		}
		// The cursor keeps its host, but one the operator has not moved
		// from the first page's top stays at the top: the backend's first
		// hosts need not be the first in the page's order (a merged
		// fleet lists one side's hosts, then the other's).
		cur := p.cursorID()
		if p.first && p.list.cursor == 0 {
			cur = model.Host{}
		}
		if msg.err != nil && p.first {
			// The first page is not the list: a failure shows no rows.
			p.rows, p.shown = nil, nil
			p.list.setLen(0)
		}
		p.loaded, p.first = true, false
		next := p.pace(p.rl.done(p.s.now())) // for the events told meanwhile
		if msg.err != nil {
			p.err = msg.err
			return tea.Batch(errCmd("list hosts", msg.err), next)
		}
		if p.err != nil {
			p.err = nil
			p.s.resolved("list hosts")
		}
		p.fresh.at = p.s.now()
		p.setRows(msg.rowsOf(), cur)
		return next
	case tea.KeyMsg:
		if p.filter.typing {
			changed, cmd := p.filter.key(msg)
			if changed {
				p.applyFilter()
			}
			return cmd
		}
		if p.list.navigate(k, msg) {
			return nil
		}
		if !p.loaded && !keyIs(msg, k.Reload) {
			return p.s.notReady("hosts")
		}
		switch {
		case keyIs(msg, k.Filter):
			return p.filter.start()
		case keyIs(msg, k.Sort), keyIs(msg, k.SortReverse):
			if keyIs(msg, k.Sort) {
				p.sort.next(len(hostCols()))
			} else {
				p.sort.reverse()
			}
			cur := p.cursorID()
			p.sortRows()
			p.applyFilterOn(cur)
		case keyIs(msg, k.Back) && p.filter.value() != "":
			p.filter.clear()
			p.applyFilter()
		case keyIs(msg, k.Select):
			if r, ok := p.cursorRow(); ok {
				if p.sel[r.v.Host] {
					delete(p.sel, r.v.Host)
				} else {
					p.sel[r.v.Host] = true
				}
				p.list.move(1)
			}
		case keyIs(msg, k.SelectAll):
			all := true
			for _, i := range p.shown {
				if !p.sel[p.rows[i].v.Host] {
					all = false
					break
				}
			}
			for _, i := range p.shown {
				if all {
					delete(p.sel, p.rows[i].v.Host)
				} else {
					p.sel[p.rows[i].v.Host] = true
				}
			}
		case keyIs(msg, k.ClearSel):
			clear(p.sel)
		case keyIs(msg, k.Op):
			return p.s.openOp(p, nil)
		case keyIs(msg, k.Edit):
			r, ok := p.cursorRow()
			if !ok || len(r.v.Procs) == 0 {
				return p.s.post(flashMsg{"no process on this row to edit"})
			}
			if len(r.v.Procs) == 1 {
				return p.editProc(r.v.Procs[0].Key)
			}
			// Several processes on the host: ask which.
			var cmds []Command
			for _, pv := range r.v.Procs {
				key := pv.Key
				cmds = append(cmds, Command{Name: key, Help: procGlyph(pv.State).text(), Run: func(string) tea.Cmd { return p.editProc(key) }})
			}
			return p.s.post(chooseMsg{prompt: "which process of " + r.v.Host.AgentID() + " to edit?", kind: kindProcess, cmds: cmds})
		case keyIs(msg, k.Open):
			if r, ok := p.cursorRow(); ok {
				return p.s.post(pushMsg{newHostPage(p.s, r.v.Host, nil)})
			}
		case keyIs(msg, k.Logs):
			var on []procOn
			add := func(r *hostRow) {
				for _, pv := range r.v.Procs {
					on = append(on, procOn{pv.Key, r.v.Host})
				}
			}
			if len(p.sel) > 0 {
				for i := range p.rows {
					if p.sel[p.rows[i].v.Host] {
						add(&p.rows[i])
					}
				}
			} else if r, ok := p.cursorRow(); ok {
				add(r)
			}
			return p.s.openLogs(on)
		case keyIs(msg, k.Reload):
			return p.load()
		}
	}
	return nil
}

// setRows takes a listing: its rows sorted and filtered as the page is,
// the cursor back on host cur (see applyFilterOn).
func (p *hostsPage) setRows(rows []hostRow, cur model.Host) {
	p.names, p.keys = nil, nil
	p.rows = rows
	p.sortRows()
	p.applyFilterOn(cur)
}

func (p *hostsPage) editProc(procKey string) tea.Cmd {
	if p.s.readOnly {
		return p.s.post(flashMsg{readOnlyEdit})
	}
	ctx, be := p.s.ctx, p.s.be
	s := p.s
	ns, name, _ := model.SplitKey(procKey)
	return func() tea.Msg {
		defs, err := be.Processes(ctx, backend.ProcQuery{Namespace: ns, Name: name})
		if err != nil {
			return errMsg{"load process " + procKey, err}
		}
		if len(defs) == 0 {
			return errMsg{"load process " + procKey, model.ErrNotFound}
		}
		return pushMsg{newFormPage(s, defs[0], false)}
	}
}

func hostCols() []column {
	return []column{
		{title: "CLOUD", width: 5, right: true}, {title: "IP", width: 15, min: 15}, {title: "AGENT", width: 10, min: 8},
		{title: "PROCESS", width: 12, flex: true, grow: 2, min: 8}, {title: "STATE", width: 10, min: 9}, {title: "PID", width: 7, right: true},
		{title: "HOSTED", width: 6, optional: true}, {title: "LABELS", width: 8, flex: true, grow: 3, optional: true},
	}
}

func (p *hostsPage) View() string {
	t := p.s.theme
	var b strings.Builder
	// Line 1: counts and selection, or the filter being typed.
	hidden := 0
	if len(p.sel) > 0 && len(p.shown) < len(p.rows) {
		vis := 0
		for _, i := range p.shown {
			if p.sel[p.rows[i].v.Host] {
				vis++
			}
		}
		hidden = len(p.sel) - vis
	}
	switch {
	case p.filter.typing:
		b.WriteString(p.filter.input.View())
	case !p.loaded && p.first:
		b.WriteString(t.Muted.Render(fmt.Sprintf("loading hosts… the first %d shown · %s", len(p.rows), p.list.scrollInfo())))
	case !p.loaded:
		b.WriteString(t.Muted.Render("loading hosts…"))
	case p.err != nil && len(p.rows) == 0:
		return loadFailed(p.s, "the hosts", p.err, p.w)
	case p.err != nil:
		b.WriteString(staleLine(p.s, p.err))
	default:
		info := plural(len(p.rows), "host")
		if len(p.shown) != len(p.rows) {
			info += fmt.Sprintf(" · %d shown", len(p.shown))
		}
		if f := p.filter.value(); f != "" {
			info += " · filter " + t.Title.Render(f)
		}
		if d := p.sort.describe(hostCols()); d != "" {
			info += " · " + d
		}
		if len(p.sel) > 0 {
			sel := fmt.Sprintf(" · %d selected", len(p.sel))
			if hidden > 0 {
				sel += fmt.Sprintf(" (%d hidden by filter)", hidden)
			}
			info += t.Selected.Render(sel)
		} else if len(p.rows) > 0 {
			info += t.Muted.Render(" · space select, a all, o operate")
		}
		info += t.Muted.Render(" · " + p.list.scrollInfo())
		b.WriteString(info)
	}
	cols := p.sort.mark(hostCols())
	wd := layout(cols, p.w)
	b.WriteString("\n" + header(t, cols, wd))
	if p.loaded && len(p.shown) == 0 {
		if len(p.rows) == 0 {
			b.WriteString("\n" + t.Muted.Render("  No host matches this selection."))
		} else {
			b.WriteString("\n" + t.Muted.Render("  No host matches the filter (esc clears it)."))
		}
	}
	p.list.first = strings.Count(b.String(), "\n") + 1 // where a click finds the rows
	s, e := p.list.window()
	// One set of cells and styles for every row drawn (renderRow keeps
	// neither): a frame made two slices and two styles a row.
	cells := make([]string, 8)
	var as, pst lipgloss.Style
	styles := []*lipgloss.Style{nil, nil, &as, nil, &pst}
	for i := s; i < e; i++ {
		r := &p.rows[p.shown[i]]
		ag, ps := agentGlyph(r.v.State), procGlyph(r.state)
		dc := r.display()
		cells[0], cells[1] = cell(strconv.Itoa(r.v.Host.CloudID), wd[0], true), cell(r.v.Host.IP, wd[1], false)
		cells[2], cells[3], cells[4] = cell(ag.text(), wd[2], false), cell(orDash(dc.procs), wd[3], false), cell(ps.text(), wd[4], false)
		cells[5], cells[6], cells[7] = cell(dc.pid, wd[5], true), cell(dc.hosted, wd[6], false), cell(dc.labels, wd[7], false)
		as, pst = ag.style(t), ps.style(t)
		b.WriteByte('\n')
		b.WriteString(renderRow(t, i == p.list.cursor, p.sel[r.v.Host], cells, styles))
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// click moves the cursor to the row at page line y; a click in the
// selection column (the first two cells) also selects or unselects it.
func (p *hostsPage) click(x, y int) {
	if !p.list.click(y) || x >= 2 {
		return
	}
	if r, ok := p.cursorRow(); ok {
		if p.sel[r.v.Host] {
			delete(p.sel, r.v.Host)
		} else {
			p.sel[r.v.Host] = true
		}
	}
}
