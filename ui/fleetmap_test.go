package ui

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"gseproc/backend"
	"gseproc/model"
)

// synthFleet is n hosts over three namespaces with every state, the same
// every time: most running, a few of each other state, whole runs offline.
func synthFleet(n int) []backend.HostView {
	nss := []string{"web", "db", "cache"}
	states := []model.ProcState{model.ProcRunning, model.ProcRunning, model.ProcRunning, model.ProcRunning, model.ProcRunning,
		model.ProcRunning, model.ProcRunning, model.ProcStopped, model.ProcBackoff, model.ProcFatal}
	out := make([]backend.HostView, n)
	for i := range out {
		v := &out[i]
		v.Host = model.Host{IP: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), CloudID: 0}
		v.State = model.AgentOnline
		if (i/500)%17 == 3 { // a rack's worth offline
			v.State = model.AgentOffline
		}
		v.Labels = map[string]string{"zone": fmt.Sprintf("z%d", i%4), "role": nss[i%3]}
		x := uint32(i) * 2654435761
		st := model.ProcRunning
		if x%13 == 0 {
			st = states[x/13%uint32(len(states))]
		}
		v.Procs = []backend.ProcView{{Key: nss[i%3] + ":app", Status: model.ProcStatus{State: st}}}
	}
	return out
}

func TestBuildGroups(t *testing.T) {
	vs := []backend.HostView{
		{HostInfo: model.HostInfo{Host: model.Host{IP: "10.0.0.1"}, State: model.AgentOnline, Labels: map[string]string{"zone": "a"}},
			Procs: []backend.ProcView{{Key: "web:nginx", Status: model.ProcStatus{State: model.ProcRunning}}, {Key: "web:php", Status: model.ProcStatus{State: model.ProcBackoff}},
				{Key: "gse:beat", Status: model.ProcStatus{State: model.ProcRunning}}}},
		{HostInfo: model.HostInfo{Host: model.Host{IP: "10.0.0.2"}, State: model.AgentOffline, Labels: map[string]string{"zone": "b"}},
			Procs: []backend.ProcView{{Key: "web:nginx", Status: model.ProcStatus{State: model.ProcRunning}}}},
		{HostInfo: model.HostInfo{Host: model.Host{IP: "10.0.0.3"}, State: model.AgentOnline}},
	}
	gs := buildGroups(vs, groupByNamespace)
	var got []string
	for _, g := range gs {
		s := g.name + ":"
		for _, h := range g.hosts {
			s += fmt.Sprintf(" %s=%d", h.host.IP, h.cat)
		}
		got = append(got, s)
	}
	want := []string{"(no processes): 10.0.0.3=0", "gse: 10.0.0.1=1", "web: 10.0.0.1=3 10.0.0.2=5"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("by namespace:\n%v\nwant\n%v", got, want)
	}
	gs = buildGroups(vs, "zone")
	if len(gs) != 3 || gs[0].name != "(no zone)" || gs[1].counts[catBackoff] != 1 || gs[2].counts[catOffline] != 1 {
		t.Fatalf("by zone: %+v", gs)
	}
}

