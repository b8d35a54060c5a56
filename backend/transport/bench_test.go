package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/backend/config"
	"gseproc/backend/cputime"
	"gseproc/backend/simulator"
	"gseproc/model"
)

// BenchmarkDispatch is one op round trip server -> agent -> server over
// an embedded NATS server on 127.0.0.1 (TCP for the agent, in-process for
// the server).
func BenchmarkDispatch(b *testing.B) {
	e := startServer(b, testNATS(b), true)
	runAgent(b, e.ClientURL(), ClientOptions{}, echoAgent(h1), ServeOptions{HeartbeatInterval: time.Second})
	d := newDispatcher(b, serverConn(b, e), DispatcherOptions{})
	eventually(b, "online", 5*time.Second, func() bool { return hostState(d, h1) == model.AgentOnline })
	ctx := context.Background()
	req := model.AgentRequest{TaskID: "GSETASK:20260101000000:1", Op: model.OpStatus,
		Process: model.Process{Meta: model.Meta{Namespace: "web", Name: "nginx"}}}
	b.Run("sequential", func(b *testing.B) {
		for range b.N {
			c, cancel := context.WithTimeout(ctx, 5*time.Second)
			if _, err := d.Dispatch(c, h1, req); err != nil {
				b.Fatal(err)
			}
			cancel()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c, cancel := context.WithTimeout(ctx, 5*time.Second)
				if _, err := d.Dispatch(c, h1, req); err != nil {
					b.Error(err)
				}
				cancel()
			}
		})
	})
}

// fleet10k is the set-up of BenchmarkFleet10k and BenchmarkFleetAsync10k:
// 10,000 simulated hosts served by one `gseproc sim` connection, most of
// them heard by a dispatcher; the hosts and a process of their profile.
func fleet10k(b *testing.B) (*Dispatcher, []model.HostInfo, model.Process) {
	b.Helper()
	const n = 10000
	e := startServer(b, testNATS(b), true)
	f := simulator.New(config.SimulatorConfig{Hosts: n, Seed: 1, Clouds: 1, Namespaces: []string{"web"}})
	b.Cleanup(func() { _ = f.Close() })
	serveFleet(b, e.ClientURL(), ClientOptions{}, f, ServeOptions{HeartbeatInterval: 5 * time.Second})
	d := newDispatcher(b, serverConn(b, e), DispatcherOptions{})
	ctx := context.Background()
	hosts, _ := f.Hosts(ctx)
	eventually(b, "fleet online", 20*time.Second, func() bool {
		hs, _ := d.Hosts(ctx)
		return len(hs) > n*9/10
	})
	return d, hosts, f.Definitions()[0].Process
}

// BenchmarkFleet10k: 10,000 simulated hosts served by one `gseproc sim`
// connection answer one op each, all sent at once (2048 in flight, the
// engine's default concurrency). One iteration is the whole fan-out.
func BenchmarkFleet10k(b *testing.B) {
	d, hosts, p := fleet10k(b)
	ctx := context.Background()
	b.ResetTimer()
	var failed atomic.Int64
	for range b.N {
		sem := make(chan struct{}, 2048)
		var wg sync.WaitGroup
		for _, hi := range hosts {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				c, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				if _, err := d.Dispatch(c, hi.Host, model.AgentRequest{Op: model.OpStatus, Process: p}); err != nil {
					failed.Add(1) // offline/unreachable hosts of the profile
				}
			}()
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/10k-hosts")
	b.ReportMetric(float64(failed.Load())/float64(b.N), "unanswered/op")
}

// BenchmarkKeepalive is the server's work for one keepalive heartbeat
// (most heartbeats: an empty message) of one of 10,000 known hosts, from
// its subject to the host's entry: the heartbeat worker's hot path.
func BenchmarkKeepalive(b *testing.B) {
	e := startServer(b, testNATS(b), true)
	d := newDispatcher(b, serverConn(b, e), DispatcherOptions{})
	const n = 10000
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		h := model.Host{IP: fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)}
		msgs[i] = &nats.Msg{Subject: HeartbeatSubject(mustID(b, h))}
		d.onHeartbeat(msgs[i])
	}
	if on, known := d.Count(); on != n || known != n {
		b.Fatalf("%d of %d hosts online, want %d", on, known, n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		d.onHeartbeat(msgs[i%n])
	}
}

