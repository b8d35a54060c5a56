package ui

import (
	"fmt"
	"testing"

	"gseproc/backend"
	"gseproc/model"
)

func TestParseFilter(t *testing.T) {
	got := parseFilter("ip:10.0.1 state=stopped 10.0.0.7 nginx app=web 0:10.1.0.3")
	want := []filterTerm{{"ip", "10.0.1", false}, {"state", "stopped", true}, {"", "10.0.0.7", false},
		{"", "nginx", false}, {"app", "web", true}, {"", "0:10.1.0.3", false}}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("term %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestHostMatcher(t *testing.T) {
	mk := func(ip string, cloud int, agent model.AgentState, ver string, labels map[string]string, procs ...backend.ProcView) hostRow {
		return newHostRow(backend.HostView{HostInfo: model.HostInfo{Host: model.Host{IP: ip, CloudID: cloud}, State: agent,
			Version: ver, Labels: labels}, Procs: procs})
	}
	pv := func(key string, st model.ProcState, labels map[string]string) backend.ProcView {
		return backend.ProcView{Key: key, Labels: labels, Status: model.ProcStatus{State: st}}
	}
	rows := []hostRow{
		mk("10.0.0.1", 0, model.AgentOnline, "2.1.0", map[string]string{"zone": "a"}, pv("gse:bkunifylogbeat", model.ProcRunning, nil)),
		mk("10.0.1.2", 1, model.AgentOffline, "2.0.9", map[string]string{"zone": "b"}, pv("web:nginx", model.ProcStopped, map[string]string{"app": "nginx"})),
		mk("10.0.1.3", 0, model.AgentOnline, "2.1.0", nil, pv("web:php-fpm", model.ProcRunning, map[string]string{"app": "php"}),
			pv("gse:gseagent", model.ProcStopped, nil)),
	}
	tests := []struct {
		filter string
		want   []int
	}{
		{"", []int{0, 1, 2}},
		{"state=stopped", []int{1, 2}},
		{"state=running agent=online", []int{0, 2}},
		{"ip:10.0.1", []int{1, 2}},
		{"ip=10.0.1", nil},
		{"10.0.1.3", []int{2}},
		{"1:10.0", []int{1}},
		{"cloud=1", []int{1}},
		{"version:2.1", []int{0, 2}},
		{"app=nginx", []int{1}},
		{"zone=a", []int{0}},
		{"nginx", []int{1}},
		{"bkunistop", nil}, // letters anywhere in the row no longer match
		{"bkuni", []int{0}},
		{"proc:agent", []int{2}},
		{"fpm state=stopped", []int{2}},
		{"agent_id:0200000002", []int{1}},
		{"agent_id=020000000242010a00002f17521298676503", []int{1}},
	}
	rows[1].v.AgentID = "020000000242010a00002f17521298676503"
	for _, tc := range tests {
		m := newHostMatcher(tc.filter, rows)
		var got []int
		for i := range rows {
			if m.match(&rows[i]) {
				got = append(got, i)
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("%q matched %v, want %v", tc.filter, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%q matched %v, want %v", tc.filter, got, tc.want)
				break
			}
		}
	}
}

func TestContainsFold(t *testing.T) {
	tests := []struct {
		s, sub string
		want   bool
	}{
		{"Stopped", "stop", true},
		{"stopped", "STOP", true},
		{"10.0.1.2", "0.1", true},
		{"nginx", "nginxx", false},
		{"nginx", "", true},
		{"", "a", false},
		{"web-API", "i-a", false},
		{"web-API", "b-a", true},
		{"ZONE-Ä", "zone-ä", true}, // not ASCII: Unicode folding
		{"zone-ä", "ZONE-Ö", false},
		{"a[b", "[B", true}, // '[' is next to 'Z': no false fold
		{"a{b", "[b", false},
	}
	for _, tc := range tests {
		if got := containsFold(tc.s, tc.sub); got != tc.want {
			t.Errorf("containsFold(%q, %q) = %v, want %v", tc.s, tc.sub, got, tc.want)
		}
	}
}

// TestHostMatcherKeyed: a row tested on its key (names and states as bits)
// passes exactly when the row itself does, including a state the console
// does not know and more process names than the key has bits.
func TestHostMatcherKeyed(t *testing.T) {
	pv := func(key string, st model.ProcState) backend.ProcView {
		return backend.ProcView{Key: key, Status: model.ProcStatus{State: st}}
	}
	var rows []hostRow
	for i := range 140 { // 70 names: more than 64
		st := []model.ProcState{model.ProcRunning, model.ProcStopped, model.ProcFatal, "zombie"}[i%4]
		procs := []backend.ProcView{pv(fmt.Sprintf("web:app%02d", i%70), st)}
		if i%3 == 0 {
			procs = append(procs, pv("gse:agent", model.ProcBackoff))
		}
		if i%7 == 0 {
			procs = nil
		}
		rows = append(rows, newHostRow(backend.HostView{HostInfo: model.HostInfo{Host: model.Host{IP: fmt.Sprintf("10.0.%d.%d", i/100, i%100)},
			State: model.AgentOnline}, Procs: procs}))
	}
	filters := []string{"state=stopped", "state:o", "state=none", "state=zombie", "app0", "app69", "agent state=backoff",
		"app1 state=running", "ip:10.0.1", "state=running state=backoff", "pp6 ip:10.0.0"}
	for _, few := range []bool{true, false} {
		rs := rows
		if few {
			rs = rows[:60] // 60 names: every name has a bit
		}
		names := procNames(rs)
		keys := keyRows(rs, names)
		for _, f := range filters {
			m := newHostMatcherOf(f, names)
			n := 0
			for i := range rs {
				got := m.match(&rs[i])
				if keyed := m.matchKeyed(keys[i], &rs[i]); keyed != got {
					t.Fatalf("%q (%d names): row %d keyed %v, row %v", f, len(names), i, keyed, got)
				}
				if got {
					n++
				}
			}
			if !few && (n == 0 || n == len(rs)) {
				t.Errorf("%q (%d names) matched %d of %d rows: the case tests nothing", f, len(names), n, len(rs))
			}
		}
	}
}
