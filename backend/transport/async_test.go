package transport

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gseproc/model"
)

// h2 is a second host.
var h2 = model.Host{IP: "10.0.0.2", CloudID: 0}

// dispatchAsync sends req by DispatchAsync and waits for its callback,
// which must come once.
func dispatchAsync(t *testing.T, d *Dispatcher, ctx context.Context, h model.Host, req model.AgentRequest) (model.AgentReply, error) {
	t.Helper()
	type out struct {
		rep model.AgentReply
		err error
	}
	ch := make(chan out, 2)
	var calls atomic.Int32
	d.DispatchAsync(ctx, h, req, func(rep model.AgentReply, err error) {
		calls.Add(1)
		ch <- out{rep, err}
	})
	o := <-ch
	// A second call is looked for now and again when the test has ended
	// (its checks done, the reply table emptied), not after a sleep a
	// loaded machine could outlast.
	once := func() {
		if n := calls.Load(); n != 1 {
			t.Errorf("done called %d times, want once", n)
		}
	}
	once()
	t.Cleanup(once)
	return o.rep, o.err
}

// DispatchAsync answers as Dispatch does: the agent's reply; no agent
// listening (at once); no answer by the deadline; a context that cannot
// end (served by Dispatch).
func TestDispatchAsyncAnswers(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	release := make(chan struct{})
	defer close(release)
	mute := &fakeAgent{info: model.HostInfo{Host: h2}, handle: func(ctx context.Context, _ model.AgentRequest) model.AgentReply {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return model.AgentReply{Code: 0}
	}}
	runAgent(t, e.ClientURL(), ClientOptions{}, echoAgent(h1), ServeOptions{HeartbeatInterval: 50 * time.Millisecond})
	runAgent(t, e.ClientURL(), ClientOptions{}, mute, ServeOptions{HeartbeatInterval: 50 * time.Millisecond})
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	eventually(t, "agents online", 15*time.Second, func() bool {
		return hostState(d, h1) == model.AgentOnline && hostState(d, h2) == model.AgentOnline
	})
	p := model.Process{Meta: model.Meta{Namespace: "ns", Name: "p"}}
	req := model.AgentRequest{TaskID: "GSETASK:20260101000000:1", OpID: "GSETASK:20260101000000:1/0:10.0.0.1/ns:p", Op: model.OpStart, Process: p}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := dispatchAsync(t, d, ctx, h1, req)
	if err != nil || rep.Code != 0 || rep.Message != "did start for GSETASK:20260101000000:1" || rep.Status == nil || rep.Status.ProcKey != "ns:p" {
		t.Fatalf("reply %+v, %v", rep, err)
	}
	if _, err := dispatchAsync(t, d, ctx, model.Host{IP: "10.9.9.9", CloudID: 3}, req); !errors.Is(err, model.ErrUnreachable) || ctx.Err() != nil {
		t.Fatalf("no agent listening: %v (context %v), want unreachable before the deadline", err, ctx.Err())
	}
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	_, err = dispatchAsync(t, d, short, h2, req)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), h2.String()) {
		t.Fatalf("agent does not answer: %v, want the deadline, naming the host", err)
	}
	rep, err = dispatchAsync(t, d, context.Background(), h1, req)
	if err != nil || rep.Code != 0 {
		t.Fatalf("a context that cannot end: %+v, %v", rep, err)
	}
	if n := d.replies.len(); n != 0 {
		t.Fatalf("%d requests still kept, want none", n)
	}
}

// An async request whose deadline passed is kept for its late answer,
// handed to the late subscribers; one cancelled (model.ErrCancelled) is
// cancelled on its host, whose answer is its outcome.
func TestDispatchAsyncLateAndCancelled(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	answer := make(chan struct{})
	var once sync.Once
	running := make(chan string, 8) // the task ids the host has begun
	slow := &fakeAgent{info: model.HostInfo{Host: h1}, handle: func(ctx context.Context, req model.AgentRequest) model.AgentReply {
		select {
		case running <- req.TaskID:
		default:
		}
		select {
		case <-answer:
			return model.AgentReply{Code: model.CodeSuccess, Message: "done late"}
		case <-ctx.Done(): // the server's cancel
			return model.AgentReply{Code: model.CodeCommandFailed, Message: "stopped", Cancelled: true}
		}
	}}
	runAgent(t, e.ClientURL(), ClientOptions{}, slow, ServeOptions{HeartbeatInterval: 50 * time.Millisecond})
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	eventually(t, "agent online", 15*time.Second, func() bool { return hostState(d, h1) == model.AgentOnline })
	late := make(chan model.LateReply, 1)
	lctx, lcancel := context.WithCancel(context.Background())
	defer lcancel()
	d.SubscribeLate(lctx, func(lr model.LateReply) { late <- lr })

	p := model.Process{Meta: model.Meta{Namespace: "ns", Name: "p"}}
	opID := model.OpID("t1", h1, "ns:p")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := dispatchAsync(t, d, ctx, h1, model.AgentRequest{TaskID: "t1", OpID: opID, Op: model.OpStart, Process: p}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the deadline", err)
	}
	once.Do(func() { close(answer) })
	select {
	case lr := <-late:
		if lr.OpID != opID || lr.TaskID != "t1" || lr.Reply.Message != "done late" {
			t.Fatalf("late answer %+v", lr)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the late answer was not handed on")
	}

	// Cancelled: the agent is told, and stops.
	answer = make(chan struct{})
	defer close(answer)
	cctx, stop := context.WithCancelCause(context.Background())
	type out struct {
		rep model.AgentReply
		err error
	}
	res := make(chan out, 1)
	go func() {
		rep, err := dispatchAsync(t, d, cctx, h1, model.AgentRequest{TaskID: "t2", OpID: model.OpID("t2", h1, "ns:p"), Op: model.OpStart, Process: p})
		res <- out{rep, err}
	}()
	// Sent, and running on the host: waited for, not given a time a
	// loaded machine can miss.
	for id := ""; id != "t2"; {
		select {
		case id = <-running:
		case <-time.After(15 * time.Second):
			t.Fatal("the request never reached the host")
		}
	}
	stop(model.ErrCancelled)
	select {
	case o := <-res:
		if o.err != nil || !o.rep.Cancelled || o.rep.Message != "stopped" {
			t.Fatalf("cancelled: %+v, %v; want the host's answer that it stopped", o.rep, o.err)
		}
	case <-time.After(2 * CancelGrace):
		t.Fatal("the cancelled request did not end")
	}
}
