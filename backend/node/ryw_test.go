package node_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/node"
	"gseproc/backend/node/nodetest"
	"gseproc/model"
)

// apiReply is the envelope every native API call answers.
type apiReply struct {
	HTTP    int             `json:"-"`
	Result  bool            `json:"result"`
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// apiCall makes one API call, asked again as a client does while the
// answer is a 503 that says the store is unavailable (data.kind
// "unavailable": the server fails fast, within its bound, while a stream
// elects a leader or a quorum is slow on a loaded machine; seen at load
// 30-58 as "JetStream did not answer"), for up to storeRetryFor. Any other
// answer is returned as it is: a read that answers, answers what it
// finds (a not-found is never asked again). The calls asked again here are
// safe to repeat: reads, a definition saved whole, a status operation.
func apiCall(t *testing.T, method, url string, body any) apiReply {
	t.Helper()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(storeRetryFor)
	for wait := 250 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		r := apiCallOnce(t, method, url, raw)
		if r.HTTP != http.StatusServiceUnavailable || !storeUnavailable(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: still 503 after %s: %s", method, url, storeRetryFor, r.Message)
		}
		t.Logf("%s %s: %s (asked again)", method, url, r.Message)
		time.Sleep(wait)
	}
}

// storeRetryFor is how long apiCall asks again while the store is
// unavailable.
const storeRetryFor = time.Minute

// storeUnavailable says r is the server's "the store is unavailable"
// refusal (data.kind "unavailable").
func storeUnavailable(r apiReply) bool {
	var d struct {
		Kind string `json:"kind"`
	}
	return json.Unmarshal(r.Data, &d) == nil && d.Kind == "unavailable"
}

func apiCallOnce(t *testing.T, method, url string, body []byte) apiReply {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := apiReply{HTTP: resp.StatusCode}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s %s: HTTP %d, not an envelope: %.300s", method, url, resp.StatusCode, raw)
	}
	return r
}

func decodeData(t *testing.T, what string, r apiReply, v any) {
	t.Helper()
	if !r.Result || r.HTTP != http.StatusOK {
		t.Fatalf("%s: HTTP %d code %d: %s", what, r.HTTP, r.Code, r.Message)
	}
	if err := json.Unmarshal(r.Data, v); err != nil {
		t.Fatalf("%s: %v: %.300s", what, err, r.Data)
	}
}

// errStoreUnavailable marks a stream refused with a 503 that says the
// store is unavailable (see apiCall): asked again.
var errStoreUnavailable = errors.New("the store is unavailable")

// streamTask reads a task's result stream (SSE) to its end: the results
// and the task the end event carries.
func streamTask(ctx context.Context, url string) ([]model.Result, model.Task, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, model.Task{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, model.Task{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		r := apiReply{HTTP: resp.StatusCode}
		if resp.StatusCode == http.StatusServiceUnavailable && json.Unmarshal(raw, &r) == nil && storeUnavailable(r) {
			return nil, model.Task{}, fmt.Errorf("HTTP %d: %.300s: %w", resp.StatusCode, raw, errStoreUnavailable)
		}
		return nil, model.Task{}, fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, raw)
	}
	var rs []model.Result
	var event string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data := []byte(strings.TrimPrefix(line, "data: "))
			switch event {
			case "result":
				var r model.Result
				if err := json.Unmarshal(data, &r); err != nil {
					return rs, model.Task{}, fmt.Errorf("result event: %w", err)
				}
				rs = append(rs, r)
			case "end":
				var tk model.Task
				if err := json.Unmarshal(data, &tk); err != nil {
					return rs, model.Task{}, fmt.Errorf("end event: %w", err)
				}
				return rs, tk, nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return rs, model.Task{}, err
	}
	return rs, model.Task{}, fmt.Errorf("stream ended without its end event after %d results", len(rs))
}

