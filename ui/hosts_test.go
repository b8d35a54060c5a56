package ui

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	tea "github.com/charmbracelet/bubbletea"

	"gseproc/backend"
	"gseproc/model"
)

// TestHostsFirstPage: a host list opens with the backend's first hosts
// while the whole list loads. Those rows are navigable, marked as the first
// ones, and take no action key (select all, operate) until the list is
// whole; the whole list keeps the cursor on its host; a first page that
// answers after the whole list is dropped; and a failed load of the whole
// list shows the failure, not the first page as if it were the list.
func TestHostsFirstPage(t *testing.T) {
	s := benchShared(t, 120, 40)
	all := fleet10k(500)
	open := func() *hostsPage {
		p := newHostsPage(s, backend.HostQuery{Namespace: "web"})
		p.SetSize(120, 36)
		p.Update(hostsLoadedMsg{id: p.id, hosts: all[:100], first: true})
		return p
	}
	p := open()
	if p.loaded || !p.first || len(p.rows) != 100 {
		t.Fatalf("first page: loaded %v first %v rows %d", p.loaded, p.first, len(p.rows))
	}
	if v := p.View(); !strings.Contains(v, "loading hosts… the first 100 shown") || !strings.Contains(v, all[0].Host.IP) {
		t.Fatalf("first page view:\n%s", v)
	}
	p.Update(keyMsg("j"))
	p.Update(keyMsg("j"))
	on, _ := p.cursorRow()
	want := on.v.Host
	for _, k := range []string{"a", " ", "o", "/"} {
		p.Update(keyMsg(k))
	}
	if len(p.sel) != 0 || p.filter.typing {
		t.Fatalf("an action key was taken on the first page: %d selected, filter typing %v", len(p.sel), p.filter.typing)
	}
	p.Update(hostsLoadedMsg{id: p.id, hosts: all})
	if !p.loaded || p.first || len(p.rows) != len(all) {
		t.Fatalf("whole list: loaded %v first %v rows %d", p.loaded, p.first, len(p.rows))
	}
	if r, _ := p.cursorRow(); r.v.Host != want {
		t.Fatalf("cursor on %s, was on %s", r.v.Host, want)
	}
	if v := p.View(); strings.Contains(v, "first 100") || !strings.Contains(v, "500 hosts") {
		t.Fatalf("whole list view:\n%s", v)
	}
	// A first page answering late changes nothing.
	p.Update(hostsLoadedMsg{id: p.id, hosts: all[:100], first: true})
	if len(p.rows) != len(all) || !p.loaded {
		t.Fatalf("a late first page replaced the list: %d rows", len(p.rows))
	}
	p.Update(keyMsg("a"))
	if len(p.sel) != len(all) {
		t.Fatalf("select all on the whole list: %d", len(p.sel))
	}

	// The whole list fails after the first page: no rows, the failure.
	p = open()
	p.Update(hostsLoadedMsg{id: p.id, err: errors.New("server gone")})
	if len(p.rows) != 0 || len(p.shown) != 0 {
		t.Fatalf("the first page stayed as the list after a failure: %d rows", len(p.rows))
	}
	if v := p.View(); !strings.Contains(v, "server gone") || strings.Contains(v, all[0].Host.IP) {
		t.Fatalf("failed view:\n%s", v)
	}
	// A first page after the failure stays out too.
	p.Update(hostsLoadedMsg{id: p.id, hosts: all[:100], first: true})
	if len(p.rows) != 0 {
		t.Fatalf("a first page after the failure: %d rows", len(p.rows))
	}
}

