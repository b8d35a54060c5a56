package node_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"gseproc/backend/health"
	"gseproc/backend/node"
	"gseproc/backend/node/nodetest"
	"gseproc/backend/server"
	"gseproc/backend/transport"
	"gseproc/model"
)

// TestNATSConnectionsComeBack: the server (embedded NATS, JetStream store,
// HTTP API) and a real `gseproc agent` keep working, without a restart,
// after the NATS server closes the server's own connection for good
// (a control line over 4 KB: "maximum control line exceeded", the way a
// 4,200-character host zone bricked the server in issue 9) and after it
// cuts the agent's connection: the API answers again, the store reads and
// writes, and an op reaches the real agent.
func TestNATSConnectionsComeBack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and an agent")
	}
	cfg := nodetest.NATSConfig(t.TempDir())
	node.ApplyDemo(&cfg)
	logs := &nodetest.SyncBuf{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	ctx := context.Background()
	e, nb, closeEngine, err := node.OpenNATSEngine(ctx, cfg, true, false, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closeEngine() }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := health.Start(health.Options{Link: nb.Link, Node: nb.Embedded.Server(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sctx, stopServer := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- server.New(e, cfg.Server, log, server.WithReadiness(p.Status)).Serve(sctx, ln) }()
	defer func() { stopServer(); <-served }()
	base := "http://" + ln.Addr().String()

	const ip = "127.0.0.31"
	me := model.Host{IP: ip}
	nodetest.StartAgent(t, nodetest.AgentConfig(nb.ClientURL, 0, ip, filepath.Join(t.TempDir(), "agent")))

	call := func(method, path string, body []byte) nodetest.Envelope {
		t.Helper()
		return nodetest.CallJSON(t, method, base+path, body)
	}
	nodetest.WaitFor(t, "agent online", 30*time.Second, func() bool {
		r := call(http.MethodGet, "/api/v1/hosts?host=0:"+ip, nil)
		return r.Result && strings.Contains(string(r.Data), `"agent_state":"online"`)
	})
	// A definition for the agent (stored in JetStream), and a status op on
	// it through the API, run to its end: the result of the real agent.
	def := func(name string) []byte {
		b, _ := json.Marshal(map[string]any{"process": map[string]any{
			"meta": map[string]any{"namespace": "relink", "name": name},
			"spec": map[string]any{
				"identity":       map[string]any{"proc_name": name, "setup_path": "/tmp", "pid_path": "/tmp/" + name + ".pid"},
				"control":        map[string]any{"start_cmd": "true"},
				"monitor_policy": map[string]any{"auto_type": 2},
			}}, "hosts": []any{map[string]any{"ip": ip, "bk_cloud_id": 0}}})
		return b
	}
	// status answers nil while the API or the op fails (the connection is
	// being replaced), and the agent's result once one comes back.
	status := func(name string) *model.Result {
		r := call(http.MethodPost, "/api/v1/operate", []byte(`{"op_type": 2, "selector": {"namespace": "relink", "name": "`+name+`"}}`))
		if !r.Result {
			t.Logf("operate: %s", r.Message)
			return nil
		}
		var task model.Task
		if err := json.Unmarshal(r.Data, &task); err != nil {
			t.Fatal(err)
		}
		var view struct {
			Task    model.Task     `json:"task"`
			Results []model.Result `json:"results"`
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			r := call(http.MethodGet, "/api/v1/tasks/"+task.ID, nil)
			if r.Result && json.Unmarshal(r.Data, &view) == nil && view.Task.Status.Final() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s did not end", task.ID)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if len(view.Results) != 1 || view.Results[0].Host != me {
			t.Fatalf("results %+v", view.Results)
		}
		res := view.Results[0]
		if res.Code != model.CodeSuccess {
			t.Logf("status on the agent: %d %s", res.Code, res.Message)
			return nil
		}
		return &res
	}
	if r := call(http.MethodPost, "/api/v1/processes", def("before")); !r.Result {
		t.Fatalf("save: %s", r.Message)
	}
	if status("before") == nil {
		t.Fatal("status before any close failed")
	}

	// 1. The NATS server closes the server's own connection for good.
	old := nb.Link.Conn()
	if err := old.Publish(strings.Repeat("x", 5000), nil); err != nil {
		t.Fatal(err)
	}
	nodetest.WaitFor(t, "server connection closed by NATS", 15*time.Second, old.IsClosed)
	if err := old.LastError(); err == nil || !strings.Contains(strings.ToLower(err.Error()), "maximum control line") {
		t.Fatalf("closed with %v", err)
	}
	nodetest.WaitFor(t, "the link in use again", 60*time.Second, func() bool {
		st := nb.Link.Status()
		return st.Redials == 1 && st.State == transport.LinkConnected
	})
	// Readiness says so: ready again, one connection replaced, and why.
	var ready health.Status
	nodetest.WaitFor(t, "ready again", 60*time.Second, func() bool {
		r := call(http.MethodGet, "/readyz", nil)
		return r.Result && json.Unmarshal(r.Data, &ready) == nil && ready.Ready && ready.Link.Redials == 1
	})
	if !strings.Contains(strings.ToLower(ready.Link.LastClosed), "maximum control line") {
		t.Fatalf("readiness after the redial: %+v", ready.Link)
	}
	// Writes and reads of the store, and an op to the real agent, through
	// the API of the same process.
	nodetest.WaitFor(t, "a definition saved after the close", 60*time.Second, func() bool {
		return call(http.MethodPost, "/api/v1/processes", def("after")).Result
	})
	var res *model.Result
	nodetest.WaitFor(t, "an op on the real agent after the close", 60*time.Second, func() bool {
		res = status("after")
		return res != nil
	})
	r := call(http.MethodGet, "/api/v1/processes?namespace=relink", nil)
	if !r.Result || !strings.Contains(string(r.Data), `"before"`) || !strings.Contains(string(r.Data), `"after"`) {
		t.Fatalf("processes after the close: %s %.500s", r.Message, r.Data)
	}
	if !strings.Contains(logs.String(), "closed for good") || !strings.Contains(logs.String(), "new connection in use") {
		t.Errorf("log does not say the connection was replaced:\n%s", logs.String())
	}

	// 2. The NATS server cuts the agent's connection (as at a restart or
	// a slow consumer): the agent comes back and answers.
	ns := nb.Embedded.Server()
	cz, err := ns.Connz(&natsserver.ConnzOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kicked := false
	for _, c := range cz.Conns {
		if strings.HasPrefix(c.Name, "gseproc-agent 0:"+ip) {
			if err := ns.DisconnectClientByID(c.Cid); err != nil {
				t.Fatal(err)
			}
			kicked = true
		}
	}
	if !kicked {
		t.Fatal("the agent's connection was not found")
	}
	nodetest.WaitFor(t, "an op on the real agent after its connection was cut", 60*time.Second, func() bool {
		return status("before") != nil
	})
}