// BenchmarkFullBeats100k: the memory the dispatcher keeps for 100,000
// hosts after one full heartbeat each (the simulator's labels: zone, os,
// rack, role, mem), and the server's work per full heartbeat. Measured
// 2026-11-23: ~785 bytes kept a host (79 MB at 100,000), 1.3 KB and 40
// allocations a beat. The simulator's hosts carry 62,002 distinct label
// sets in 100,000: sharing equal label maps saved 5 % of it (not kept).
// 2026-11-24: ~620 bytes kept a host (labelSet), 516 B and 18
// allocations a beat (decodeHeartbeat), from ~740, 1.2 KB and 33.
// 2026-11-24: ~507 bytes kept a host (hostEntry without its derivable
// fields, times as integers: 176 bytes an entry, from 320).
// 2026-11-24: ~491 bytes kept a host, 468 B and 15 allocations a beat
// (a full beat finds its entry by subject, not by its address made
// into text twice).
// 2026-11-29: ~479 bytes kept a host (hostEntry 144 bytes: the agent's
// version and id behind one pointer, the grace an int32; heartbeat
// subjects known by their hash: a server also no longer keeps each
// host's subject text, 32 bytes, which this benchmark's messages hold).
func BenchmarkFullBeats100k(b *testing.B) {
	const n = 100000
	f := simulator.New(config.SimulatorConfig{Hosts: n, Seed: 1, Clouds: 1, Namespaces: []string{"web"}})
	defer f.Close()
	hosts, _ := f.Hosts(context.Background())
	msgs := make([]*nats.Msg, len(hosts))
	for i, hi := range hosts {
		data, err := json.Marshal(Heartbeat{Info: model.HostInfo{Host: hi.Host, Labels: hi.Labels, AgentID: hi.AgentID, Version: hi.Version},
			Interval: 5 * time.Second, Full: true})
		if err != nil {
			b.Fatal(err)
		}
		msgs[i] = &nats.Msg{Subject: HeartbeatSubject(mustID(b, hi.Host)), Data: data}
	}
	e := startServer(b, testNATS(b), true)
	// No host turns offline while a loaded machine feeds the beats.
	d := newDispatcher(b, serverConn(b, e), DispatcherOptions{OfflineAfter: time.Hour})
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	for _, m := range msgs {
		d.onHeartbeat(m)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	if on, _ := d.Count(); on != len(msgs) {
		b.Fatalf("%d of %d hosts online", on, len(msgs))
	}
	kept := float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc)) / float64(len(msgs))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		d.onHeartbeat(msgs[i%len(msgs)])
	}
	b.ReportMetric(kept, "B/host-kept")
	runtime.KeepAlive(hosts)
}