// TestHostsReloadKeepsCursor: a listing or a sort that changes the rows
// puts the cursor back on the host it was on, found by name: the shown
// rows index the rows as they were, so reading the cursor's host after
// they changed took another host, or indexed past a shorter list (panic).
func TestHostsReloadKeepsCursor(t *testing.T) {
	s := benchShared(t, 120, 40)
	all := fleet10k(20)
	p := newHostsPage(s, backend.HostQuery{Namespace: "web"})
	p.SetSize(120, 36)
	p.Update(hostsLoadedMsg{id: p.id, hosts: all})
	for range 15 {
		p.Update(keyMsg("j"))
	}
	// The list shrinks under the cursor: no panic, the cursor on a row.
	p.Update(hostsLoadedMsg{id: p.id, hosts: all[:5]})
	if _, ok := p.cursorRow(); !ok || len(p.rows) != 5 {
		t.Fatalf("after a shorter list: cursor %d, %d rows", p.list.cursor, len(p.rows))
	}
	p.Update(hostsLoadedMsg{id: p.id, hosts: all})
	p.Update(keyMsg("j"))
	p.Update(keyMsg("j"))
	on, _ := p.cursorRow()
	want := on.v.Host
	// A host ahead of it leaves: the cursor stays on its host.
	var less []backend.HostView
	for _, h := range all {
		if r := newHostRow(h); r.v.Host != p.rows[0].v.Host {
			less = append(less, h)
		}
	}
	p.Update(hostsLoadedMsg{id: p.id, hosts: less})
	if r, ok := p.cursorRow(); !ok || r.v.Host != want {
		t.Fatalf("after a reload without the first host: cursor on %v, was on %s", r, want)
	}
	// Sorted by another column, reversed: the cursor stays on its host.
	for _, k := range []string{"s", "S", "s", "s"} {
		p.Update(keyMsg(k))
		if r, ok := p.cursorRow(); !ok || r.v.Host != want {
			t.Fatalf("after sort key %q: cursor on %v, was on %s", k, r, want)
		}
	}
}

// TestHostsFirstPageUntouchedStaysAtTop: the backend's first hosts need
// not be the first of the page's order (a merged fleet lists the primary's
// hosts, then the secondary's); when the whole list comes and the
// operator has not moved the cursor, the page shows the list from its top
// instead of jumping to where the first page's top host now sits. A
// cursor the operator moved stays on its host (TestHostsFirstPage).
func TestHostsFirstPageUntouchedStaysAtTop(t *testing.T) {
	s := benchShared(t, 120, 40)
	all := fleet10k(500)
	p := newHostsPage(s, backend.HostQuery{Namespace: "web"})
	p.SetSize(120, 36)
	p.Update(hostsLoadedMsg{id: p.id, hosts: all[400:], first: true})
	p.Update(hostsLoadedMsg{id: p.id, hosts: all})
	top := p.rows[p.shown[0]].v.Host
	if r, ok := p.cursorRow(); !ok || p.list.cursor != 0 || r.v.Host != top {
		t.Fatalf("untouched cursor at row %d (%v), want row 0 (%s)", p.list.cursor, r, top)
	}
	// Moved on the first page: it stays on its host.
	p = newHostsPage(s, backend.HostQuery{Namespace: "web"})
	p.SetSize(120, 36)
	p.Update(hostsLoadedMsg{id: p.id, hosts: all[400:], first: true})
	p.Update(keyMsg("j"))
	on, _ := p.cursorRow()
	want := on.v.Host
	p.Update(hostsLoadedMsg{id: p.id, hosts: all})
	if r, ok := p.cursorRow(); !ok || r.v.Host != want {
		t.Fatalf("moved cursor on %v, was on %s", r, want)
	}
}

