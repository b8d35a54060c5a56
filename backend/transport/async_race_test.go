package transport

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gseproc/model"
)

// Async requests under every race at once: answers coming while their
// contexts end (deadlines of 0 to 4 ms, a third cancelled by the
// operator) and the connection "comes back" every millisecond (askAgain
// takes over those with an op id): each callback is called exactly once,
// and neither the reply table nor the context watches keep anything.
func TestDispatchAsyncRaces(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	var k atomic.Int64
	slow := &fakeAgent{info: model.HostInfo{Host: h1}, handle: func(ctx context.Context, req model.AgentRequest) model.AgentReply {
		select {
		case <-time.After(time.Duration(k.Add(1)%7) * time.Millisecond):
			return model.AgentReply{Code: 0, Message: "ok"}
		case <-ctx.Done():
			return model.AgentReply{Code: model.CodeCommandFailed, Message: "stopped", Cancelled: true}
		}
	}}
	runAgent(t, e.ClientURL(), ClientOptions{}, slow, ServeOptions{HeartbeatInterval: 50 * time.Millisecond})
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	eventually(t, "agent online", 15*time.Second, func() bool { return hostState(d, h1) == model.AgentOnline })
	p := model.Process{Meta: model.Meta{Namespace: "ns", Name: "p"}}
	const n = 3000
	calls := make([]atomic.Int32, n)
	var wg sync.WaitGroup
	wg.Add(n)
	stopAsk := make(chan struct{})
	var asking sync.WaitGroup
	asking.Add(1)
	defer func() { close(stopAsk); asking.Wait() }()
	go func() {
		defer asking.Done()
		for {
			select {
			case <-stopAsk:
				return
			case <-time.After(time.Millisecond):
				d.askAgain()
			}
		}
	}()
	for i := range n {
		ctx, cancel := context.WithCancelCause(context.Background())
		ctx, c2 := context.WithTimeout(ctx, time.Duration(i%5)*time.Millisecond+time.Microsecond)
		opID := ""
		if i%2 == 0 {
			opID = model.OpID("t"+strconv.Itoa(i), h1, "ns:p")
		}
		if i%3 == 0 {
			go cancel(model.ErrCancelled)
		}
		d.DispatchAsync(ctx, h1, model.AgentRequest{TaskID: "t", OpID: opID, Op: model.OpStatus, Process: p}, func(model.AgentReply, error) {
			if calls[i].Add(1) == 1 {
				wg.Done()
			}
			cancel(nil)
			c2()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		k := 0
		for i := range calls {
			if calls[i].Load() == 0 {
				k++
			}
		}
		t.Fatalf("%d never called", k)
	}
	eventually(t, "table empty", 20*time.Second, func() bool { return d.replies.len() == 0 })
	// Every context ended (its callback ended it): its watch goes with it.
	eventually(t, "no watches", 20*time.Second, func() bool {
		d.wmu.Lock()
		defer d.wmu.Unlock()
		return len(d.watches) == 0
	})
	// Nothing is left that could call again (no request in the table, no
	// context watched): a second call would have come by now, not after a
	// sleep a loaded machine could outlast.
	for i := range calls {
		if c := calls[i].Load(); c != 1 {
			t.Fatalf("%d: called %d times", i, c)
		}
	}
}
