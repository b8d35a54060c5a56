package transport

import (
	"encoding/json"
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