func TestLayoutMap(t *testing.T) {
	groupsOf := map[int][]mapGroup{}
	for _, tc := range []struct {
		hosts, w, h int
		per, cellW  int
	}{
		{40, 80, 20, 1, 1},       // a host a cell
		{1000, 100, 20, 1, 1},    // 3 headers and 12 rows
		{3000, 80, 20, 0, 2},     // 3 headers and 39 rows do not fit
		{100_000, 120, 35, 0, 2}, // aggregated
		{100_000, 80, 19, 0, 2},
	} {
		gs := groupsOf[tc.hosts]
		if gs == nil {
			gs = buildGroups(synthFleet(tc.hosts), groupByNamespace)
			groupsOf[tc.hosts] = gs
		}
		l := layoutMap(gs, tc.w, tc.h)
		if len(l.rows) > tc.h {
			t.Errorf("%d hosts at %dx%d: %d lines", tc.hosts, tc.w, tc.h, len(l.rows))
		}
		cells := 0
		for _, r := range l.rows {
			if len(r.cells)*l.cellW > tc.w {
				t.Errorf("%d hosts at %dx%d: a row of %d cells", tc.hosts, tc.w, tc.h, len(r.cells))
			}
			for _, c := range r.cells {
				cells += c.hi - c.lo
			}
		}
		n := 0
		for _, g := range gs {
			n += len(g.hosts)
		}
		if cells != n {
			t.Errorf("%d hosts at %dx%d: cells hold %d of %d", tc.hosts, tc.w, tc.h, cells, n)
		}
		// The fewest hosts per cell that fit: one fewer does not.
		if l.per > 2 {
			lines := 0
			cols := tc.w / 2
			for _, g := range gs {
				lines += 1 + ((len(g.hosts)+l.per-2)/(l.per-1)+cols-1)/cols
			}
			if lines <= tc.h {
				t.Errorf("%d hosts at %dx%d: %d per cell, but %d fit", tc.hosts, tc.w, tc.h, l.per, l.per-1)
			}
		}
		if tc.per != 0 && (l.per != tc.per || l.cellW != tc.cellW) && len(l.rows) <= tc.h {
			t.Errorf("%d hosts at %dx%d: %d per cell, width %d", tc.hosts, tc.w, tc.h, l.per, l.cellW)
		}
		if tc.cellW == 2 && (l.cellW != 2 || l.per < 2) {
			t.Errorf("%d hosts at %dx%d: not aggregated (%d per cell)", tc.hosts, tc.w, tc.h, l.per)
		}
	}
}

func TestMapCellShade(t *testing.T) {
	for _, tc := range []struct {
		running, bad int32
		want         string
	}{{10, 0, " "}, {9, 1, "░"}, {7, 3, "▒"}, {4, 6, "▓"}, {1, 9, "█"}, {0, 10, "█"}} {
		c := mapCell{}
		c.counts[catRunning], c.counts[catFatal] = tc.running, tc.bad
		if got := c.shade(); got != tc.want {
			t.Errorf("%d running, %d not: %q, want %q", tc.running, tc.bad, got, tc.want)
		}
	}
}

// openMap pushes a fleet map fed with views (not the backend's hosts).
func openMapWith(d *driver, views []backend.HostView) *fleetMapPage {
	p := newFleetMapPage(d.m.s, backend.HostQuery{})
	d.m.stack = append(d.m.stack, p)
	d.m.s.topID = p.id
	d.send(tea.WindowSizeMsg{Width: d.m.s.width, Height: d.m.s.height})
	d.send(mapLoaded(p.id, views, groupByNamespace, p.w, p.h))
	return p
}

// Golden renders at 80x24 and 120x40: a small fleet a host a cell (from
// the backend), and 100,000 hosts aggregated (fed to the page).
func TestGoldenFleetMap(t *testing.T) {
	e, _ := simBackend(t, quietSim(40, "web", "db"))
	for _, sz := range goldenSizes {
		t.Run(fmt.Sprintf("%dx%d", sz.w, sz.h), func(t *testing.T) {
			clk := newClock()
			d := newDriver(t, e, Options{Now: clk.Now, Guard: time.Nanosecond, Operator: "golden"}, sz.w, sz.h)
			// The status bar says "live" once the event subscription is in
			// place: waited for, not given a time a loaded machine misses.
			d.until("namespaces and live events", func() bool {
				return d.m.stack[0].(*nsPage).loaded && d.m.info.Mode != "" && d.m.s.eventsLive
			})
			d.settle(20 * time.Millisecond)
			d.keys("M")
			mp := topAs[*fleetMapPage](t, d)
			d.until("the map", func() bool { return mp.loaded })
			d.keys("down", "l", "l")
			v := d.view()
			checkFrame(t, v, sz.w, sz.h)
			golden(t, goldenName("fleetmap", sz.w, sz.h), v)

			big := newDriver(t, e, Options{Now: clk.Now, Guard: time.Nanosecond, Operator: "golden"}, sz.w, sz.h)
			big.until("namespaces and live events", func() bool {
				return big.m.stack[0].(*nsPage).loaded && big.m.info.Mode != "" && big.m.s.eventsLive
			})
			big.settle(20 * time.Millisecond)
			bp := openMapWith(big, synthFleet(100_000))
			if bp.layout.per < 2 {
				t.Fatalf("100,000 hosts not aggregated at %dx%d", sz.w, sz.h)
			}
			big.keys("down", "down")
			v = big.view()
			checkFrame(t, v, sz.w, sz.h)
			if !strings.Contains(v, "100000 hosts") && !strings.Contains(v, "100,000 hosts") {
				t.Errorf("the map does not count the hosts:\n%s", v)
			}
			golden(t, goldenName("fleetmap_100k", sz.w, sz.h), v)
		})
	}
}

