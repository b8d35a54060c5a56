package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/health"
)

// TestReadiness: /healthz answers whatever the state, saying why it is
// not ready; /readyz and
// /metrics report the prober's findings; while not ready every API call
// is refused at once with 503 and the reason, and nothing is dispatched.
func TestReadiness(t *testing.T) {
	var cur atomic.Pointer[health.Status]
	set := func(s health.Status) { cur.Store(&s) }
	set(health.Status{State: health.StateNoQuorum, Reason: "JetStream has no quorum: waiting for 2 of 3 nodes (1 up)",
		Since: time.Now(), NATS: "connected", JetStream: health.JetStreamStatus{NodesUp: 1, NodesWant: 3}, LeasesHeld: 2, AgentsOnline: 5})
	e := newEnv(t, testConfig(), WithReadiness(func() health.Status { return *cur.Load() }))

	// Liveness answers 200 whatever the state, and says why not ready.
	if r := e.do(http.MethodGet, "/healthz", nil, nil); r.Status != 200 || !strings.Contains(string(r.Data), `"status":"ok"`) ||
		!strings.Contains(string(r.Data), `"state":"no_quorum"`) || !strings.Contains(string(r.Data), "waiting for 2 of 3 nodes") {
		t.Fatalf("healthz while not ready: %d %s", r.Status, r.raw)
	}
	r := e.do(http.MethodGet, "/readyz", nil, nil)
	if r.Status != http.StatusServiceUnavailable || !strings.Contains(r.Message, "waiting for 2 of 3 nodes") || !strings.Contains(string(r.Data), `"nodes_up":1`) {
		t.Fatalf("readyz without quorum: %d %s", r.Status, r.raw)
	}
	seed := readFile(t, "testdata/seed004_gse_operate_proc.request.json")
	if r := e.post("/api/c/compapi/v2/gse/operate_proc/", seed); r.Result || !strings.Contains(r.Message, "no_quorum") || !strings.Contains(r.Message, "2 of 3 nodes") {
		t.Fatalf("operate_proc without quorum: %s", r.raw)
	}
	if r := e.do(http.MethodGet, "/api/v1/tasks", nil, nil); r.Status != http.StatusServiceUnavailable || !strings.Contains(r.Message, "2 of 3 nodes") ||
		r.Header.Get(backend.NotReadyHeader) != health.StateNoQuorum {
		t.Fatalf("native API without quorum: %d %s %s %q", r.Status, r.raw, backend.NotReadyHeader, r.Header.Get(backend.NotReadyHeader))
	}
	if ts, _ := e.eng.Tasks(context.Background(), 0); len(ts) != 0 {
		t.Fatalf("%d tasks created while not ready", len(ts))
	}
	metrics := func() string {
		resp, err := http.Get(e.hs.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for _, want := range []string{"gseproc_ready 0\n", "gseproc_cluster_nodes_up 1\n", "gseproc_cluster_nodes 3\n", "gseproc_leases_held 2\n", "gseproc_agents_online 5\n"} {
		if m := metrics(); !strings.Contains(m, want) {
			t.Fatalf("/metrics lacks %q", want)
		}
	}

	// Peers back: ready, and the API serves again.
	set(health.Status{State: health.StateReady, Ready: true, Since: time.Now(), NATS: "connected", JetStream: health.JetStreamStatus{OK: true, NodesUp: 3, NodesWant: 3}})
	if r := e.do(http.MethodGet, "/readyz", nil, nil); r.Status != 200 || !strings.Contains(string(r.Data), `"state":"ready"`) {
		t.Fatalf("readyz when ready: %d %s", r.Status, r.raw)
	}
	if r := e.post("/api/c/compapi/v2/gse/operate_proc/", seed); !r.Result {
		t.Fatalf("operate_proc when ready: %s", r.raw)
	}
	if m := metrics(); !strings.Contains(m, "gseproc_ready 1\n") || !strings.Contains(m, "gseproc_store_streams_unavailable 0\n") {
		t.Fatal("/metrics does not say ready, with no stream unavailable")
	}

	// A stream electing its leader: still ready (the API serves; the calls
	// on that stream answer 503 themselves), and /healthz, /readyz and
	// /metrics name it.
	set(health.Status{State: health.StateReady, Ready: true, Since: time.Now(), NATS: "connected", JetStream: health.JetStreamStatus{OK: true, NodesUp: 2, NodesWant: 3},
		StreamsUnavailable: []string{"KV_gseproc_tasks"}, Degraded: "the store finds stream unavailable: stream KV_gseproc_tasks: no leader"})
	if r := e.do(http.MethodGet, "/healthz", nil, nil); r.Status != 200 || !strings.Contains(string(r.Data), `"ready":true`) ||
		!strings.Contains(string(r.Data), `"streams_unavailable":["KV_gseproc_tasks"]`) || !strings.Contains(string(r.Data), "KV_gseproc_tasks: no leader") {
		t.Fatalf("healthz with a stream electing: %d %s", r.Status, r.raw)
	}
	if r := e.do(http.MethodGet, "/readyz", nil, nil); r.Status != 200 || !strings.Contains(string(r.Data), `"streams_unavailable":["KV_gseproc_tasks"]`) ||
		!strings.Contains(string(r.Data), `"degraded":"the store finds`) {
		t.Fatalf("readyz with a stream electing: %d %s", r.Status, r.raw)
	}
	if r := e.do(http.MethodGet, "/api/v1/tasks", nil, nil); r.Status != 200 {
		t.Fatalf("native API with a stream electing: %d %s", r.Status, r.raw)
	}
	if m := metrics(); !strings.Contains(m, "gseproc_ready 1\n") || !strings.Contains(m, "gseproc_store_streams_unavailable 1\n") {
		t.Fatal("/metrics with a stream electing: not ready, or the stream not counted")
	}
}

// TestMetricsBacklog: /metrics exports the backlog WithBacklog reads, as
// it is at each scrape.
func TestMetricsBacklog(t *testing.T) {
	var events, writes atomic.Int64
	events.Store(3)
	writes.Store(7)
	e := newEnv(t, testConfig(), WithBacklog(func() (int, int) { return int(events.Load()), int(writes.Load()) }))
	scrape := func() string {
		resp, err := http.Get(e.hs.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
		}
		return string(b)
	}
	if m := scrape(); !strings.Contains(m, "gseproc_events_queued 3\n") || !strings.Contains(m, "gseproc_writes_queued 7\n") {
		t.Fatalf("/metrics lacks the backlog of 3 events and 7 writes:\n%s", m)
	}
	events.Store(0)
	writes.Store(0)
	if m := scrape(); !strings.Contains(m, "gseproc_events_queued 0\n") || !strings.Contains(m, "gseproc_writes_queued 0\n") {
		t.Fatal("/metrics does not read the backlog again at the next scrape")
	}
}