// TestReadYourWritesAcrossServers: two gseproc servers (API, engine,
// store) on different nodes of a 3-node NATS cluster, state in 3
// replicas, driven over HTTP. Each round writes through A (a definition,
// then an operation on it) and at once reads through B: the definition
// as just written (not the previous round's), the task (never "not
// found"), the task listing (holding it), the live result stream (every
// result, then the end) and, once the stream ended, the task's results
// as A reports them. A write acknowledged by one server is visible
// through the other at once, however the replicas B's node reads from
// lag.
func TestReadYourWritesAcrossServers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node NATS cluster and two servers")
	}
	nodes := natsCluster(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	simCfg := config.SimulatorConfig{Hosts: 6, Seed: 3, Clouds: 1, Namespaces: []string{"web"},
		LatencyMedian: config.Duration(20 * time.Millisecond), LatencyP99: config.Duration(60 * time.Millisecond)}
	fleet := serveSimFleet(t, nodes[2].ClientURL(), simCfg)

	serve := func(i int) string {
		t.Helper()
		cfg := config.Default()
		cfg.NATS.URLs = []string{nodes[i].ClientURL()}
		cfg.NATS.User, cfg.NATS.Password = "server", "spw"
		cfg.NATS.Replicas = 3
		cfg.Server.Fleet = "nats"
		cfg.Server.NativeAuth = false
		n, err := node.StartServer(ctx, cfg, false, "test", nil)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		sctx, stop := context.WithCancel(ctx)
		served := make(chan error, 1)
		serving := make(chan struct{})
		go func() { served <- n.ServeAPI(sctx, ln, cfg.Server, func(net.Addr) { close(serving) }) }()
		t.Cleanup(func() { stop(); <-served; _ = n.Close() })
		select {
		case <-serving:
		case err := <-served:
			t.Fatalf("server %d stopped before serving: %v (%v)", i, err, n.Err())
		case <-time.After(90 * time.Second):
			t.Fatalf("server %d not serving within 90s", i)
		}
		return "http://" + ln.Addr().String()
	}
	a, b := serve(0), serve(1)

	def := fleet.Definitions()[0]
	for _, base := range []string{a, b} {
		nodetest.WaitFor(t, "the fleet online at "+base, 30*time.Second, func() bool {
			var hs []model.HostInfo
			r := apiCall(t, http.MethodGet, base+"/api/v1/hosts", nil)
			if !r.Result || json.Unmarshal(r.Data, &hs) != nil || len(hs) < len(def.Hosts) {
				return false
			}
			for _, h := range hs {
				if h.State != model.AgentOnline {
					return false
				}
			}
			return true
		})
	}

	const rounds = 10
	deadline := time.Now().Add(3 * time.Minute)
	for round := range rounds {
		if time.Now().After(deadline) {
			t.Fatalf("only %d rounds of %d within the deadline", round, rounds)
		}
		// A definition written through A ...
		d := def
		d.Process.Meta.Labels = model.Labels{"round": strconv.Itoa(round)}
		d.Rev = 0
		r := apiCall(t, http.MethodPost, a+"/api/v1/processes", d)
		if !r.Result {
			t.Fatalf("round %d: save through A: %s", round, r.Message)
		}
		// ... is read through B as written.
		var defs []model.ProcessDef
		decodeData(t, "definitions at B", apiCall(t, http.MethodGet, b+"/api/v1/processes?namespace="+d.Process.Meta.Namespace+"&name="+d.Process.Meta.Name, nil), &defs)
		if len(defs) != 1 || defs[0].Process.Meta.Labels["round"] != strconv.Itoa(round) {
			t.Fatalf("round %d: B lists %+v, not the definition A just wrote", round, defs)
		}

		// An operation started through A ...
		var task model.Task
		decodeData(t, "operate at A", apiCall(t, http.MethodPost, a+"/api/v1/operate", map[string]any{
			"op_type": int(model.OpStatus), "selector": map[string]any{"namespace": d.Process.Meta.Namespace, "name": d.Process.Meta.Name}}), &task)
		if task.ID == "" || task.Targets != len(d.Hosts) {
			t.Fatalf("round %d: operate at A: %+v", round, task)
		}
		// ... is found through B at once: the task, in the listing, and
		// its result stream, which ends with every result.
		type streamed struct {
			rs  []model.Result
			end model.Task
			err error
		}
		sc, stopStream := context.WithTimeout(ctx, 60*time.Second)
		streamDone := make(chan streamed, 1)
		go func() {
			// Opened again, as apiCall asks again, while refused because
			// the store is unavailable (until sc ends).
			for wait := 250 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
				rs, end, err := streamTask(sc, b+"/api/v1/tasks/"+task.ID+"/stream")
				if !errors.Is(err, errStoreUnavailable) || sc.Err() != nil {
					streamDone <- streamed{rs, end, err}
					return
				}
				select {
				case <-sc.Done():
				case <-time.After(wait):
				}
			}
		}()
		var view backend.TaskView
		decodeData(t, fmt.Sprintf("round %d: task %s at B", round, task.ID), apiCall(t, http.MethodGet, b+"/api/v1/tasks/"+task.ID, nil), &view)
		if view.Task.ID != task.ID || len(view.Results) != task.Targets {
			t.Fatalf("round %d: B's task %+v with %d results, want %d targets", round, view.Task, len(view.Results), task.Targets)
		}
		var listed []model.Task
		decodeData(t, "tasks at B", apiCall(t, http.MethodGet, b+"/api/v1/tasks?limit=5", nil), &listed)
		if len(listed) == 0 || listed[0].ID != task.ID {
			t.Fatalf("round %d: B's task listing does not begin with %s: %+v", round, task.ID, listed)
		}
		s := <-streamDone
		stopStream()
		if s.err != nil {
			t.Fatalf("round %d: B's stream of %s: %v", round, task.ID, s.err)
		}
		if len(s.rs) != task.Targets || !s.end.Status.Final() {
			t.Fatalf("round %d: B's stream of %s: %d results of %d, end %+v", round, task.ID, len(s.rs), task.Targets, s.end)
		}

		// Once B's stream ended (the task stored complete), B's results
		// are A's, and B lists the task finished.
		var atA, atB backend.TaskView
		decodeData(t, "task at A", apiCall(t, http.MethodGet, a+"/api/v1/tasks/"+task.ID, nil), &atA)
		decodeData(t, "task at B", apiCall(t, http.MethodGet, b+"/api/v1/tasks/"+task.ID, nil), &atB)
		if atB.Task.Status != atA.Task.Status || !atB.Task.Status.Final() || len(atB.Results) != len(atA.Results) {
			t.Fatalf("round %d: task %s at B %s (%d results), at A %s (%d)", round, task.ID, atB.Task.Status, len(atB.Results), atA.Task.Status, len(atA.Results))
		}
		for i := range atA.Results {
			x, y := atA.Results[i], atB.Results[i]
			if x.Host != y.Host || x.ProcKey != y.ProcKey || x.State != y.State || x.Seq != y.Seq || x.Code != y.Code {
				t.Fatalf("round %d: result %d at B %+v, at A %+v", round, i, y, x)
			}
		}
		decodeData(t, "tasks at B", apiCall(t, http.MethodGet, b+"/api/v1/tasks?limit=5", nil), &listed)
		if len(listed) == 0 || listed[0].ID != task.ID || listed[0].Status != atA.Task.Status {
			t.Fatalf("round %d: B lists %+v, want %s %s first", round, listed, task.ID, atA.Task.Status)
		}
	}
}
