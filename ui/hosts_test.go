package ui

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unsafe"

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
	if a.v.Labels["zone"] != "a" || c.v.Labels["zone"] != "b" || b.v.Version != "2.1.0" {
		t.Fatalf("host labels or version: %v %v %q", a.v.Labels, c.v.Labels, b.v.Version)
	}
	if !same(a.v.Procs[0].Labels, c.v.Procs[0].Labels) || unsafe.StringData(a.v.Procs[0].Key) != unsafe.StringData(c.v.Procs[0].Key) {
		t.Fatal("a process's key or labels are held twice")
	}
	want := procView{Key: "web:nginx", Labels: map[string]string{"app": "nginx"}, State: model.ProcStopped, PID: 0, Hosted: true}
	if !reflect.DeepEqual(b.v.Procs[0], want) || b.state != model.ProcStopped || b.v.Host.IP != "10.0.0.2" || b.v.State != model.AgentOnline {
		t.Fatalf("row %+v, want process %+v", b, want)
	}
}