// TestViewKeeperHoldsRepeatsOnce: a listing's rows share one copy of each
// process key and process label set, as a server's answer decodes them
// apart, and keep what the list shows.
func TestViewKeeperHoldsRepeatsOnce(t *testing.T) {
	view := func(ip, zone string, st model.ProcState, pid int) backend.HostView {
		return backend.HostView{HostInfo: model.HostInfo{Host: model.Host{IP: ip}, State: model.AgentState(string([]byte("online"))),
			Version: string([]byte("2.1.0")), Labels: map[string]string{"zone": zone, "rack": "r01"}},
			Procs: []backend.ProcView{{Key: string([]byte("web:nginx")), Labels: map[string]string{"app": "nginx"},
				Status: model.ProcStatus{State: st, PID: pid, Hosted: true, CPU: 3}}}}
	}
	var k viewKeeper
	a, b, c := k.row(view("10.0.0.1", "a", model.ProcRunning, 7)), k.row(view("10.0.0.2", "a", model.ProcStopped, 0)), k.row(view("10.0.0.3", "b", model.ProcRunning, 9))
	same := func(x, y map[string]string) bool {
		return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	}
	if a.v.labels.toMap()["zone"] != "a" || c.v.labels.toMap()["zone"] != "b" || b.v.Version != "2.1.0" {
		t.Fatalf("host labels or version: %v %v %q", a.v.labels.toMap(), c.v.labels.toMap(), b.v.Version)
	}
	if !same(a.v.Procs[0].Labels, c.v.Procs[0].Labels) || unsafe.StringData(a.v.Procs[0].Key) != unsafe.StringData(c.v.Procs[0].Key) {
		t.Fatal("a process's key or labels are held twice")
	}
	want := procView{procShape: &procShape{Key: "web:nginx", Labels: map[string]string{"app": "nginx"}, State: model.ProcStopped}, PID: 0, Hosted: true}
	if !reflect.DeepEqual(b.v.Procs[0], want) || b.state != model.ProcStopped || b.v.Host.IP != "10.0.0.2" || b.v.State != model.AgentOnline {
		t.Fatalf("row %+v, want process %+v", b, want)
	}
}

// TestCompactLabelsAsFromAMap: a listing from a server (the client
// reuses one label map for every host, backend.HostsReader) is kept as
// compact label sets, each distinct pair held once; the list shows,
// filters and sorts them as it does the engine's maps, and a set stays
// as it was read when the reader's map is refilled.
func TestCompactLabelsAsFromAMap(t *testing.T) {
	sets := []map[string]string{
		{"zone": "a", "rack": "r01", "a.b": "x", "ab": "y", "a": "z"},
		{"zone": "b", "rack": "r01"},
		{"zone": "a", "rack": "r02", "role": "db"},
		nil,
		{"zone": "b", "rack": "r02", "a": "z"},
	}
	views := make([]backend.HostView, len(sets))
	for i, l := range sets {
		views[i] = backend.HostView{HostInfo: model.HostInfo{Host: model.Host{IP: "10.0.0." + string(rune('1'+i))}, Labels: l, State: model.AgentOnline},
			Procs: []backend.ProcView{{Key: "web:nginx", Labels: map[string]string{"app": "nginx"}, Status: model.ProcStatus{State: model.ProcRunning}}}}
	}
	// As the client hands them over: one map, emptied and refilled.
	k := viewKeeper{tab: &labelTab{}}
	reused := map[string]string{}
	var compact []hostRow
	for _, v := range views {
		clear(reused)
		for key, val := range v.Labels {
			reused[key] = val
		}
		v.Labels = reused
		compact = append(compact, k.row(v))
	}
	clear(reused)
	reused["zone"] = "changed"
	pairs := map[labelPair]bool{}
	for i, r := range compact {
		if r.v.labels.m != nil {
			t.Fatalf("row %d keeps the reader's map", i)
		}
		want := strings.Join(model.SortedLabels(sets[i]), " ")
		if got := r.v.labels.text(); got != want {
			t.Fatalf("row %d labels %q, want %q", i, got, want)
		}
		if !reflect.DeepEqual(r.v.labels.toMap(), sets[i]) && len(sets[i]) > 0 {
			t.Fatalf("row %d labels %v, want %v", i, r.v.labels.toMap(), sets[i])
		}
		if v, ok := r.v.labels.get("zone"); ok != (sets[i]["zone"] != "") || v != sets[i]["zone"] {
			t.Fatalf("row %d zone %q %v", i, v, ok)
		}
		if _, ok := r.v.labels.get("nothing"); ok {
			t.Fatalf("row %d has a label it was not given", i)
		}
		for key, val := range sets[i] {
			pairs[labelPair{key, val}] = true
		}
	}
	if len(k.tab.pairs) != len(pairs) {
		t.Fatalf("%d pairs held for %d distinct", len(k.tab.pairs), len(pairs))
	}

	// The same list from maps (the engine's) and from compact sets: the
	// same screen, the same filter, the same order by LABELS.
	s := benchShared(t, 160, 40)
	open := func(rows []hostRow) *hostsPage {
		p := newHostsPage(s, backend.HostQuery{Namespace: "web"})
		p.SetSize(160, 36)
		p.Update(hostsLoadedMsg{id: p.id, rows: rows})
		return p
	}
	pm, pc := open(viewRows(views)), open(compact)
	if pm.View() != pc.View() {
		t.Fatalf("from maps:\n%s\ncompact:\n%s", pm.View(), pc.View())
	}
	for _, p := range []*hostsPage{pm, pc} {
		p.Update(keyMsg("/"))
		for _, r := range "zone=a" {
			p.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
		}
		p.Update(keyMsg("enter"))
	}
	if len(pc.shown) != 2 || pm.View() != pc.View() {
		t.Fatalf("filter zone=a: %d shown\nfrom maps:\n%s\ncompact:\n%s", len(pc.shown), pm.View(), pc.View())
	}
	for _, p := range []*hostsPage{pm, pc} {
		p.Update(keyMsg("esc"))
		for p.sort.col != 7 {
			p.Update(keyMsg("s"))
		}
	}
	if len(pc.shown) != len(sets) || pm.View() != pc.View() || !strings.Contains(pc.View(), "LABELS") {
		t.Fatalf("sorted by labels:\nfrom maps:\n%s\ncompact:\n%s", pm.View(), pc.View())
	}
}

