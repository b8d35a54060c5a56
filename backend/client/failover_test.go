package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/client"
	"gseproc/backend/engine"
	"gseproc/backend/health"
	"gseproc/backend/server"
	"gseproc/backend/transport/transporttest"
	"gseproc/model"
)

// twoServers serves one engine (one cluster's shared state) through two
// real servers, A and B; A is ready while aReady is true. A cuts every
// task stream after cut results (0: never).
func twoServers(t *testing.T, hosts, cut int, aReady *atomic.Bool) (a, b *httptest.Server, eng *engine.Engine) {
	t.Helper()
	eng, _ = startEngine(t, quietDemo(hosts))
	cfg := consoleConfig()
	readiness := func() health.Status {
		now := time.Now()
		if aReady.Load() {
			return health.Status{State: health.StateReady, Ready: true, Checked: now, Since: now}
		}
		return health.Status{State: health.StateNoQuorum, Reason: "JetStream has no quorum: waiting for 2 of 3 nodes (1 up)", Checked: now, Since: now}
	}
	for i, opts := range [][]server.Option{{server.WithReadiness(readiness), server.WithStreamCut(cut)}, nil} {
		srv := server.New(eng, cfg, nil, opts...)
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(func() { hs.CloseClientConnections(); hs.Close(); _ = srv.Close() })
		if i == 0 {
			a = hs
		} else {
			b = hs
		}
	}
	return a, b, eng
}

// deadURL is an address nothing listens on: a port free a moment ago
// below the kernel's ephemeral range (transporttest.ReservePorts), where
// no other test's port-0 listener or outgoing connection can be given it.
func deadURL(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("http://127.0.0.1:%d", transporttest.ReservePorts(t, 1)[0])
}

func clusterClient(t *testing.T, urls ...string) *client.Client {
	c := client.NewCluster(urls, client.WithCredentials("console", "s3cret", "tester"),
		client.WithReconnect(5*time.Millisecond, 50*time.Millisecond, 20))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestFailover: with a dead server and a server that is not ready listed
// first, reads and changes go to the server that can take them, which then
// stays the one asked first; when every server refuses, the error is the
// last one's reason.
func TestFailover(t *testing.T) {
	var aReady atomic.Bool
	a, b, _ := twoServers(t, 30, 0, &aReady)
	c := clusterClient(t, deadURL(t), a.URL, b.URL)
	ctx := context.Background()
	if _, err := c.Tasks(ctx, 10); err != nil {
		t.Fatalf("read with a dead and an unready server first: %v", err)
	}
	if c.Server() != b.URL {
		t.Fatalf("talking to %s, want %s", c.Server(), b.URL)
	}
	task, err := c.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "gse"}})
	if err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, collect(t, mustWatch(t, c, task.ID)), 0, task.Targets)

	// A change fails over past a dead server and a refusal (neither did
	// anything).
	c2 := clusterClient(t, deadURL(t), a.URL, b.URL)
	if _, err := c2.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "gse"}}); err != nil {
		t.Fatalf("change past a dead and an unready server: %v", err)
	}

	// Only unready servers: the reason, as a 503.
	c3 := clusterClient(t, deadURL(t), a.URL)
	_, err = c3.Tasks(ctx, 10)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || !strings.Contains(ae.Message, "waiting for 2 of 3 nodes") {
		t.Fatalf("every server unready: %v", err)
	}
}

// TestChangeNotRepeated: a change that reached a server which died before
// answering is not sent to the next server (it may have been carried
// out); a read is.
func TestChangeNotRepeated(t *testing.T) {
	var aReady atomic.Bool
	_, b, eng := twoServers(t, 30, 0, &aReady)
	// A server that takes the request and dies without a reply.
	var got atomic.Int32
	dying := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer dying.Close()
	c := clusterClient(t, dying.URL, b.URL)
	ctx := context.Background()
	before, err := eng.Tasks(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "gse"}}); err == nil {
		t.Fatal("an operation whose server died before answering reported success")
	}
	if after, _ := eng.Tasks(ctx, 100); len(after) != len(before) {
		t.Fatalf("the operation was sent again to the next server: %d tasks, were %d", len(after), len(before))
	}
	// Setting a process group is a change too: it is not sent on.
	if _, err := c.SetProcessGroups(ctx, backend.GroupRequest{Namespace: "gse", Hosts: []model.Host{{IP: "10.0.0.1"}},
		Resource: model.GroupResource{CPUPoolLimit: 30}}); err == nil {
		t.Fatal("a process group set whose server died before answering reported success")
	}
	if es, err := eng.Audit(ctx, model.AuditQuery{Action: model.AuditSetGroup}); err != nil || len(es) != 0 {
		t.Fatalf("the process group set was sent again to the next server: %+v %v", es, err)
	}
	if _, err := c.Tasks(ctx, 10); err != nil {
		t.Fatalf("a read is tried on the next server: %v", err)
	}
	if got.Load() < 3 {
		t.Fatalf("the dying server saw %d requests, want the two changes and the read", got.Load())
	}

	// A 503 that is not "not ready" (a store call timed out after the
	// task may have been stored): the change is not sent again either.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"result":false,"code":1306201,"message":"operate: context deadline exceeded","data":null}`))
	}))
	defer slow.Close()
	c2 := clusterClient(t, slow.URL, b.URL)
	_, err = c2.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "gse"}})
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("an operation answered by a timed-out store: %v", err)
	}
	if after, _ := eng.Tasks(ctx, 100); len(after) != len(before) {
		t.Fatalf("the operation was sent again after a 503 that was not a readiness refusal: %d tasks, were %d", len(after), len(before))
	}
}

// TestWatchResumesOnAnotherServer: a task stream on server A is cut while
// A is no longer ready; the client resumes it on B where it left off: every
// result exactly once, in order.
func TestWatchResumesOnAnotherServer(t *testing.T) {
	var aReady atomic.Bool
	aReady.Store(true)
	a, b, _ := twoServers(t, 150, 4, &aReady)
	c := clusterClient(t, a.URL, b.URL)
	ctx := context.Background()
	task, err := c.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	if task.Targets < 10 {
		t.Fatalf("only %d targets; want more than the cut", task.Targets)
	}
	ch := mustWatch(t, c, task.ID)
	aReady.Store(false) // the stream open on A goes on until A cuts it
	checkSeqs(t, collect(t, ch), 0, task.Targets)
	if c.Server() != b.URL {
		t.Fatalf("the stream ended on %s, want %s", c.Server(), b.URL)
	}
}

func mustWatch(t *testing.T, c *client.Client, id string) <-chan model.Result {
	t.Helper()
	ch, err := c.Watch(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}