// The map follows the fleet live, and enter drills into a cell's hosts.
func TestFleetMapLiveAndDrill(t *testing.T) {
	e, _ := simBackend(t, quietSim(60, "web"))
	d := newDriver(t, e, Options{}, 100, 30)
	// The change below is seen through the live events: the subscription,
	// made by a command at start, must be in place before it (on a loaded
	// machine it may come after the namespaces).
	d.until("namespaces and live events", func() bool { return d.m.stack[0].(*nsPage).loaded && d.m.s.eventsLive })
	d.keys("M")
	mp := topAs[*fleetMapPage](t, d)
	d.until("the map", func() bool { return mp.loaded })
	if strings.Contains(d.view(), "○ 4 offline") {
		t.Fatal("offline before the control")
	}
	if _, err := e.Simulate(context.Background(), backend.SimRequest{SimChange: model.SimChange{Action: model.SimOffline, Count: 4},
		Selector: backend.Selector{Namespace: "web"}}); err != nil {
		t.Fatal(err)
	}
	d.until("the map to show the offline hosts", func() bool { return strings.Contains(d.view(), "○ 4 offline") })
	// Drill: a host a cell opens the host.
	d.keys("enter")
	hp := topAs[*hostPage](t, d)
	g, c, _ := mp.cell()
	if hp.host != g.hosts[c.lo].host {
		t.Fatalf("opened %s, the cursor is on %s", hp.host, g.hosts[c.lo].host)
	}
	d.keys("esc")
	topAs[*fleetMapPage](t, d)
	// Aggregated: a cell opens its hosts as a table.
	big := openMapWith(d, synthFleet(20_000))
	d.keys("down")
	g, c, _ = big.cell()
	d.keys("enter")
	hs := topAs[*hostsPage](t, d)
	if len(hs.q.Hosts) != c.hi-c.lo || hs.q.Hosts[0] != g.hosts[c.lo].host || hs.q.Namespace != g.name {
		t.Fatalf("drilled into %d hosts of %q, the cell holds %d of %q", len(hs.q.Hosts), hs.q.Namespace, c.hi-c.lo, g.name)
	}
}

// BenchmarkFleetMap100k: a frame of the map of 100,000 hosts (the cursor
// moves: the view is drawn again); a reload as the UI's goroutine does it
// (layout and every row drawn once); and the grouping, done in the load's
// command with the layout.
func BenchmarkFleetMap100k(b *testing.B) {
	e, _ := simBackend(b, quietSim(10, "web"))
	views := synthFleet(fleet100k)
	d := newDriver(b, e, Options{}, 120, 40)
	p := openMapWith(d, views)
	b.Run("frame", func(b *testing.B) {
		keys := []tea.KeyMsg{{Type: tea.KeyRight}, {Type: tea.KeyDown}, {Type: tea.KeyLeft}, {Type: tea.KeyUp}}
		i := 0
		for b.Loop() {
			d.send(keys[i%len(keys)])
			if len(d.m.View()) == 0 {
				b.Fatal("empty frame")
			}
			i++
		}
	})
	b.Run("reload", func(b *testing.B) {
		msg := mapLoaded(p.id, views, groupByNamespace, p.w, p.h)
		for b.Loop() {
			d.send(msg)
			if len(d.m.View()) == 0 {
				b.Fatal("empty frame")
			}
		}
	})
	b.Run("group", func(b *testing.B) {
		for b.Loop() {
			if m := mapLoaded(p.id, views, groupByNamespace, p.w, p.h); len(m.groups) != 3 {
				b.Fatal(len(m.groups))
			}
		}
	})
}

// b offers every host label key, also one only a host far down the fleet
// carries.
func TestMapGroupingsEveryKey(t *testing.T) {
	views := synthFleet(1000)
	views[900].Labels["rack"] = "r7"
	got := mapGroupings(views)
	if want := []string{groupByNamespace, "rack", "role", "zone"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("groupings %v, want %v", got, want)
	}
}
