package transport

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"gseproc/backend/config"
	"gseproc/model"
)

// userNKey makes a user nkey: its public key and a seed file.
func userNKey(t *testing.T) (pub, seedFile string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ = kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile = filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return pub, seedFile
}

// asyncErrs collects a connection's asynchronous errors (NATS permission
// violations among them).
type asyncErrs struct {
	mu   sync.Mutex
	errs []string
}

func (a *asyncErrs) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	a.mu.Lock()
	a.errs = append(a.errs, err.Error())
	a.mu.Unlock()
}

// refusedFor reports whether NATS refused an operation on subject.
func (a *asyncErrs) refusedFor(op, subject string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.errs {
		if strings.Contains(strings.ToLower(e), "permissions violation for "+op) && strings.Contains(e, `"`+subject+`"`) {
			return true
		}
	}
	return false
}

// TestForgingAgent: a client holding the agent credential of host A tries
// everything to act as host B. NATS refuses it to read B's ops, to publish
// on B's heartbeat, event and reply subjects or on any inbox; what it may
// publish on its own subjects naming B (heartbeat, event, and a reply to
// B's request whose id leaked) is ignored by the server. The real B's
// answer is the one recorded.
func TestForgingAgent(t *testing.T) {
	hostA, hostB := model.Host{IP: "10.0.0.1"}, model.Host{IP: "10.0.0.2"}
	pubA, seedA := userNKey(t)
	pubB, seedB := userNKey(t)
	cfg := testNATS(t)
	cfg.Users = []config.NATSUser{
		{NKey: pubA, Host: hostA.AgentID()},
		{NKey: pubB, Host: hostB.AgentID()},
		{User: "spy", Password: "spypw", Role: config.NATSRoleServer},
	}
	e := startServer(t, cfg, false)
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	var evMu sync.Mutex
	var events []model.Event
	ectx, ecancel := context.WithCancel(context.Background())
	defer ecancel()
	subscribeStored(ectx, d, func(ev model.Event) {
		evMu.Lock()
		events = append(events, ev)
		evMu.Unlock()
	})

	// The real B answers after a pause, so a forged answer would come first.
	realB := echoAgent(hostB)
	realB.handle = func(_ context.Context, req model.AgentRequest) model.AgentReply {
		time.Sleep(300 * time.Millisecond)
		return model.AgentReply{Code: model.CodeSuccess, Message: "real B: " + req.TaskID}
	}
	runAgent(t, e.ClientURL(), ClientOptions{NKeySeedFile: seedB}, realB, ServeOptions{HeartbeatInterval: 50 * time.Millisecond})
	eventually(t, "B online", 15*time.Second, func() bool { return hostState(d, hostB) == model.AgentOnline })

	// The forger: A's credential.
	var ae asyncErrs
	nkOpt, err := nats.NkeyOptionFromSeed(seedA)
	if err != nil {
		t.Fatal(err)
	}
	forger, err := nats.Connect(e.ClientURL(), nkOpt, nats.ErrorHandler(ae.handler))
	if err != nil {
		t.Fatal(err)
	}
	defer forger.Close()

	// 1. Read B's ops (and every op, and everything).
	var stolenN int
	var stolenMu sync.Mutex
	for _, subj := range []string{OpSubject(mustID(t, hostB)), InboxSubject(mustID(t, hostB)), "gseproc.agent.*.*.op", "gseproc.agent.*.*.>", ">"} {
		if _, err := forger.Subscribe(subj, func(*nats.Msg) { stolenMu.Lock(); stolenN++; stolenMu.Unlock() }); err != nil {
			t.Fatal(err)
		}
		eventually(t, "subscription to "+subj+" refused", 15*time.Second, func() bool { return ae.refusedFor("subscription", subj) })
	}

	// Its own host's inbox it may hold (an agent's one subscription), but
	// NATS delivers it nothing of what hosts publish there: not the
	// heartbeats, events and replies the forger itself sends below (this
	// connection echoes), as when it could subscribe to the op, cancel
	// and evack subjects only.
	var ownN int
	if _, err := forger.Subscribe(InboxSubject(mustID(t, hostA)), func(m *nats.Msg) {
		stolenMu.Lock()
		ownN++
		stolenMu.Unlock()
		t.Logf("delivered on A's inbox: %s", m.Subject)
	}); err != nil {
		t.Fatal(err)
	}
	if err := forger.Flush(); err != nil {
		t.Fatal(err)
	}

	// A spy with full permissions learns the reply subject of B's next
	// request, as if its id had leaked to the forger.
	spy, err := ConnectNow(ClientOptions{URLs: e.ClientURL(), User: "spy", Password: "spypw"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Close()
	leaked := make(chan string, 1)
	if _, err := spy.Subscribe(OpSubject(mustID(t, hostB)), func(m *nats.Msg) {
		select {
		case leaked <- m.Reply:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}

	// 2. Answer for B while the real B takes its time.
	forged, _ := json.Marshal(model.AgentReply{Code: model.CodeSuccess, Message: "forged"})
	type result struct {
		rep model.AgentReply
		err error
	}
	res := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		rep, err := d.Dispatch(ctx, hostB, model.AgentRequest{Op: model.OpStatus, TaskID: "T1"})
		res <- result{rep, err}
	}()
	var reply string
	select {
	case reply = <-leaked:
	case <-time.After(15 * time.Second):
		t.Fatal("spy saw no request to B")
	}
	_, id, err := replyFromSubject(reply)
	if err != nil {
		t.Fatalf("reply subject of B's request: %v", err)
	}
	// On B's reply subject, and on any inbox: refused by NATS.
	for _, subj := range []string{reply, ReplySubject(mustID(t, hostB), "guess"), "_INBOX.x.y"} {
		if err := forger.Publish(subj, forged); err != nil {
			t.Fatal(err)
		}
		eventually(t, "publish to "+subj+" refused", 15*time.Second, func() bool { return ae.refusedFor("publish", subj) })
	}
	// On its own reply subject with B's leaked id: allowed by NATS, ignored
	// by the dispatcher, which addressed B.
	if err := forger.Publish(ReplySubject(mustID(t, hostA), id), forged); err != nil {
		t.Fatal(err)
	}
	_ = forger.Flush()
	r := <-res
	if r.err != nil || r.rep.Message != "real B: T1" {
		t.Fatalf("B's recorded answer: %+v %v, want the real B's", r.rep, r.err)
	}

	// 3. B's heartbeat and events: on B's subjects refused; on A's own,
	// naming B, dropped by the server.
	fakeHB, _ := json.Marshal(Heartbeat{Info: model.HostInfo{Host: hostB, Labels: map[string]string{"forged": "yes"}}, Time: time.Now(), Leaving: true})
	fakeEv, _ := json.Marshal(model.Event{Time: time.Now(), Host: hostB, ProcKey: "x:forged", Kind: model.EventLimitExceeded})
	for _, subj := range []string{HeartbeatSubject(mustID(t, hostB)), EventSubject(mustID(t, hostB))} {
		data := fakeHB
		if strings.HasSuffix(subj, ".event") {
			data = fakeEv
		}
		if err := forger.Publish(subj, data); err != nil {
			t.Fatal(err)
		}
		eventually(t, "publish to "+subj+" refused", 15*time.Second, func() bool { return ae.refusedFor("publish", subj) })
	}
	_ = forger.Publish(HeartbeatSubject(mustID(t, hostA)), fakeHB)
	_ = forger.Publish(EventSubject(mustID(t, hostA)), fakeEv)
	_ = forger.Flush()
	// A marker event from the real B, after the forgeries: the flush above
	// means NATS has passed them to the dispatcher's connection already, so
	// once the marker is seen the forgeries have been handled.
	realB.emit(model.Event{Time: time.Now(), Host: hostB, ProcKey: "x:real", Kind: model.EventLimitExceeded})
	eventually(t, "B's real event", 15*time.Second, func() bool {
		evMu.Lock()
		defer evMu.Unlock()
		for _, ev := range events {
			if ev.ProcKey == "x:real" {
				return true
			}
		}
		return false
	})
	evMu.Lock()
	for _, ev := range events {
		if ev.ProcKey == "x:forged" || ev.Kind == model.EventAgentOffline {
			t.Errorf("forged event accepted: %+v", ev)
		}
	}
	evMu.Unlock()
	hs, _ := d.Hosts(context.Background())
	for _, hi := range hs {
		if sameHost(hi.Host, mustID(t, hostB)) && (hi.State != model.AgentOnline || hi.Labels["forged"] != "") {
			t.Errorf("B after the forged heartbeat: %+v", hi)
		}
		if sameHost(hi.Host, mustID(t, hostA)) {
			t.Errorf("the forger's heartbeats made A known: %+v", hi)
		}
	}
	stolenMu.Lock()
	defer stolenMu.Unlock()
	if stolenN != 0 || ownN != 0 {
		t.Fatalf("the forger read %d messages, %d of what hosts publish on its own subjects", stolenN, ownN)
	}
	if ae.refusedFor("subscription", InboxSubject(mustID(t, hostA))) {
		t.Fatal("the forger's own inbox refused")
	}
}
