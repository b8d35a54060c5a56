package simulator

import (
	"context"
	"testing"

	"gseproc/model"
)

// BenchmarkNew100kHosts builds a 100,000-host fleet (time and memory).
func BenchmarkNew100kHosts(b *testing.B) {
	cfg := quiet(100_000)
	b.ReportAllocs()
	for b.Loop() {
		f := New(cfg)
		if f.Len() != 100_000 {
			b.Fatal(f.Len())
		}
	}
}

// BenchmarkDefinitions100k materialises the definitions' host lists of a
// 100,000-host fleet (done once per fleet, on first call).
func BenchmarkDefinitions100k(b *testing.B) {
	cfg := quiet(100_000)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		f := New(cfg)
		b.StartTimer()
		if len(f.Definitions()) == 0 {
			b.Fatal("no definitions")
		}
	}
}

// BenchmarkHosts100k lists the inventory of a 100,000-host fleet.
func BenchmarkHosts100k(b *testing.B) {
	f := New(quiet(100_000))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Hosts(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDispatch is one op with zero latency on a deployed process.
func BenchmarkDispatch(b *testing.B) {
	f := New(quiet(1000))
	d := f.Definitions()[0]
	ctx := context.Background()
	ops := []model.OpType{model.OpStatus, model.OpStop, model.OpStart, model.OpRestart}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h := d.Hosts[i%len(d.Hosts)]
		if _, err := f.Dispatch(ctx, h, model.AgentRequest{Op: ops[i%len(ops)], Process: d.Process}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkDispatchParallel is BenchmarkDispatch from all cores over all hosts.
func BenchmarkDispatchParallel(b *testing.B) {
	f := New(quiet(100_000))
	d := f.Definitions()[0]
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			h := d.Hosts[i%len(d.Hosts)]
			if _, err := f.Dispatch(ctx, h, model.AgentRequest{Op: model.OpStatus, Process: d.Process}); err != nil {
				b.Fatal(err)
			}
			i += 7
		}
	})
}

// BenchmarkStatuses is one host's heartbeat, as the engine asks it for
// every host of a hosts query.
func BenchmarkStatuses(b *testing.B) {
	f := New(quiet(10_000))
	d := f.Definitions()[0]
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if len(f.Statuses(d.Hosts[i%len(d.Hosts)])) == 0 {
			b.Fatal("no status")
		}
		i++
	}
}
