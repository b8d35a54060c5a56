package ui

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// hostileBackend answers recent events and a task's results whose free
// text holds escape sequences, as an agent's output quoted in a message
// can; it keeps what it handed out to check nothing was written there.
type hostileBackend struct {
	backend.Backend
	evs     []model.Event
	results []model.Result
}

const hidden = "boom \x1b[8mhidden\x1b]52;c;cHduZWQ=\a"

func (h *hostileBackend) RecentEvents(context.Context, int) ([]model.Event, error) {
	return h.evs, nil
}

func (h *hostileBackend) Task(ctx context.Context, id string) (backend.TaskView, error) {
	return backend.TaskView{Task: model.Task{ID: id}, Results: h.results}, nil
}

func (h *hostileBackend) Watch(ctx context.Context, id string, after int64) (<-chan model.Result, error) {
	ch := make(chan model.Result, len(h.results))
	for _, r := range h.results {
		ch <- r
	}
	close(ch)
	return ch, nil
}

// Free text from the fleet enters the console plain (the frame's filter
// keeps SGR, so ESC[8m in a message would hide the rest of its row), and
// what the backend handed out is not written to (it may be shared).
func TestFleetTextEntersPlain(t *testing.T) {
	e, _ := simBackend(t, quietSim(5))
	st := &model.ProcStatus{ProcKey: "web:nginx", Message: hidden, Cmdline: "nginx \x1b[2J"}
	h := &hostileBackend{
		Backend: e,
		evs:     []model.Event{{Time: time.Now(), Host: model.Host{IP: "10.0.0.1"}, ProcKey: "web:nginx", Kind: model.EventRestartFailed, Message: hidden}},
		results: []model.Result{{TaskID: "t1", Host: model.Host{IP: "10.0.0.1"}, ProcKey: "web:nginx", Message: hidden, Status: st}},
	}
	g := guard(h)
	ctx := context.Background()

	evs, err := g.RecentEvents(ctx, 10)
	if err != nil || len(evs) != 1 || evs[0].Message != "boom hidden" {
		t.Fatalf("recent events: %+v %v", evs, err)
	}
	v, err := g.Task(ctx, "t1")
	if err != nil || len(v.Results) != 1 || v.Results[0].Message != "boom hidden" ||
		v.Results[0].Status.Message != "boom hidden" || v.Results[0].Status.Cmdline != "nginx " {
		t.Fatalf("task results: %+v %v", v.Results, err)
	}
	ch, err := g.Watch(ctx, "t1", 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r := range ch {
		n++
		if r.Message != "boom hidden" || r.Status.Message != "boom hidden" {
			t.Fatalf("watched result: %+v", r)
		}
	}
	if n != 1 {
		t.Fatalf("watched %d results, want 1", n)
	}
	if h.evs[0].Message != hidden || h.results[0].Message != hidden || st.Message != hidden {
		t.Fatal("the backend's own values were written to")
	}

	// Through the console: the events page shows the message, not its
	// escape sequences.
	d := newDriver(t, h, Options{}, 100, 30)
	d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })
	d.keys("E")
	d.until("the event listed", func() bool { return strings.Contains(d.view(), "boom hidden") })
	if v := d.view(); strings.Contains(v, "\x1b[8m") || strings.Contains(v, "\x1b]52") {
		t.Fatalf("escape sequences from the fleet reached the frame:\n%q", v)
	}
}

// hostileHosts lists hosts whose agent labels (a heartbeat's, unchecked)
// hold escape sequences.
type hostileHosts struct {
	backend.Backend
	hosts []backend.HostView
}

func (h *hostileHosts) Hosts(context.Context, backend.HostQuery) ([]backend.HostView, error) {
	return h.hosts, nil
}

// An agent's host labels enter the console plain, listed at once or host
// by host, and the backend's own map is not written to: the LABELS cell
// of the host list showed them as they came (ESC[8m hid the rest of the
// row).
func TestHostLabelsEnterPlain(t *testing.T) {
	e, _ := simBackend(t, quietSim(1))
	labels := map[string]string{"app": hidden, "k\x1b[8m": "v", "zone": "a"}
	h := &hostileHosts{Backend: e, hosts: []backend.HostView{{HostInfo: model.HostInfo{Host: model.Host{IP: "10.0.0.1"}, Labels: labels}}}}
	g := guard(h)
	want := map[string]string{"app": "boom hidden", "k": "v", "zone": "a"}
	hv, err := g.Hosts(context.Background(), backend.HostQuery{})
	if err != nil || len(hv) != 1 || !maps.Equal(hv[0].Labels, want) {
		t.Fatalf("hosts: %+v %v", hv, err)
	}
	n := 0
	err = g.HostsEach(context.Background(), backend.HostQuery{}, func(v *backend.HostView) {
		n++
		if !maps.Equal(v.Labels, want) {
			t.Fatalf("host by host: labels %q", v.Labels)
		}
		row := newHostRow(*v)
		if text := row.display().labels; text != "app=boom hidden k=v zone=a" {
			t.Fatalf("LABELS cell %q", text)
		}
	})
	if err != nil || n != 1 {
		t.Fatalf("host by host: %d hosts, %v", n, err)
	}
	n = 0
	err = g.HostListEach(context.Background(), backend.HostQuery{}, func(v *backend.HostView) {
		n++
		if !maps.Equal(v.Labels, want) {
			t.Fatalf("for a list: labels %q", v.Labels)
		}
	})
	if err != nil || n != 1 {
		t.Fatalf("for a list: %d hosts, %v", n, err)
	}
	if labels["app"] != hidden || len(labels) != 3 {
		t.Fatal("the backend's own labels were written to")
	}
}

