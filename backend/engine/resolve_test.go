package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"gseproc/backend"
	"gseproc/model"
)

// TestResolveFewHostsOfALongList: a selector naming a few hosts of a
// definition deployed on many finds them through the host index, in the
// definition's order, with the host as the definition lists it, exactly
// as walking the list does.
func TestResolveFewHostsOfALongList(t *testing.T) {
	var hosts []model.Host
	for i := range 1000 {
		hosts = append(hosts, model.Host{IP: fmt.Sprintf("10.0.%d.%d", i/256, i%256)})
	}
	defs := []model.ProcessDef{
		{Process: model.Process{Meta: model.Meta{Namespace: "gse", Name: "a"}}, Hosts: hosts, Rev: 1},
		{Process: model.Process{Meta: model.Meta{Namespace: "gse", Name: "b"}}, Hosts: hosts[:10], Rev: 2},
	}
	sel := backend.Selector{Namespace: "gse", Hosts: []model.Host{hosts[900], hosts[7], {IP: "192.0.2.1"}}}
	var idx model.HostIndex
	got, procs := resolve(defs, sel, &idx)
	want := []model.Target{{Host: hosts[7], ProcKey: "gse:a"}, {Host: hosts[900], ProcKey: "gse:a"}, {Host: hosts[7], ProcKey: "gse:b"}}
	if !slices.Equal(got, want) {
		t.Fatalf("targets %v, want %v", got, want)
	}
	if len(procs) != 2 {
		t.Fatalf("procs %v", procs)
	}
	// The same answer without the index: many selected hosts walk the list.
	sel.Hosts = nil
	for _, h := range hosts[:500] {
		sel.Hosts = append(sel.Hosts, h)
	}
	got, _ = resolve(defs, sel, &idx)
	if len(got) != 510 || got[0] != (model.Target{Host: hosts[0], ProcKey: "gse:a"}) || got[500] != (model.Target{Host: hosts[0], ProcKey: "gse:b"}) {
		t.Fatalf("walked: %d targets, first %v", len(got), got[:1])
	}
}

// TestSelection: a task says in one line what its request selected.
func TestSelection(t *testing.T) {
	h := func(ip string) model.Host { return model.Host{IP: ip} }
	for _, c := range []struct {
		req  backend.OperateRequest
		want string
	}{
		{backend.OperateRequest{Selector: backend.Selector{Namespace: "web"}}, ""},
		{backend.OperateRequest{Selector: backend.Selector{Namespace: "web", Name: "nginx", Labels: map[string]string{"env": "prod", "app": "x"}}},
			"name nginx · labels app=x,env=prod"},
		{backend.OperateRequest{Selector: backend.Selector{Hosts: []model.Host{h("10.0.0.1"), h("10.0.0.2")}}}, "hosts 0:10.0.0.1,0:10.0.0.2"},
		{backend.OperateRequest{Selector: backend.Selector{Hosts: []model.Host{h("10.0.0.1"), h("10.0.0.2"), h("10.0.0.3"), h("10.0.0.4")}}}, "4 hosts"},
		{backend.OperateRequest{Selector: backend.Selector{Targets: []model.Target{{Host: h("10.0.0.1"), ProcKey: "web:a"}}}}, "1 (host, process) pairs"},
		{backend.OperateRequest{Items: []model.ProcessDef{{Hosts: []model.Host{h("10.0.0.1"), h("10.0.0.2")}}}}, "1 inline definition(s) on 2 host(s)"},
	} {
		if got := selection(c.req); got != c.want {
			t.Errorf("selection(%+v) = %q, want %q", c.req, got, c.want)
		}
	}
}

// TestSelectorText: an operation's audit entry names every field its
// selector narrows by, each host and each (host, process) pair (a retry
// of a task's failed pairs is not "everything").
func TestSelectorText(t *testing.T) {
	h := func(ip string) model.Host { return model.Host{IP: ip} }
	for _, c := range []struct {
		sel  backend.Selector
		want string
	}{
		{backend.Selector{}, "(everything)"},
		{backend.Selector{Namespace: "web", Name: "nginx", Labels: map[string]string{"env": "prod", "app": "x"}},
			"namespace=web name=nginx label=app=x label=env=prod"},
		{backend.Selector{Hosts: []model.Host{h("10.0.0.1"), h("10.0.0.2")}}, "host=0:10.0.0.1 host=0:10.0.0.2"},
		{backend.Selector{Targets: []model.Target{{Host: h("10.0.0.1"), ProcKey: "web:a"}, {Host: h("10.0.0.2"), ProcKey: "db:b"}}},
			"target=0:10.0.0.1/web:a target=0:10.0.0.2/db:b"},
		{backend.Selector{Namespace: "web", Targets: []model.Target{{Host: h("10.0.0.1"), ProcKey: "web:a"}}},
			"namespace=web target=0:10.0.0.1/web:a"},
	} {
		if got := selectorText(c.sel); got != c.want {
			t.Errorf("selectorText(%+v) = %q, want %q", c.sel, got, c.want)
		}
	}
}

// TestCompareKey: compareKey orders (namespace, name) exactly as the
// strings "namespace:name" compare, which is the registry's order.
func TestCompareKey(t *testing.T) {
	keys := []string{"", "a", "a:", "a:b", "a:c", "a-b:x", "a.b:x", "a:y", "ab:a", "b", "gse:bkmonitorbeat", "gse:bk", "gse;x", "gse9:x", "gs"}
	defs := [][2]string{{"a", ""}, {"a", "b"}, {"a-b", "x"}, {"a", "y"}, {"ab", "a"}, {"gse", "bk"}, {"gse", "bkmonitorbeat"}, {"", ""}, {"", "x"}, {"gse:", "x"}}
	for _, d := range defs {
		for _, k := range keys {
			want := strings.Compare(d[0]+":"+d[1], k)
			if got := compareKey(d[0], d[1], k); got != want {
				t.Errorf("compareKey(%q, %q, %q) = %d, want %d", d[0], d[1], k, got, want)
			}
		}
	}
}

// BenchmarkResolve: an op by name over a definition deployed on 84,000
// of 100,000 hosts (the bench fleet's bkmonitorbeat).
func BenchmarkResolve(b *testing.B) {
	var hosts []model.Host
	for i := range 100_000 {
		hosts = append(hosts, model.Host{IP: fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)})
	}
	defs := []model.ProcessDef{
		{Process: model.Process{Meta: model.Meta{Namespace: "gse", Name: "agent"}}, Hosts: hosts, Rev: 1},
		{Process: model.Process{Meta: model.Meta{Namespace: "gse", Name: "bkmonitorbeat"}}, Hosts: hosts[:84_000], Rev: 2},
	}
	sel := backend.Selector{Namespace: "gse", Name: "bkmonitorbeat"}
	b.Run("again", func(b *testing.B) {
		var idx model.HostIndex
		b.ReportAllocs()
		for b.Loop() {
			if ts, _ := resolve(defs, sel, &idx); len(ts) != 84_000 {
				b.Fatalf("%d targets", len(ts))
			}
		}
	})
	// The first op over the definition's revision: whether it lists a
	// host twice is found then (model.HostIndex.Distinct).
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var idx model.HostIndex
			if ts, _ := resolve(defs, sel, &idx); len(ts) != 84_000 {
				b.Fatalf("%d targets", len(ts))
			}
		}
	})
}