// BenchmarkServeFleet10k: the simulated fleet's side of an op over 10,000
// hosts, as `gseproc sim --nats` serves it: a status request per host
// (the engine's request, with its deadline, at most 2048 in flight, each
// host's latency as bench fleet configures it), answered on one
// connection. The sender publishes pre-encoded requests on a raw
// connection and counts the replies, so most of the work is the fleet's
// (and the embedded NATS server's, the same in every version). cpu-ms/op
// is the process's CPU per fan-out.
func BenchmarkServeFleet10k(b *testing.B) {
	const n = 10000
	e := startServer(b, testNATS(b), true)
	cfg := config.Default().Simulator
	cfg.Hosts, cfg.Seed = n, 1
	cfg.LatencyMedian, cfg.LatencyP99 = config.Duration(5*time.Millisecond), config.Duration(50*time.Millisecond)
	cfg.FailureRate, cfg.OfflineRate, cfg.UnreachableRate, cfg.CrashRate = 0, 0, 0, 0
	f := simulator.New(cfg)
	b.Cleanup(func() { _ = f.Close() })
	serveFleet(b, e.ClientURL(), ClientOptions{}, f, ServeOptions{HeartbeatInterval: time.Minute})

	snd := serverConn(b, e)
	hosts, _ := f.Hosts(context.Background())
	subjects, replyTo := make([]string, len(hosts)), make([]string, len(hosts))
	for i, hi := range hosts {
		id, err := hostID(hi.Host)
		if err != nil {
			b.Fatal(err)
		}
		subjects[i], replyTo[i] = OpSubject(id), ReplySubject(id, strconv.Itoa(i))
	}
	var def model.ProcessDef
	for _, d := range f.Definitions() {
		if d.Process.Meta.Namespace == "gse" && d.Process.Meta.Name == "bkmonitorbeat" {
			def = d
		}
	}
	replies := make(chan struct{}, 4096)
	sub, err := snd.Subscribe("gseproc.agent.*.*.reply.*", func(*nats.Msg) { replies <- struct{}{} })
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	// Wait until the fleet serves every host: a request to the last one
	// is answered.
	eventually(b, "fleet serving", 20*time.Second, func() bool {
		last := len(subjects) - 1
		if err := snd.PublishMsg(&nats.Msg{Subject: subjects[last], Reply: replyTo[last], Data: []byte(`{"op_type":1}`)}); err != nil {
			return false
		}
		select {
		case <-replies:
			return true
		case <-time.After(time.Second):
			return false
		}
	})
	fanout := func() {
		req := model.AgentRequest{TaskID: "GSETASK:20261124050000:1", Op: model.OpStatus, Process: def.Process,
			Deadline: time.Now().Add(time.Minute)}
		data, err := model.AppendRequestJSON(nil, &req)
		if err != nil {
			b.Fatal(err)
		}
		inflight, got := 0, 0
		for i, subj := range subjects {
			for inflight >= 2048 {
				<-replies
				inflight--
				got++
			}
			if err := snd.PublishMsg(&nats.Msg{Subject: subj, Reply: replyTo[i], Data: data}); err != nil {
				b.Fatal(err)
			}
			inflight++
		}
		for ; inflight > 0; inflight-- {
			select {
			case <-replies:
				got++
			case <-time.After(10 * time.Second):
				b.Fatalf("%d of %d replies", got, len(subjects))
			}
		}
	}
	fanout() // warm-up
	c0 := cputime.Self()
	b.ResetTimer()
	for b.Loop() {
		fanout()
	}
	b.ReportMetric(float64(cputime.Self()-c0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// BenchmarkFleetAsync10k is BenchmarkFleet10k through DispatchAsync, as
// the engine sends an op of 64 targets or more: the answers handed to a
// callback by the reply subscription, 2,048 in flight, the requests
// under a few shared deadlines.
func BenchmarkFleetAsync10k(b *testing.B) {
	d, hosts, p := fleet10k(b)
	ctx := context.Background()
	pj, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	c0 := cputime.Self()
	b.ResetTimer()
	var failed atomic.Int64
	for range b.N {
		sem := make(chan struct{}, 2048)
		var wg sync.WaitGroup
		var dl context.Context
		var cancels []context.CancelFunc
		for k, hi := range hosts {
			if k%256 == 0 { // a shared deadline for each 256 sent, as the engine's
				var c context.CancelFunc
				dl, c = context.WithTimeout(ctx, 5*time.Second)
				cancels = append(cancels, c)
			}
			sem <- struct{}{}
			wg.Add(1)
			req := model.AgentRequest{TaskID: "t", OpID: "t/" + strconv.Itoa(k), Op: model.OpStatus, Process: p, ProcessJSON: pj}
			d.DispatchAsync(dl, hi.Host, req, func(_ model.AgentReply, err error) {
				if err != nil {
					failed.Add(1) // offline/unreachable hosts of the profile
				}
				<-sem
				wg.Done()
			})
		}
		wg.Wait()
		for _, c := range cancels {
			c()
		}
	}
	b.ReportMetric(float64(cputime.Self()-c0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(failed.Load())/float64(b.N), "unanswered/op")
}
