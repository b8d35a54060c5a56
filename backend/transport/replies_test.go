package transport

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/backend/config"
	"gseproc/backend/transport/transporttest"
	"gseproc/model"
)

// onceAgent answers each op id as an agent's ledger does: the first
// request runs (and waits for release), a repeat waits for it and gets
// the same answer.
type onceAgent struct {
	*fakeAgent
	started, release chan struct{}

	mu   sync.Mutex
	runs map[string]int
	done map[string]chan struct{}
	reqs int
}

func newOnceAgent(h model.Host) *onceAgent {
	a := &onceAgent{started: make(chan struct{}, 1), release: make(chan struct{}), runs: map[string]int{}, done: map[string]chan struct{}{}}
	a.fakeAgent = &fakeAgent{info: model.HostInfo{Host: h}, handle: func(ctx context.Context, req model.AgentRequest) model.AgentReply {
		a.mu.Lock()
		a.reqs++
		d, repeat := a.done[req.OpID]
		if !repeat {
			d = make(chan struct{})
			a.done[req.OpID] = d
			a.runs[req.OpID]++
		}
		a.mu.Unlock()
		if !repeat {
			a.started <- struct{}{}
			<-a.release
			close(d)
		}
		select {
		case <-d:
		case <-ctx.Done():
			return model.AgentReply{Code: model.CodeTimeout, Message: "still running"}
		}
		return model.AgentReply{Code: model.CodeSuccess, Message: "started once"}
	}}
	return a
}

// TestReplyLostWhileServerAway: the server's connection drops while an
// agent runs an op, and the agent answers while the server is away (core
// NATS drops the answer: nobody subscribes). Once reconnected, the
// dispatcher asks again with the same op id and gets the outcome, which
// the agent did not run twice. Without asking again the dispatch waits
// out its deadline (116 for a host that succeeded).
func TestReplyLostWhileServerAway(t *testing.T) {
	// Both ways of sending: a goroutine waiting (Dispatch) and none
	// (DispatchAsync: the request is taken over when the connection
	// comes back).
	for _, async := range []bool{false, true} {
		name := "Dispatch"
		if async {
			name = "DispatchAsync"
		}
		t.Run(name, func(t *testing.T) { replyLostWhileServerAway(t, async) })
	}
}

