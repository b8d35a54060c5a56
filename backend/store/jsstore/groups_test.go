package jsstore

import (
	"fmt"
	"testing"

	"gseproc/model"
)

// TestGroups: groups are stored by (namespace, host), replaced in place,
// listed by namespace and host, and removed when their resource limits
// nothing; one without a namespace is refused and the rest still stored.
func TestGroups(t *testing.T) {
	s := open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{})
	ctx := tctx(t)
	pool := model.GroupResource{CPUPoolLimit: 50, MemPoolLimit: 30}
	g := func(ns, ip string, r model.GroupResource) model.ProcessGroup {
		return model.ProcessGroup{Namespace: ns, Host: model.Host{IP: ip}, Resource: r}
	}
	err := s.PutGroups(ctx, []model.ProcessGroup{
		g("web", "10.0.0.2", pool), g("web", "10.0.0.1", pool), g("db", "10.0.0.1", pool), g("", "10.0.0.3", pool),
	})
	if err == nil {
		t.Fatal("a group without a namespace accepted")
	}
	half := model.GroupResource{CPUPoolLimit: 25}
	if err := s.PutGroups(ctx, []model.ProcessGroup{g("web", "10.0.0.1", half)}); err != nil {
		t.Fatal(err)
	}
	list := func(ns string) string {
		t.Helper()
		gs, err := s.Groups(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, g := range gs {
			out += fmt.Sprintf("%s/%s/%g ", g.Namespace, g.Host.IP, g.Resource.CPUPoolLimit)
		}
		return out
	}
	if got, want := list(""), "db/10.0.0.1/50 web/10.0.0.1/25 web/10.0.0.2/50 "; got != want {
		t.Fatalf("groups %q, want %q", got, want)
	}
	if got, want := list("web"), "web/10.0.0.1/25 web/10.0.0.2/50 "; got != want {
		t.Fatalf("web's groups %q, want %q", got, want)
	}
	// Cleared: on a host that had one, and on one that never had one.
	if err := s.PutGroups(ctx, []model.ProcessGroup{g("web", "10.0.0.2", model.GroupResource{}), g("web", "10.0.0.9", model.GroupResource{})}); err != nil {
		t.Fatal(err)
	}
	if got, want := list(""), "db/10.0.0.1/50 web/10.0.0.1/25 "; got != want {
		t.Fatalf("after clearing: %q, want %q", got, want)
	}
}

// BenchmarkClearGroups: a namespace's group cleared on 10,000 hosts (one
// PutGroups, as SetProcessGroups stores it), after being set on them.
func BenchmarkClearGroups(b *testing.B) {
	s := open(b, startNATS(b, natsCfg(b, b.TempDir())), Options{Memory: true})
	ctx := tctx(b)
	const n = 10000
	set, clear := make([]model.ProcessGroup, n), make([]model.ProcessGroup, n)
	for i := range set {
		h := model.Host{IP: fmt.Sprintf("10.0.%d.%d", i/256, i%256)}
		set[i] = model.ProcessGroup{Namespace: "web", Host: h, Resource: model.GroupResource{CPUPoolLimit: 50}}
		clear[i] = model.ProcessGroup{Namespace: "web", Host: h}
	}
	for b.Loop() {
		b.StopTimer()
		if err := s.PutGroups(ctx, set); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := s.PutGroups(ctx, clear); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if gs, err := s.Groups(ctx, "web"); err != nil || len(gs) != 0 {
		b.Fatalf("%d groups left (%v)", len(gs), err)
	}
}
