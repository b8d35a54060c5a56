package engine_test

import (
	"context"
	"slices"
	"testing"

	"gseproc/backend"
	"gseproc/model"
)

// TestHostListingFollowsChanges: a full listing made again (the engine
// keeps the layout of the last ones) follows every change since: a
// definition's hosts changed, one added and one deleted, the inventory
// reordered, grown, shrunk and listing a host twice. Each listing is
// checked against the hosts and definitions as they are then.
func TestHostListingFollowsChanges(t *testing.T) {
	f := newFake(12)
	e, _ := start(t, f, testCfg())
	ctx := context.Background()
	check := func(step string) {
		t.Helper()
		defs, err := e.Processes(ctx, backend.ProcQuery{})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []backend.HostQuery{{}, {Namespace: "ns"}, {Namespace: "ns", Name: "db"}, {Namespace: "other"}} {
			// Twice: made, then the kept layout.
			for range 2 {
				hv, err := e.Hosts(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				var got, want [][]string
				for _, v := range hv {
					var keys []string
					for _, p := range v.Procs {
						keys = append(keys, p.Key)
					}
					got = append(got, append([]string{v.Host.String()}, keys...))
				}
				for _, hi := range f.hosts {
					keys := []string{hi.Host.String()}
					for _, d := range defs {
						if (q.Namespace == "" || d.Process.Meta.Namespace == q.Namespace) && (q.Name == "" || d.Process.Meta.Name == q.Name) &&
							slices.Contains(d.Hosts, hi.Host) {
							keys = append(keys, d.Process.Key())
						}
					}
					if len(keys) > 1 || q.Namespace == "" {
						want = append(want, keys)
					}
				}
				if !slices.EqualFunc(got, want, slices.Equal) {
					t.Fatalf("%s, %+v: listed %v, want %v", step, q, got, want)
				}
			}
		}
	}
	check("as seeded")
	var odd []model.Host
	for i, h := range f.hosts {
		if i%2 == 1 {
			odd = append(odd, h.Host)
		}
	}
	save := func(ns, name string, hosts []model.Host) {
		t.Helper()
		if err := e.SaveProcess(ctx, model.ProcessDef{Process: proc(ns, name, nil), Hosts: hosts}); err != nil {
			t.Fatal(err)
		}
	}
	save("ns", "db", odd)
	check("db moved to the odd hosts")
	save("ns", "cache", odd[:2])
	check("cache added")
	save("other", "x", []model.Host{f.hosts[3].Host})
	check("another namespace")
	if err := e.DeleteProcess(ctx, "ns:cache"); err != nil {
		t.Fatal(err)
	}
	check("cache deleted")
	slices.Reverse(f.hosts)
	check("inventory reversed")
	f.hosts = append(f.hosts, newFake(14).hosts[12:]...)
	check("inventory grown")
	f.hosts = f.hosts[3:]
	check("inventory shrunk")
	f.hosts = append(f.hosts, f.hosts[2])
	check("a host listed twice")
}