// hostileIndexed lists hosts as the client's HostListIndexed does, its
// table of label pairs holding escape sequences.
type hostileIndexed struct {
	backend.Backend
	pairs [][2]string
	ids   [][]uint32
}

func (h *hostileIndexed) HostListIndexed(ctx context.Context, q backend.HostQuery, fn func(pairs [][2]string, ids []uint32, v *backend.HostView)) error {
	for i, ids := range h.ids {
		v := backend.HostView{HostInfo: model.HostInfo{Host: model.Host{IP: fmt.Sprintf("10.0.0.%d", i+1)}, Version: "v\x1b[2J1"}}
		fn(h.pairs, ids, &v)
	}
	return nil
}

// HostListEach makes it a backend with the list form (as the client is):
// the console reads it by HostListIndexed, not this.
func (h *hostileIndexed) HostListEach(context.Context, backend.HostQuery, func(*backend.HostView)) error {
	return errors.New("listed by HostListEach, not HostListIndexed")
}

// A listing's table of label pairs (the list form read as it comes:
// guarded.hostListIndexed) enters the console plain, as a host's own map
// does, and the client's table is not written to.
func TestIndexedHostLabelsEnterPlain(t *testing.T) {
	e, _ := simBackend(t, quietSim(1))
	pairs := [][2]string{{"app", hidden}, {"k\x1b[8m", "v"}, {"zone", "a"}}
	h := &hostileIndexed{Backend: e, pairs: pairs, ids: [][]uint32{{0, 1, 2}, {2}}}
	rows, err := listRows(context.Background(), guard(h), backend.HostQuery{})
	if err != nil || len(rows) != 2 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	if text := rows[0].display().labels; text != "app=boom hidden k=v zone=a" {
		t.Fatalf("LABELS cell %q", text)
	}
	if text := rows[1].display().labels; text != "zone=a" {
		t.Fatalf("LABELS cell %q", text)
	}
	for _, r := range rows {
		if r.v.Version != "v1" {
			t.Fatalf("version %q", r.v.Version)
		}
	}
	if pairs[0][1] != hidden || pairs[1][0] != "k\x1b[8m" {
		t.Fatal("the client's table was written to")
	}
}

// TestPlainHostStatuses: a host view's process statuses are made plain
// whichever process and field holds the escape (a copy, the backend's
// view untouched); a clean view is handed back as it is.
func TestPlainHostStatuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		set   func(st *model.ProcStatus)
		dirty bool
	}{
		{"clean", func(*model.ProcStatus) {}, false},
		{"message", func(st *model.ProcStatus) { st.Message = hidden }, true},
		{"cmdline", func(st *model.ProcStatus) { st.Cmdline = "nginx \x1b[2J" }, true},
		{"version", func(st *model.ProcStatus) { st.Version = "1.2\x1b[8m" }, true},
	} {
		for at := range 3 {
			procs := []backend.ProcView{{Key: "web:a"}, {Key: "web:b"}, {Key: "web:c"}}
			tc.set(&procs[at].Status)
			orig := procs[at].Status
			v := backend.HostView{HostInfo: model.HostInfo{Host: model.Host{IP: "10.0.0.1"}, Version: "2.1"}, Procs: procs}
			got, dirty := plainHost(v)
			if dirty != tc.dirty {
				t.Fatalf("%s at %d: dirty %v, want %v", tc.name, at, dirty, tc.dirty)
			}
			for i, p := range got.Procs {
				for _, s := range []string{p.Status.Message, p.Status.Cmdline, p.Status.Version} {
					if strings.ContainsRune(s, '\x1b') {
						t.Fatalf("%s at %d: process %d keeps %q", tc.name, at, i, s)
					}
				}
			}
			if procs[at].Status != orig {
				t.Fatalf("%s at %d: the backend's view was written to", tc.name, at)
			}
			if !tc.dirty && &got.Procs[0] != &procs[0] {
				t.Fatalf("%s: a clean view's processes were copied", tc.name)
			}
		}
	}
}
