//go:build !windows

package transport

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/cputime"
	"gseproc/backend/engine"
	"gseproc/backend/server/wire"
	"gseproc/backend/simulator"
	"gseproc/backend/store"
	"gseproc/model"
)

// BenchmarkHostList100k is the server's side of a 100,000-host list
// (GET /api/v1/hosts?form=list, the console's open): the dispatcher's
// inventory (every host heard by a full heartbeat with its statuses),
// the engine's listing over it, and the listing in the list form.
// 2026-11-24, load 9-11, back to back: list form through Engine.Hosts
// before this session's changes (3af5a05) 1454-1544 CPU ms, 447 MB,
// 400k allocations a listing; through Engine.HostListEach (5df60c0)
// 686-753 CPU ms, 107 MB, 201k allocations (the process's CPU time,
// GC included, over a heap holding the simulated fleet too).
func BenchmarkHostList100k(b *testing.B) {
	const n = 100000
	sc := config.Default().Simulator
	sc.Hosts, sc.Seed = n, 1
	f := simulator.New(sc)
	defer f.Close()
	ctx := context.Background()
	hosts, _ := f.Hosts(ctx)
	e := startServer(b, testNATS(b), true)
	d := newDispatcher(b, serverConn(b, e), DispatcherOptions{OfflineAfter: time.Hour})
	for _, hi := range hosts {
		data, err := json.Marshal(Heartbeat{Info: model.HostInfo{Host: hi.Host, Labels: hi.Labels, AgentID: hi.AgentID, Version: hi.Version},
			Interval: 5 * time.Second, Full: true, Statuses: f.Statuses(hi.Host)})
		if err != nil {
			b.Fatal(err)
		}
		d.onHeartbeat(&nats.Msg{Subject: HeartbeatSubject(mustID(b, hi.Host)), Data: data})
	}
	eng := engine.New(config.Default().Engine, d, d, store.NewMemory())
	if err := eng.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	if err := eng.Seed(ctx, f.Definitions()); err != nil {
		b.Fatal(err)
	}
	b.Run("dispatcher", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if hs, err := d.Hosts(ctx); err != nil || len(hs) != n {
				b.Fatal(len(hs), err)
			}
		}
	})
	b.Run("engine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if vs, err := eng.Hosts(ctx, backend.HostQuery{}); err != nil || len(vs) != n {
				b.Fatal(len(vs), err)
			}
		}
	})
	b.Run("list", func(b *testing.B) {
		b.ReportAllocs()
		var size int
		cpu := cputime.Self()
		for b.Loop() {
			vs, err := eng.Hosts(ctx, backend.HostQuery{})
			if err != nil || len(vs) != n {
				b.Fatal(len(vs), err)
			}
			var w wire.HostListWriter
			for i := range vs {
				v := &vs[i]
				w.Host(&v.HostInfo)
				for j := range v.Procs {
					p := &v.Procs[j]
					w.Proc(p.Key, p.Labels, p.Status.State, p.Status.PID, p.Status.Hosted)
				}
			}
			size = len(w.AppendTo(nil))
		}
		b.ReportMetric(float64(size), "B/listing")
		b.ReportMetric(float64(cputime.Self()-cpu)/1e6/float64(b.N), "cpu-ms/op")
	})
	b.Run("listeach", func(b *testing.B) { // the list form's path (HostListEach), as the server lists it
		b.ReportAllocs()
		var size int
		cpu := cputime.Self()
		for b.Loop() {
			var w wire.HostListWriter
			err := eng.HostListEach(ctx, backend.HostQuery{}, func(v *backend.HostView) {
				w.Host(&v.HostInfo)
				for j := range v.Procs {
					p := &v.Procs[j]
					w.Proc(p.Key, p.Labels, p.Status.State, p.Status.PID, p.Status.Hosted)
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			// The parts the server writes (Server.hostList), not joined.
			size = 0
			for _, p := range w.Parts() {
				size += len(p)
			}
		}
		b.ReportMetric(float64(size), "B/listing")
		b.ReportMetric(float64(cputime.Self()-cpu)/1e6/float64(b.N), "cpu-ms/op")
	})
	b.Run("listsets", func(b *testing.B) { // the list form's path with the shared label sets (HostListSets), as the server lists it
		b.ReportAllocs()
		var size int
		cpu := cputime.Self()
		for b.Loop() {
			var w wire.HostListWriter
			err := eng.HostListSets(ctx, backend.HostQuery{}, nil, func(v *backend.HostView, labels model.LabelSet) {
				w.HostLabels(&v.HostInfo, labels)
				for j := range v.Procs {
					p := &v.Procs[j]
					w.Proc(p.Key, p.Labels, p.Status.State, p.Status.PID, p.Status.Hosted)
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			size = 0
			for _, p := range w.Parts() {
				size += len(p)
			}
		}
		b.ReportMetric(float64(size), "B/listing")
		b.ReportMetric(float64(cputime.Self()-cpu)/1e6/float64(b.N), "cpu-ms/op")
	})
	b.Run("stream", func(b *testing.B) { // the server's path for a whole listing: tables first (head), hosts streamed
		b.ReportAllocs()
		var size int
		cpu := cputime.Self()
		for b.Loop() {
			var w wire.HostListWriter
			size = 0
			head := func(procs []backend.ProcView, sets []model.LabelSet) {
				for i := range procs {
					w.AddProc(procs[i].Key, procs[i].Labels)
				}
				for _, l := range sets {
					w.AddLabels(l)
				}
				if err := w.Stream(func(p []byte) error { size += len(p); return nil }); err != nil {
					b.Fatal(err)
				}
			}
			err := eng.HostListSets(ctx, backend.HostQuery{}, head, func(v *backend.HostView, labels model.LabelSet) {
				w.HostLabels(&v.HostInfo, labels)
				for j := range v.Procs {
					p := &v.Procs[j]
					w.Proc(p.Key, p.Labels, p.Status.State, p.Status.PID, p.Status.Hosted)
				}
			})
			if err == nil {
				err = w.Finish()
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(size), "B/listing")
		b.ReportMetric(float64(cputime.Self()-cpu)/1e6/float64(b.N), "cpu-ms/op")
	})
}