func replyLostWhileServerAway(t *testing.T, async bool) {
	cfg := testNATS(t)
	cfg.Users = []config.NATSUser{{User: "srv", Password: "srvpw", Role: config.NATSRoleServer}}
	e := startServer(t, cfg, true)
	a := newOnceAgent(h1)
	runAgent(t, e.ClientURL(), ClientOptions{}, a, ServeOptions{HeartbeatInterval: 50 * time.Millisecond})

	rl := transporttest.NewRelay(t, e.ClientURL())
	nc, err := Connect(ClientOptions{URLs: rl.URL(), User: "srv", Password: "srvpw", MaxReconnectDelay: 100 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	d := newDispatcher(t, nc, DispatcherOptions{})
	eventually(t, "online", 15*time.Second, func() bool { return hostState(d, h1) == model.AgentOnline })

	// A witness sees the agent's answer go out.
	watch := serverConn(t, e)
	answered := make(chan struct{}, 4)
	if _, err := watch.Subscribe(AllReplies, func(*nats.Msg) { answered <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}

	type out struct {
		rep model.AgentReply
		err error
	}
	res := make(chan out, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req := model.AgentRequest{TaskID: "t1", OpID: model.OpID("t1", h1, "ns:p"), Op: model.OpStart,
			Process: model.Process{Meta: model.Meta{Namespace: "ns", Name: "p"}}}
		if async {
			answered := make(chan struct{})
			d.DispatchAsync(ctx, h1, req, func(rep model.AgentReply, err error) { res <- out{rep, err}; close(answered) })
			<-answered // its context ends only once it is answered
			return
		}
		rep, err := d.Dispatch(ctx, h1, req)
		res <- out{rep, err}
	}()
	select {
	case <-a.started:
	case <-time.After(15 * time.Second):
		t.Fatal("the op never reached the agent")
	}
	rl.Point("")
	rl.Cut()
	eventually(t, "the server's connection down", 15*time.Second, func() bool { return !nc.IsConnected() })
	close(a.release)
	select {
	case <-answered: // published while the server was away: lost to it
	case <-time.After(15 * time.Second):
		t.Fatal("the agent did not answer")
	}
	rl.Point(e.ClientURL())

	r := <-res
	if r.err != nil || r.rep.Code != model.CodeSuccess {
		t.Fatalf("dispatch after the server's reconnection: %+v %v, want the agent's success", r.rep, r.err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := a.runs[model.OpID("t1", h1, "ns:p")]; n != 1 || a.reqs < 2 {
		t.Fatalf("op ran %d times over %d requests; want once, asked again", n, a.reqs)
	}
}

// An agent's reply is bounded at the server's entrance (model.BoundReply):
// its output clipped to its last model.MaxOutput bytes after "...", its
// message to model.MaxOutput, its status's texts plain. An agent is
// untrusted; its output_limit is its own, and a reply was kept up to the
// NATS payload (8 MiB embedded) for every target of every task.
func TestReplyOutputBounded(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	out := strings.Repeat("x", 2<<20) + "the end"
	a := &fakeAgent{info: model.HostInfo{Host: h1}, handle: func(ctx context.Context, req model.AgentRequest) model.AgentReply {
		return model.AgentReply{Code: model.CodeCommandFailed, Message: "failed: " + strings.Repeat("m", 1<<20), Output: out,
			Status: &model.ProcStatus{ProcKey: req.Process.Key(), State: model.ProcStopped, PID: -1, Message: "gone\x1b]52;c;eA==\a"}}
	}}
	runAgent(t, e.ClientURL(), ClientOptions{Name: "agent"}, a, ServeOptions{HeartbeatInterval: time.Minute})
	var logged strings.Builder
	var mu sync.Mutex
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))})
	eventually(t, "agent online", 30*time.Second, func() bool { return d.Online(h1) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := d.Dispatch(ctx, h1, model.AgentRequest{TaskID: "GSETASK:20260101000000:1", Op: model.OpStart,
		Process: model.Process{Meta: model.Meta{Namespace: "ns", Name: "p"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Output) != model.MaxOutput || !strings.HasPrefix(rep.Output, "...xxx") || !strings.HasSuffix(rep.Output, "the end") {
		t.Errorf("output kept with %d bytes (%.10q...%.10q), want its last %d after ...", len(rep.Output), rep.Output, rep.Output[max(0, len(rep.Output)-10):], model.MaxOutput)
	}
	if len(rep.Message) != model.MaxOutput || !strings.HasPrefix(rep.Message, "failed: mmm") || !strings.HasSuffix(rep.Message, "m...") {
		t.Errorf("message kept with %d bytes, want %d ending in ...", len(rep.Message), model.MaxOutput)
	}
	if rep.Code != model.CodeCommandFailed || rep.Status == nil || rep.Status.Message != "gone" || rep.Status.ProcKey != "ns:p" {
		t.Errorf("reply %d, status %+v", rep.Code, rep.Status)
	}
	mu.Lock()
	log := logged.String()
	mu.Unlock()
	if !strings.Contains(log, "reply clipped") || !strings.Contains(log, "first=output") {
		t.Errorf("log does not say the reply was clipped: %s", log)
	}
}

// A log tail's chunk is bounded at the server's entrance
// (model.CheckTailChunk): one an agent says stands for more than
// model.MaxTailChunk bytes of the log, or whose data are longer than
// those bytes make, is refused whole (a clipped chunk would skip or repeat
// bytes at its Next), the reply saying why; a chunk within the bounds
// comes through unchanged. An agent is untrusted: a chunk was kept up to
// the NATS payload (8 MiB embedded).
func TestReplyTailChunkBounded(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	whole := strings.Repeat("y", model.MaxTailChunk-1) + "\n"
	chunks := map[string]model.TailChunk{
		"whole":   {Path: "app.log", Offset: 7, Next: 7 + model.MaxTailChunk, Data: whole, Size: 1 << 20, Running: true},
		"huge":    {Path: "app.log", Offset: 0, Next: 4 << 20, Data: strings.Repeat("x", 4<<20), Size: 4 << 20},
		"swollen": {Path: "app.log", Offset: 0, Next: 10, Data: strings.Repeat("x", 4<<20), Size: 10},
	}
	a := &fakeAgent{info: model.HostInfo{Host: h1}, handle: func(ctx context.Context, req model.AgentRequest) model.AgentReply {
		c := chunks[req.Tail.File]
		return model.AgentReply{Code: model.CodeSuccess, Message: "success", Tail: &c}
	}}
	runAgent(t, e.ClientURL(), ClientOptions{Name: "agent"}, a, ServeOptions{HeartbeatInterval: time.Minute})
	var logged strings.Builder
	var mu sync.Mutex
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))})
	eventually(t, "agent online", 30*time.Second, func() bool { return d.Online(h1) })
	tail := func(file string) model.AgentReply {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rep, err := d.Dispatch(ctx, h1, model.AgentRequest{Process: model.Process{Meta: model.Meta{Namespace: "ns", Name: "p"}},
			Tail: &model.TailRequest{Stream: model.LogFile, File: file, Offset: -1}})
		if err != nil {
			t.Fatalf("tail %s: %v", file, err)
		}
		return rep
	}
	if rep := tail("whole"); rep.Code != model.CodeSuccess || rep.Tail == nil || rep.Tail.Data != whole || rep.Tail.Offset != 7 || rep.Tail.Next != 7+model.MaxTailChunk {
		t.Errorf("a chunk within the bounds: code %d %q, tail %v", rep.Code, rep.Message, rep.Tail != nil)
	}
	for _, file := range []string{"huge", "swollen"} {
		rep := tail(file)
		if rep.Code != model.CodeCommandFailed || rep.Tail != nil || !strings.Contains(rep.Message, "log tail refused") || !strings.Contains(rep.Message, "model.MaxTailChunk") {
			t.Errorf("%s chunk: code %d, tail kept %v, message %.200q", file, rep.Code, rep.Tail != nil, rep.Message)
		}
	}
	mu.Lock()
	log := logged.String()
	mu.Unlock()
	if !strings.Contains(log, "first=tail") {
		t.Errorf("log does not say the tail was refused: %s", log)
	}
}
