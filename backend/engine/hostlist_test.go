package engine_test

import (
	"context"
	"testing"

	"gseproc/backend"
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
			if v.Host != w.Host || v.State != w.State || v.AgentID != w.AgentID || v.Version != w.Version || v.LastSeen < w.LastSeen || v.LastSeen == 0 || len(v.Labels) != len(w.Labels) {
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
