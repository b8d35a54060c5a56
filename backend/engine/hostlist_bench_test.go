package engine_test

import (
	"context"
	"testing"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/simulator"
	"gseproc/backend/store"
)

// hostList100k is an engine over a simulated fleet of 100,000 hosts as the
// embedded console builds it (the fleet its status source and simulator,
// a memory store), and the namespace query with the most hosts.
func hostList100k(b *testing.B) (*engine.Engine, backend.HostQuery) {
	b.Helper()
	sc := quietFleet(100_000)
	sc.Clouds, sc.Namespaces = 1, []string{"web", "gse", "db"}
	fleet := simulator.New(sc)
	ec := config.Default().Engine
	ec.MaxTargets = 400_000
	e := engine.New(ec, fleet, fleet, store.NewMemory(), engine.WithSimulator(fleet))
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close(); _ = fleet.Close() })
	if err := e.Seed(ctx, fleet.Definitions()); err != nil {
		b.Fatal(err)
	}
	best, n := backend.HostQuery{}, 0
	for _, ns := range sc.Namespaces {
		q := backend.HostQuery{Namespace: ns}
		hv, err := e.Hosts(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		if len(hv) > n {
			best, n = q, len(hv)
		}
	}
	return e, best
}

// BenchmarkHosts100k: the engine's Hosts over the biggest namespace of a
// 100,000-host simulated fleet (what the embedded console's host list
// open asks, and the server's full /api/v1/hosts).
func BenchmarkHosts100k(b *testing.B) {
	e, q := hostList100k(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		hv, err := e.Hosts(ctx, q)
		if err != nil || len(hv) == 0 {
			b.Fatal(len(hv), err)
		}
	}
}

// BenchmarkHostListEach100k: the engine's list form over the same hosts
// (the server's /api/v1/hosts?form=list).
func BenchmarkHostListEach100k(b *testing.B) {
	e, q := hostList100k(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		n := 0
		if err := e.HostListEach(ctx, q, func(*backend.HostView) { n++ }); err != nil || n == 0 {
			b.Fatal(n, err)
		}
	}
}
