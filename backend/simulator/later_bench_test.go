//go:build !windows

package simulator

import (
	"context"
	"sync"
	"testing"
	"time"

	"gseproc/backend/config"
	"gseproc/backend/cputime"
	"gseproc/model"
)

// BenchmarkDispatchLater10k is the simulator's part of an op over 10,000
// hosts served over NATS: a status request to each, handed to
// DispatchLaterTo as the fleet's server does (one goroutine, the host by
// its place, a deadline a minute away), each answered when its latency
// (bench fleet's: 5 ms median, 50 ms p99) has passed. One iteration is
// the whole fan-out; cpu-ms/op is the process's CPU for it.
func BenchmarkDispatchLater10k(b *testing.B) {
	const n = 10000
	cfg := config.Default().Simulator
	cfg.Hosts, cfg.Seed = n, 1
	cfg.LatencyMedian, cfg.LatencyP99 = config.Duration(5*time.Millisecond), config.Duration(50*time.Millisecond)
	cfg.FailureRate, cfg.OfflineRate, cfg.UnreachableRate, cfg.CrashRate = 0, 0, 0, 0
	f := New(cfg)
	b.Cleanup(func() { _ = f.Close() })
	var p model.Process
	for _, d := range f.Definitions() {
		if d.Process.Meta.Namespace == "gse" && d.Process.Meta.Name == "bkmonitorbeat" {
			p = d.Process
		}
	}
	hosts, err := f.Hosts(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	answer := func(_ any, rep model.AgentReply, err error) {
		if err != nil || rep.Status == nil {
			b.Errorf("answer %+v, %v", rep, err)
		}
		wg.Done()
	}
	fanout := func() {
		req := model.AgentRequest{TaskID: "GSETASK:20261124050000:1", Op: model.OpStatus, Process: p,
			Deadline: time.Now().Add(time.Minute)}
		for i := range hosts {
			wg.Add(1)
			if !f.DispatchLaterTo(ctx, req.Deadline, i, req, answer, nil) {
				b.Fatal("not taken")
			}
		}
		wg.Wait()
	}
	fanout() // warm-up
	b.ReportAllocs()
	c0 := cputime.Self()
	b.ResetTimer()
	for b.Loop() {
		fanout()
	}
	b.ReportMetric(float64(cputime.Self()-c0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
