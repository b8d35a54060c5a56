package engine_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/simulator"
	"gseproc/backend/store"
	"gseproc/model"
)

// TestHostListEachAsHosts: the list path (HostListEach) lists the hosts
// Hosts does, in its order, each process with its key, labels and the
// status fields a list shows (the rest zero), whatever the query. The
// fleet keeps beating between the two reads, so a host's LastSeen may have
// moved on by the second (never back, never unset).
func TestHostListEachAsHosts(t *testing.T) {
	e, _ := simEngine(t, quietFleet(300))
	ctx := context.Background()
	// Some statuses from an operation (the engine's own), the rest the fleet's.
	operate(t, e, backend.OperateRequest{Op: model.OpStop, Selector: backend.Selector{Namespace: "web", Name: "nginx"}})
	for _, q := range []backend.HostQuery{{}, {Namespace: "web"}, {Namespace: "web", Name: "nginx"}, {Limit: 7}, {Limit: 250}} {
		want, err := e.Hosts(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		i, procs := 0, 0
		err = e.HostListEach(ctx, q, func(v *backend.HostView) {
			if i >= len(want) {
				t.Fatalf("%+v: host %d (%s) past the %d Hosts lists", q, i, v.Host, len(want))
			}
			w := want[i]
			i++
			if v.Host != w.Host || v.State != w.State || v.AgentID != w.AgentID || v.Version != w.Version || v.LastSeen < w.LastSeen || v.LastSeen == 0 || len(v.Labels) != len(w.Labels) ||
				!maps.Equal(v.Labels, w.Labels) {
				t.Fatalf("%+v: host %d: %+v, Hosts has %+v", q, i-1, v.HostInfo, w.HostInfo)
			}
			if len(v.Procs) != len(w.Procs) {
				t.Fatalf("%+v: host %s: %d processes, Hosts has %d", q, v.Host, len(v.Procs), len(w.Procs))
			}
			for j, p := range v.Procs {
				wp := w.Procs[j]
				ws := model.ProcStatus{ProcKey: wp.Key, State: wp.Status.State, PID: wp.Status.PID, Hosted: wp.Status.Hosted}
				if p.Key != wp.Key || len(p.Labels) != len(wp.Labels) || p.Status != ws || p.Updated != 0 {
					t.Fatalf("%+v: host %s process %d: %+v, want %+v", q, v.Host, j, p, ws)
				}
				procs++
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if i != len(want) || len(want) == 0 || procs == 0 {
			t.Fatalf("%+v: %d hosts (%d processes), Hosts lists %d", q, i, procs, len(want))
		}
	}
}

// setFleet is a simulated fleet as an inventory that keeps label sets
// (engine.LabelSetInventory), each set shared by the hosts of the same
// labels, as the NATS dispatcher keeps them.
type setFleet struct{ *simulator.Fleet }

func (f setFleet) HostLabelSets(ctx context.Context) ([]model.HostInfo, []model.LabelSet, error) {
	hosts, err := f.Hosts(ctx)
	sets := make([]model.LabelSet, len(hosts))
	kept := map[string]model.LabelSet{}
	for i := range hosts {
		s := model.MakeLabelSet(hosts[i].Labels)
		key := strings.Join(s, "\x00")
		if k, ok := kept[key]; ok {
			s = k
		}
		kept[key], sets[i], hosts[i].Labels = s, s, nil
	}
	return hosts, sets, err
}

// TestHostListSetsAsHostListEach: over an inventory that keeps label
// sets, HostListSets lists the hosts and processes HostListEach does,
// each host's labels in its set (the view's map nil); over one that does
// not, in the view's map (no set). Hosts (the JSON API's views) lists
// the labels in maps either way.
func TestHostListSetsAsHostListEach(t *testing.T) {
	fleet := simulator.New(quietFleet(300))
	t.Cleanup(func() { _ = fleet.Close() })
	ctx := context.Background()
	withSets := engine.New(config.Default().Engine, fleet, setFleet{fleet}, store.NewMemory())
	plain := engine.New(config.Default().Engine, fleet, fleet, store.NewMemory())
	for _, e := range []*engine.Engine{withSets, plain} {
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		if err := e.Seed(ctx, fleet.Definitions()); err != nil {
			t.Fatal(err)
		}
	}
	for name, e := range map[string]*engine.Engine{"sets": withSets, "plain": plain} {
		for _, q := range []backend.HostQuery{{}, {Namespace: "web"}, {Namespace: "web", Name: "nginx"}, {Limit: 7}, {Limit: 250}} {
			var want []backend.HostView
			err := e.HostListEach(ctx, q, func(v *backend.HostView) {
				w := *v
				w.Labels, w.Procs = maps.Clone(v.Labels), slices.Clone(v.Procs)
				want = append(want, w)
			})
			if err != nil {
				t.Fatal(err)
			}
			full, err := e.Hosts(ctx, q)
			if err != nil || len(full) != len(want) {
				t.Fatalf("%s %+v: Hosts lists %d hosts (%v), HostListEach %d", name, q, len(full), err, len(want))
			}
			// head: once, before the first host, with every process
			// and label set the hosts then name.
			i, heads := 0, 0
			headProcs, headSets := map[string]map[string]string{}, map[*string]bool{}
			head := func(procs []backend.ProcView, sets []model.LabelSet) {
				if heads++; heads > 1 || i > 0 {
					t.Fatalf("%s %+v: head called %d times, after %d hosts", name, q, heads, i)
				}
				for _, p := range procs {
					headProcs[p.Key] = p.Labels
				}
				for _, l := range sets {
					if len(l) > 0 {
						headSets[&l[0]] = true
					}
				}
			}
			err = e.HostListSets(ctx, q, head, func(v *backend.HostView, labels model.LabelSet) {
				if name == "sets" {
					if heads != 1 {
						t.Fatalf("%s %+v: host %d before head", name, q, i)
					}
					if len(labels) > 0 && !headSets[&labels[0]] {
						t.Fatalf("%s %+v: host %s: set %v not among head's", name, q, v.Host, labels)
					}
					for _, p := range v.Procs {
						if l, ok := headProcs[p.Key]; !ok || !maps.Equal(l, p.Labels) {
							t.Fatalf("%s %+v: host %s: process %s %v not among head's", name, q, v.Host, p.Key, p.Labels)
						}
					}
				} else if heads != 0 {
					t.Fatalf("%s %+v: head called without sets", name, q)
				}
				if i >= len(want) {
					t.Fatalf("%s %+v: host %d (%s) past the %d HostListEach lists", name, q, i, v.Host, len(want))
				}
				w, f := want[i], full[i]
				i++
				got := v.Labels
				if name == "sets" {
					if v.Labels != nil {
						t.Fatalf("%s %+v: host %s: a map %v beside its set", name, q, v.Host, v.Labels)
					}
					got = labels.Map()
				} else if labels != nil {
					t.Fatalf("%s %+v: host %s: a set %v from an inventory without sets", name, q, v.Host, labels)
				}
				if !maps.Equal(got, w.Labels) || !maps.Equal(f.Labels, w.Labels) || len(w.Labels) == 0 {
					t.Fatalf("%s %+v: host %s: labels %v, HostListEach has %v, Hosts %v", name, q, v.Host, got, w.Labels, f.Labels)
				}
				if v.Host != w.Host || v.State != w.State || v.AgentID != w.AgentID || v.Version != w.Version || v.LastSeen < w.LastSeen {
					t.Fatalf("%s %+v: host %d: %+v, HostListEach has %+v", name, q, i-1, v.HostInfo, w.HostInfo)
				}
				if len(v.Procs) != len(w.Procs) {
					t.Fatalf("%s %+v: host %s: %d processes, HostListEach has %d", name, q, v.Host, len(v.Procs), len(w.Procs))
				}
				for j, p := range v.Procs {
					if wp := w.Procs[j]; p.Key != wp.Key || !maps.Equal(p.Labels, wp.Labels) || p.Status != wp.Status {
						t.Fatalf("%s %+v: host %s process %d: %+v, want %+v", name, q, v.Host, j, p, wp)
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if i != len(want) || len(want) == 0 {
				t.Fatalf("%s %+v: %d hosts, HostListEach lists %d", name, q, i, len(want))
			}
		}
	}
}
