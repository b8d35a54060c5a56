package transport

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"gseproc/model"
)

// holdLog is a slog handler that holds the goroutine logging a record
// whose message starts with hold (once) until release is closed, after
// telling held; every other record's message goes to seen.
type holdLog struct {
	hold          string
	held, release chan struct{}
	seen          chan string
}

func (h *holdLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *holdLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *holdLog) WithGroup(string) slog.Handler            { return h }
func (h *holdLog) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.hold) {
		close(h.held)
		<-h.release
		return nil
	}
	select {
	case h.seen <- r.Message:
	default: // nobody waits for it
	}
	return nil
}

// An op NATS is delivering while the agent stops (its message taken from
// the subscription before the unsubscribe, its callback not yet through)
// is not run once ServeAgent has waited for the ops in flight: before,
// it was added to the ops' WaitGroup after (or while) ServeAgent waited
// on it, so it ran after ServeAgent had returned (and the race detector
// saw Add race with Wait: TestDispatchAsyncRaces under a loaded make
// test). The callback is held here in the log line of a cancel sent as
// a request (the one point of onOp before the op is handed on).
func TestOpDeliveredWhileStoppingNotRunAfterServeReturns(t *testing.T) {
	t.Parallel()
	e := startServer(t, testNATS(t), true)
	started, releaseHeld := make(chan struct{}), make(chan struct{})
	lateRan := make(chan struct{}, 1)
	a := &fakeAgent{info: model.HostInfo{Host: h1}, handle: func(ctx context.Context, req model.AgentRequest) model.AgentReply {
		switch req.TaskID {
		case "held": // in flight when the agent stops: ServeAgent waits for it
			close(started)
			<-releaseHeld
		case "late":
			lateRan <- struct{}{}
		}
		return model.AgentReply{Code: model.CodeSuccess}
	}}
	lg := &holdLog{hold: "agent: op cancelled by a server that took its task over",
		held: make(chan struct{}), release: make(chan struct{}), seen: make(chan string, 64)}
	nc, err := Connect(ClientOptions{URLs: e.ClientURL(), MaxReconnectDelay: 300 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() {
		served <- ServeAgent(ctx, nc, a, ServeOptions{HeartbeatInterval: time.Minute, Logger: slog.New(lg)})
	}()
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	eventually(t, "agent online", 30*time.Second, func() bool { return d.Online(h1) })

	snc := serverConn(t, e)
	subj := OpSubject(mustID(t, h1))
	send := func(req model.AgentRequest) {
		t.Helper()
		data, err := json.Marshal(req)
		if err == nil {
			err = snc.PublishRequest(subj, strings.TrimSuffix(subj, ".op")+".reply."+req.TaskID, data)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	p := model.Process{Meta: model.Meta{Namespace: "ns", Name: "p"}}
	send(model.AgentRequest{TaskID: "held", OpID: "held-op", Op: model.OpStart, Process: p})
	<-started
	send(model.AgentRequest{TaskID: "late", OpID: "late-op", Op: model.OpStart, Process: p, CancelOp: true})
	<-lg.held // the late op is in NATS's callback, not handed on yet

	stop()
	close(releaseHeld)
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("ServeAgent: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ServeAgent did not return with its op's callback held")
	}
	close(lg.release)
	for {
		select {
		case <-lateRan:
			t.Fatal("an op delivered while the agent stopped ran after ServeAgent returned")
		case msg := <-lg.seen:
			if strings.HasPrefix(msg, "agent: op not run") {
				return
			}
		case <-time.After(time.Minute):
			t.Fatal("the late op was neither run nor refused")
		}
	}
}
