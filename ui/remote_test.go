package ui

import (
	"context"
	"maps"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"

	"gseproc/backend"
	"gseproc/backend/client"
	"gseproc/backend/config"
	"gseproc/backend/server"
	"gseproc/model"
)

// TestWatchThroughServer: the watch against a real server (remote mode)
// makes rows of a task's results as the client reads them
// (backend.TaskResults) and reads the ended task without them
// (backend.TaskSummary): opened on a running task and on an ended one,
// it ends with one row per target, each in its state on the server, and
// counts that add up to the targets (nothing counted twice).
func TestWatchThroughServer(t *testing.T) {
	eng, _ := simBackend(t, quietSim(60, "web", "gse"))
	cfg := config.Default().Server
	cfg.AnonymousApp = ""
	cfg.NativeAuth = false
	srv := server.New(eng, cfg, nil)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	c := client.New(hs.URL)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()

	check := func(d *driver, task model.Task) {
		t.Helper()
		var w *watchPage
		d.until("the task watched to its end", func() bool {
			w, _ = d.m.top().(*watchPage)
			return w != nil && w.loaded && !w.streaming && taskFinal(w.task.Status)
		})
		if w.err != nil {
			t.Fatalf("watch: %v", w.err)
		}
		tv, err := eng.Task(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if w.res.len() != len(tv.Results) || w.counts.Total() != len(tv.Results) || w.counts.Final() != len(tv.Results) {
			t.Fatalf("%d rows, counts %+v; want %d final", w.res.len(), w.counts, len(tv.Results))
		}
		for _, r := range tv.Results {
			i, ok := w.res.find(r.Host, r.ProcKey)
			if !ok || w.res.state(i) != r.State || w.res.code(i) != r.Code {
				t.Fatalf("%s %s: row %v %v, want %s %d", r.Host, r.ProcKey, ok, w.res.result(i), r.State, r.Code)
			}
		}
		if w.task.Status != tv.Task.Status || w.task.Counts != tv.Task.Counts {
			t.Fatalf("task %s %+v, want %s %+v", w.task.Status, w.task.Counts, tv.Task.Status, tv.Task.Counts)
		}
	}

	// A host list made rows as the client reads it, in the list form
	// (backend.HostListEach): each row as the engine's own listing
	// makes it.
	d := newDriver(t, c, Options{}, 120, 40)
	q := backend.HostQuery{Namespace: "web"}
	hp := newHostsPage(d.m.s, q)
	d.send(pushMsg{hp})
	d.until("the host list", func() bool { return hp.loaded })
	want, err := eng.Hosts(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(hp.rows) != len(want) || len(want) == 0 {
		t.Fatalf("%d rows, want %d", len(hp.rows), len(want))
	}
	for _, v := range want {
		i := slices.IndexFunc(hp.rows, func(r hostRow) bool { return r.v.Host == v.Host })
		if i < 0 || len(hp.rows[i].v.Procs) != len(v.Procs) || !maps.Equal(hp.rows[i].v.labels.toMap(), v.Labels) {
			t.Fatalf("host %s: row %d, want %d processes and labels %v", v.Host, i, len(v.Procs), v.Labels)
		}
		if got, want := hp.rows[i], newHostRow(v); !reflect.DeepEqual(got.v.Procs, want.v.Procs) || got.state != want.state ||
			got.v.State != want.v.State || got.v.Version != want.v.Version || got.v.AgentID != want.v.AgentID || got.display() != want.display() {
			t.Fatalf("host %s: row %+v, want %+v", v.Host, got, want)
		}
	}

	// Opened on the task as it starts.
	task, err := c.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	d.send(taskStartedMsg{task: task})
	check(d, task)

	// Opened on the ended task: every row from the task's read.
	d2 := newDriver(t, c, Options{}, 120, 40)
	d2.send(taskStartedMsg{task: task})
	check(d2, task)
}
