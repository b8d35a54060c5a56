package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/simulator"
	"gseproc/backend/store"
	"gseproc/model"
)

// stalledStore is a memory store whose writes wait until open is closed;
// entered is told of the first.
type stalledStore struct {
	*store.Memory
	open    chan struct{}
	entered chan struct{}
	once    sync.Once
}

func (s *stalledStore) stall() {
	s.once.Do(func() { close(s.entered) })
	<-s.open
}

func (s *stalledStore) PutResult(ctx context.Context, r model.Result) error {
	s.stall()
	return s.Memory.PutResult(ctx, r)
}

func (s *stalledStore) PutProcStatus(ctx context.Context, h model.Host, st model.ProcStatus) error {
	s.stall()
	return s.Memory.PutProcStatus(ctx, h, st)
}

func (s *stalledStore) KeepProcStatus(ctx context.Context, h model.Host, st *model.ProcStatus) error {
	s.stall()
	return s.Memory.KeepProcStatus(ctx, h, st)
}

// oneSubscription is an AsyncDispatcher that answers every request from
// one goroutine, one after the other, as the NATS reply subscription
// does (an answer is read only once the callback of the one before
// returned); returned counts the callbacks that returned.
type oneSubscription struct {
	*simulator.Fleet
	q              chan func()
	sent, returned atomic.Int64
	stop           chan struct{}
	wg             sync.WaitGroup
}

func (o *oneSubscription) DispatchAsync(ctx context.Context, host model.Host, req model.AgentRequest, done func(model.AgentReply, error)) {
	o.sent.Add(1)
	o.q <- func() {
		rep, err := o.Fleet.Dispatch(ctx, host, req)
		done(rep, err)
		o.returned.Add(1)
	}
}

func (o *oneSubscription) run() {
	defer o.wg.Done()
	for {
		select {
		case f := <-o.q:
			f()
		case <-o.stop:
			return
		}
	}
}

// A run's answer is recorded without blocking the goroutine that hands
// answers on (the NATS reply subscription, shared by every request of
// the server) when the writer's queue is full: the run still waits for
// the writer (at most its window in flight), and every result is
// recorded once the store takes writes again.
func TestAsyncCallbackDoesNotBlockOnFullWriteQueue(t *testing.T) {
	fleet := simulator.New(config.SimulatorConfig{Hosts: 100, Seed: 7, Clouds: config.Default().Simulator.Clouds,
		Namespaces: config.Default().Simulator.Namespaces, LatencyMedian: config.Duration(time.Millisecond),
		LatencyP99: config.Duration(2 * time.Millisecond)})
	defer fleet.Close()
	st := &stalledStore{Memory: store.NewMemory(), open: make(chan struct{}), entered: make(chan struct{})}
	opened := false
	open := func() {
		if !opened {
			opened = true
			close(st.open)
		}
	}
	defer open()
	sub := &oneSubscription{Fleet: fleet, q: make(chan func(), 1024), stop: make(chan struct{})}
	sub.wg.Add(1)
	go sub.run()
	defer func() { close(sub.stop); sub.wg.Wait() }()
	ec := config.Default().Engine
	ec.Concurrency = 16
	e := New(ec, sub, fleet, st)
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { open(); _ = e.Close() }()
	hosts, err := fleet.Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := model.Process{Meta: model.Meta{Namespace: "bench", Name: "probe"}}
	p.Spec.Identity = model.Identity{ProcName: "probe", SetupPath: "/opt/probe", PidPath: "/var/run/probe.pid"}
	p.Spec.Control = model.Control{StartCmd: "./start.sh", StopCmd: "./stop.sh", ShellExt: "sh"}
	p.Spec.Policy = model.DefaultPolicy()
	p.Spec.Policy.AutoType = model.AutoResident
	p.Spec.Policy.OpTimeout = 1
	def := model.ProcessDef{Process: p}
	for _, h := range hosts {
		def.Hosts = append(def.Hosts, h.Host)
	}
	if err := e.SaveProcess(ctx, def); err != nil {
		t.Fatal(err)
	}

	// The writer stalls on a write, and its queue fills up behind it.
	filler := model.ProcStatus{ProcKey: "x:y"}
	e.enqueue(write{status: &filler, host: model.Host{IP: "192.0.2.1"}})
	<-st.entered
	x := &e.writes
	x.mu.Lock()
	for len(x.q) < writeQueueMax {
		x.q = append(x.q, write{status: &filler, host: model.Host{IP: "192.0.2.1"}})
	}
	x.mu.Unlock()

	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "bench"}})
	if err != nil {
		t.Fatal(err)
	}
	// The window fills (16 sent); each of their answers is handed on and
	// its callback returns, though none can be written yet.
	deadline := time.Now().Add(20 * time.Second)
	for sub.sent.Load() < int64(ec.Concurrency) || sub.returned.Load() < sub.sent.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("%d sent, %d callbacks returned: a callback waits for the writer on the goroutine that hands answers on", sub.sent.Load(), sub.returned.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if s := sub.sent.Load(); s > int64(ec.Concurrency) {
		t.Fatalf("%d sent while the writer is stalled, want at most the window (%d)", s, ec.Concurrency)
	}
	open()
	ch, err := e.Watch(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	timeout := time.After(2 * time.Minute)
	for done := false; !done; {
		select {
		case r, ok := <-ch:
			if !ok {
				done = true
				break
			}
			n++
			if r.State != model.StateSuccess {
				t.Fatalf("result %+v", r)
			}
		case <-timeout:
			t.Fatalf("watch did not end; %d results", n)
		}
	}
	if n != len(hosts) || sub.sent.Load() != int64(len(hosts)) {
		t.Fatalf("%d results, %d sent, of %d targets", n, sub.sent.Load(), len(hosts))
	}
}
