package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/model"
)

// TestListStatusesAreStatusesSlim: the dispatcher's list form of a host's
// statuses (AppendListStatuses, what a host list reads) is its statuses
// (AppendStatuses) of the keys asked, in their order, duplicates kept,
// cut down to ProcKey, State, PID, Hosted and ReportTime.
func TestListStatusesAreStatusesSlim(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	full := []model.ProcStatus{
		{ProcKey: "web:nginx", ProcName: "nginx", State: model.ProcRunning, PID: 7, Hosted: true, ReportTime: 100,
			Cmdline: "/usr/sbin/nginx", Version: "1.2", Message: "ok", CPU: 1.5, Restarts: 2},
		{ProcKey: "db:pg", ProcName: "postgres", State: model.ProcStopped, PID: -1, ReportTime: 101},
		{ProcKey: "web:nginx", ProcName: "nginx", State: model.ProcStopped, PID: -1, ReportTime: 99}, // an agent's duplicate
		{ProcKey: "app:api", ProcName: "api", State: model.ProcRunning, PID: 9, ReportTime: 102, Threads: 4},
	}
	data, err := json.Marshal(Heartbeat{Info: model.HostInfo{Host: h1, Version: "2.0"}, Interval: 5 * time.Second, Full: true, Statuses: full})
	if err != nil {
		t.Fatal(err)
	}
	d.onHeartbeat(&nats.Msg{Subject: HeartbeatSubject(mustID(t, h1)), Data: data})
	all := d.AppendStatuses(nil, h1)
	if len(all) != len(full) {
		t.Fatalf("%d statuses kept, want %d", len(all), len(full))
	}
	for _, tt := range []struct {
		name string
		host model.Host
		keys []string
	}{
		{"all", h1, []string{"app:api", "db:pg", "web:nginx"}},
		{"one duplicated", h1, []string{"web:nginx"}},
		{"one and a missing key", h1, []string{"none:such", "db:pg"}},
		{"none asked", h1, nil},
		{"unknown host", model.Host{IP: "10.9.9.9"}, []string{"web:nginx"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var want []model.ProcStatus
			if tt.host == h1 {
				for _, s := range all {
					if slices.Contains(tt.keys, s.ProcKey) {
						want = append(want, model.ProcStatus{ProcKey: s.ProcKey, State: s.State, PID: s.PID, Hosted: s.Hosted, ReportTime: s.ReportTime})
					}
				}
			}
			dst := []model.ProcStatus{{ProcKey: "kept:before"}}
			got := d.AppendListStatuses(dst, tt.host, tt.keys)
			if len(got) == 0 || got[0].ProcKey != "kept:before" {
				t.Fatalf("dst's statuses not kept: %+v", got)
			}
			if !slices.Equal(got[1:], want) {
				t.Errorf("AppendListStatuses(%v) = %+v, want %+v", tt.keys, got[1:], want)
			}
		})
	}
}

// TestListedLookups: a host's statuses are its own whatever the order its
// hosts are asked in (listed tries the entry after the last one found
// first): Hosts' order, with hosts skipped, reversed, an unknown host
// among them, and after a host joined (the sorted entries made again).
func TestListedLookups(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	beat := func(h model.Host, pid int) {
		t.Helper()
		data, err := json.Marshal(Heartbeat{Info: model.HostInfo{Host: h}, Interval: 5 * time.Second, Full: true,
			Statuses: []model.ProcStatus{{ProcKey: "web:nginx", State: model.ProcRunning, PID: pid}}})
		if err != nil {
			t.Fatal(err)
		}
		d.onHeartbeat(&nats.Msg{Subject: HeartbeatSubject(mustID(t, h)), Data: data})
	}
	pid := map[model.Host]int{}
	for i := range 6 {
		h := model.Host{IP: fmt.Sprintf("10.0.0.%d", 10-i)}
		pid[h] = 100 + i
		beat(h, pid[h])
	}
	check := func(name string, order []model.Host) {
		t.Helper()
		for _, h := range order {
			want, known := pid[h]
			got := d.AppendListStatuses(nil, h, []string{"web:nginx"})
			if all := d.AppendStatuses(nil, h); len(all) != len(got) {
				t.Fatalf("%s: %s: %d statuses, %d in the list form", name, h, len(all), len(got))
			}
			if !known && len(got) != 0 || known && (len(got) != 1 || got[0].PID != want) {
				t.Fatalf("%s: %s: statuses %+v, want pid %d", name, h, got, want)
			}
		}
	}
	listed := func() []model.Host {
		hs, err := d.Hosts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []model.Host
		for _, hi := range hs {
			out = append(out, hi.Host)
		}
		return out
	}
	order := listed()
	check("in order", order)
	listed()
	check("some skipped", []model.Host{order[0], order[2], order[3], order[5]})
	listed()
	check("reversed", reversed(order))
	listed()
	check("an unknown host", []model.Host{order[0], {IP: "10.9.9.9"}, order[1], order[1], order[2]})
	listed()
	late := model.Host{IP: "10.0.0.1"}
	pid[late] = 200
	beat(late, pid[late]) // added: Hosts sorts again
	check("a host joined", append(order, late))
	check("listed again", listed())
}

func reversed(hs []model.Host) []model.Host {
	out := slices.Clone(hs)
	slices.Reverse(out)
	return out
}