// TestHostsOrderWithoutKeptOrders: a host list keeps no host order a
// row; it orders its rows as model.HostOrder does, by the IP column both
// ways and for ties of another column, plain IPv4 hosts alone and mixed
// with IPv6 and text hosts.
func TestHostsOrderWithoutKeptOrders(t *testing.T) {
	plain := []model.Host{{IP: "10.0.0.10"}, {IP: "10.0.0.2"}, {IP: "9.0.0.1", CloudID: 1}, {IP: "10.0.0.1", CloudID: 1}, {IP: "10.0.1.0"}}
	mixed := append(slices.Clone(plain), model.Host{IP: "fe80::1"}, model.Host{IP: "::ffff:10.0.0.3"}, model.Host{IP: "host-a"}, model.Host{IP: "2001:db8::1", CloudID: 1})
	for _, hosts := range [][]model.Host{plain, mixed} {
		var views []backend.HostView
		for _, h := range hosts {
			views = append(views, backend.HostView{HostInfo: model.HostInfo{Host: h, State: model.AgentOnline}})
		}
		s := benchShared(t, 120, 40)
		p := newHostsPage(s, backend.HostQuery{Namespace: "web"})
		p.SetSize(120, 36)
		p.Update(hostsLoadedMsg{id: p.id, hosts: views})
		got := func() []model.Host {
			var out []model.Host
			for _, i := range p.shown {
				out = append(out, p.rows[i].v.Host)
			}
			return out
		}
		want := slices.SortedFunc(slices.Values(hosts), model.CompareHosts)
		if g := got(); !slices.Equal(g, want) {
			t.Fatalf("unsorted: %v, want %v", g, want)
		}
		for p.sort.col != 1 { // IP
			p.Update(keyMsg("s"))
		}
		p.Update(keyMsg("S"))
		if g := got(); !equalReversed(g, want) {
			t.Fatalf("by IP reversed: %v, want %v reversed", g, want)
		}
		for p.sort.col != 2 { // AGENT: all equal, ties in host order
			p.Update(keyMsg("s"))
		}
		if g := got(); !slices.Equal(g, want) {
			t.Fatalf("by agent: %v, want %v", g, want)
		}
	}
}

func equalReversed(a, b []model.Host) bool {
	r := slices.Clone(b)
	slices.Reverse(r)
	return slices.Equal(a, r)
}
