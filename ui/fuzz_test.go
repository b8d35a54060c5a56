package ui

import (
	"strings"
	"testing"

	"gseproc/backend"
	"gseproc/model"
)

// FuzzHostFilter: the console's filter parser and matcher take any text;
// the empty filter matches every row and each term of a parsed filter is a
// word of the text.
func FuzzHostFilter(f *testing.F) {
	for _, s := range []string{"ip:10.0.1 cloud=0 state=stopped agent=offline version:1.2 app=nginx", "nginx", "0:10.0.0.1",
		"=x :y a=", "app=nginx bk_biz_id=1", "state=running proc:gse", "  ", "fe80::1", "ÿ:=:",
		"state=none", "state:o", "state=zombie", "test state=running", "stat"} {
		f.Add(s)
	}
	rows := []hostRow{
		newHostRow(backend.HostView{HostInfo: model.HostInfo{Host: model.Host{IP: "10.0.0.1"}, Labels: map[string]string{"app": "nginx"}, State: model.AgentOnline},
			Procs: []backend.ProcView{{Key: "gse:proc-test", Status: model.ProcStatus{State: model.ProcRunning}}}}),
		newHostRow(backend.HostView{HostInfo: model.HostInfo{Host: model.Host{IP: "fe80::1", CloudID: 2}, State: model.AgentOffline}}),
		newHostRow(backend.HostView{HostInfo: model.HostInfo{Host: model.Host{IP: "10.0.0.2"}, State: model.AgentOnline},
			Procs: []backend.ProcView{{Key: "web:nginx", Status: model.ProcStatus{State: "zombie"}}, {Key: "gse:proc-test", Status: model.ProcStatus{State: model.ProcStopped}}}}),
	}
	f.Fuzz(func(t *testing.T, s string) {
		words := strings.Fields(s)
		terms := parseFilter(s)
		if len(terms) != len(words) {
			t.Fatalf("%q: %d terms of %d words", s, len(terms), len(words))
		}
		for i, term := range terms {
			if !strings.Contains(words[i], term.value) {
				t.Fatalf("%q: term %+v not from word %q", s, term, words[i])
			}
		}
		m := newHostMatcher(s, rows)
		keys := keyRows(rows, procNames(rows))
		for i := range rows {
			got := m.match(&rows[i])
			if len(words) == 0 && !got {
				t.Fatalf("empty filter dropped row %d", i)
			}
			if keyed := m.matchKeyed(keys[i], &rows[i]); keyed != got {
				t.Fatalf("%q: row %d: keyed %v, row %v", s, i, keyed, got)
			}
		}
	})
}

// FuzzLabelSelector: a label the console or the command line takes
// (key=value) parses or is refused; what parses matches itself.
func FuzzLabelSelector(f *testing.F) {
	for _, s := range []string{"app=nginx", "bk_biz_id=1", "a=", "=b", "k=v=w", "ÿ=ÿ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, v, err := model.ParseLabel(s)
		if err != nil {
			return
		}
		if !model.MatchLabels(map[string]string{k: v}, map[string]string{k: v}) {
			t.Fatalf("%q: label does not match itself", s)
		}
	})
}
