package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/transport/natsembed"
	"gseproc/backend/transport/transporttest"
)

// outageCall is one API call of TestAPIDuringNATSOutage and what came back.
type outageCall struct {
	name, method, path string
	body               []byte
	gateway            bool // GSE/JOB form: 200 with the error in the envelope
}

type outageReply struct {
	HTTP     int
	NotReady string // backend.NotReadyHeader
	Env      envelopeReply
	Took     time.Duration
}

func (c outageCall) do(t *testing.T, base string) outageReply {
	t.Helper()
	req, err := http.NewRequest(c.method, base+c.path, bytes.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Timeout: 90 * time.Second}
	t0 := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := outageReply{HTTP: resp.StatusCode, NotReady: resp.Header.Get(backend.NotReadyHeader), Took: time.Since(t0)}
	if err := json.Unmarshal(raw, &r.Env); err != nil {
		t.Fatalf("%s: not an envelope: %.300s", c.name, raw)
	}
	return r
}

// unavailable says whether r is the documented refusal of an unavailable
// server: 1306000 with the reason in the message, HTTP 503 on the native
// API and 200 on the GSE/JOB forms.
func (c outageCall) unavailable(r outageReply) bool {
	want := http.StatusServiceUnavailable
	if c.gateway {
		want = http.StatusOK
	}
	return r.HTTP == want && !r.Env.Result && r.Env.Code == 1306000 && strings.Contains(r.Env.Message, "unavailable") &&
		(strings.Contains(r.Env.Message, "NATS") || strings.Contains(r.Env.Message, "JetStream"))
}

type healthz struct {
	Status, State, Reason string
	Ready                 bool
}

func getHealthz(t *testing.T, base string) healthz {
	t.Helper()
	r := callJSON(t, http.MethodGet, base+"/healthz", nil)
	var h healthz
	if !r.Result || json.Unmarshal(r.Data, &h) != nil || h.Status != "ok" {
		t.Fatalf("/healthz: %v %s %s", r.Result, r.Message, r.Data)
	}
	return h
}

// serverOnNATS starts an external NATS (embedded here, with JetStream and
// the server's user srv) and `gseproc server --demo` on it, and waits for
// the server to be ready. restart starts NATS again, after a Shutdown, on
// the same address and store. Cleanups run last first: the server stops
// before NATS does.
func serverOnNATS(t *testing.T) (ns *natsembed.Embedded, url, base string, stop func() int, restart func()) {
	t.Helper()
	ns, url, base, stop, restart, _ = serverOnNATSVia(t, false)
	return ns, url, base, stop, restart
}

// serverOnNATSVia is serverOnNATS, with the server's connection through a
// relay the test can freeze when relayed (nil otherwise).
func serverOnNATSVia(t *testing.T, relayed bool) (ns *natsembed.Embedded, url, base string, stop func() int, restart func(), relay *transporttest.Relay) {
	t.Helper()
	nc := config.Default().NATS
	nc.Listen, nc.StoreDir = "127.0.0.1:-1", t.TempDir()
	nc.Users = []config.NATSUser{{User: "srv", Password: "srvpw", Role: config.NATSRoleServer}}
	ns, err := natsembed.StartEmbedded(nc, natsembed.EmbeddedOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	url = ns.ClientURL()
	serverURL := url
	if relayed {
		relay = transporttest.NewRelay(t, url)
		serverURL = relay.URL()
	}
	p := filepath.Join(t.TempDir(), "gseproc.toml")
	if err := os.WriteFile(p, []byte(fmt.Sprintf("[nats]\nurls = [%q]\nuser = \"srv\"\npassword = \"srvpw\"\n", serverURL)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown() })
	base, _, stop = startServer(t, "--demo", "--config", p, "--listen", "127.0.0.1:0")
	waitFor(t, "ready", 60*time.Second, func() bool { return getHealthz(t, base).Ready })
	restart = func() {
		t.Helper()
		nc.Listen = strings.TrimPrefix(url, "nats://")
		ns2, err := natsembed.StartEmbedded(nc, natsembed.EmbeddedOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns2.Shutdown() })
	}
	return ns, url, base, stop, restart, relay
}

// TestAPIDuringNATSOutage: `gseproc server` on an external NATS (embedded
// here, with JetStream) that is stopped, then started again on the same
// address and store. While it is down every API call (native, GSE and JOB
// forms, reads and writes) answers at once in its documented error shape
// with the reason, /healthz says why, and nothing waits out the store's
// patience (a minute before); once NATS is back the server serves again by
// itself, with what it stored before the outage.
func TestAPIDuringNATSOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and NATS")
	}
	ns, _, base, stop, restartNATS := serverOnNATS(t)
	calls, taskID := outageCalls(t, base)
	op := struct{ TaskID string }{taskID}

	ns.Shutdown()
	t0 := time.Now()
	// The first write after the stop, before anything may have noticed it:
	// refused within the store's bound for an API call (1.5 s), not after
	// the minute the store waits out a leader election for its own work:
	// answered within 2 s.
	first := calls[0].do(t, base)
	t.Logf("first write after the stop: %s: HTTP %d %s", first.Took, first.HTTP, first.Env.Message)
	if !calls[0].unavailable(first) {
		t.Fatalf("first write after the stop: HTTP %d %+v", first.HTTP, first.Env)
	}
	if first.Took >= 2*time.Second {
		t.Fatalf("first write after the stop answered after %s", first.Took)
	}
	// /healthz says why as soon as the connection is seen lost (the prober
	// runs once a second; the connection's state is read live).
	var h healthz
	waitFor(t, "/healthz says NATS is down", 10*time.Second, func() bool {
		h = getHealthz(t, base)
		return !h.Ready
	})
	t.Logf("/healthz after %s: %+v", time.Since(t0), h)
	if h.State != "nats_disconnected" || !strings.Contains(h.Reason, "NATS connection") {
		t.Fatalf("/healthz while NATS is down: %+v", h)
	}
	// Every form, read or write: the documented refusal, with the reason,
	// at once. Twice, a few seconds apart: it stays so while NATS is down.
	for round := range 2 {
		for _, c := range calls {
			r := c.do(t, base)
			if !c.unavailable(r) {
				t.Fatalf("%s while NATS is down: HTTP %d %+v", c.name, r.HTTP, r.Env)
			}
			if !c.gateway && r.NotReady != "nats_disconnected" {
				t.Errorf("%s: %s is %q", c.name, backend.NotReadyHeader, r.NotReady)
			}
			if r.Took >= 2*time.Second {
				t.Errorf("%s while NATS is down took %s", c.name, r.Took)
			}
			t.Logf("round %d %s: %s %s", round, c.name, r.Took, r.Env.Message)
		}
		if round == 0 {
			time.Sleep(3 * time.Second)
		}
	}

	// NATS back on the same address and store: the server serves again by
	// itself, with what it stored before.
	restartNATS()
	back := time.Now()
	waitFor(t, "ready again", 60*time.Second, func() bool { return getHealthz(t, base).Ready })
	t.Logf("ready %s after NATS came back", time.Since(back))
	for _, c := range calls {
		var r outageReply
		waitFor(t, c.name+" after the outage", 30*time.Second, func() bool {
			r = c.do(t, base)
			return r.Env.Result
		})
		if c.name == "native task" && !strings.Contains(string(r.Env.Data), op.TaskID) {
			t.Fatalf("the task stored before the outage: %s", r.Env.Data)
		}
	}
	r := callJSON(t, http.MethodGet, base+"/api/v1/processes?namespace=outage", nil)
	if !r.Result || !strings.Contains(string(r.Data), `"before"`) || !strings.Contains(string(r.Data), `"during"`) {
		t.Fatalf("definitions after the outage: %s %.400s", r.Message, r.Data)
	}
	if code := stop(); code != 0 {
		t.Fatalf("server exit %d", code)
	}
}

// outageCalls stores a task (operate_proc) and a definition ("before")
// through the server at base, and returns the calls of every form, reads
// and writes, an outage test makes (one saves definition "during"), and
// the task's id.
func outageCalls(t *testing.T, base string) ([]outageCall, string) {
	t.Helper()
	gse, err := os.ReadFile("../server/testdata/seed004_gse_operate_proc.request.json")
	if err != nil {
		t.Fatal(err)
	}
	job, err := os.ReadFile("../server/testdata/seed001_manage_proc.request.json")
	if err != nil {
		t.Fatal(err)
	}
	// A task and a definition stored before the outage.
	r := postJSON(t, base+"/api/c/compapi/v2/gse/operate_proc/", gse)
	var op struct {
		TaskID string `json:"task_id"`
	}
	if !r.Result || json.Unmarshal(r.Data, &op) != nil || op.TaskID == "" {
		t.Fatalf("operate_proc before the outage: %s %s", r.Message, r.Data)
	}
	def := func(name string) []byte {
		return []byte(`{"process": {"meta": {"namespace": "outage", "name": "` + name + `"}, "spec": {"identity": {"proc_name": "` + name +
			`", "setup_path": "/tmp", "pid_path": "/tmp/` + name + `.pid"}, "control": {"start_cmd": "true"}, "monitor_policy": {"auto_type": 2}}}, "hosts": [{"ip": "10.0.0.1", "bk_cloud_id": 0}]}`)
	}
	if r := postJSON(t, base+"/api/v1/processes", def("before")); !r.Result {
		t.Fatalf("save before the outage: %s", r.Message)
	}
	return []outageCall{
		{name: "native operate", method: http.MethodPost, path: "/api/v1/operate", body: []byte(`{"op_type": 2, "selector": {"namespace": "outage"}}`)},
		{name: "native save", method: http.MethodPost, path: "/api/v1/processes", body: def("during")},
		{name: "native tasks", method: http.MethodGet, path: "/api/v1/tasks"},
		{name: "native task", method: http.MethodGet, path: "/api/v1/tasks/" + op.TaskID},
		{name: "gse operate_proc", method: http.MethodPost, path: "/api/c/compapi/v2/gse/operate_proc/", body: gse, gateway: true},
		{name: "gse get_proc_operate_result", method: http.MethodPost, path: "/api/c/compapi/v2/gse/get_proc_operate_result/",
			body: []byte(`{"task_id": "` + op.TaskID + `"}`), gateway: true},
		{name: "job manage_proc", method: http.MethodPost, path: "/api/c/compapi/v2/jobv3/manage_proc/", body: job, gateway: true},
	}, op.TaskID
}

// TestAPIWhileJetStreamUnanswered: `gseproc server` on an external NATS
// whose JetStream stops answering while NATS stays connected (shut down
// on its node, and its API's and streams' subjects held by a subscriber
// that never replies, as a hung JetStream would). From the first call
// after, every API call (native, GSE and JOB forms, reads and writes) is
// answered within 2 s of the time the server controls (the time taken
// less this process's measured stalls): in its documented error shape
// with the reason when it needs the store (first by the store's probe,
// then at once, as /healthz says JetStream does not answer), or from
// what the server holds (a finished task's results) until then. Once
// JetStream is back, the server serves again by itself.
func TestAPIWhileJetStreamUnanswered(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and NATS")
	}
	ns, url, base, stop, restartNATS := serverOnNATS(t)
	calls, _ := outageCalls(t, base)

	if err := ns.Server().DisableJetStream(); err != nil {
		t.Fatal(err)
	}
	hole, err := nats.Connect(url, nats.UserInfo("srv", "srvpw"))
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"$JS.API.>", "$KV.>"} {
		if _, err := hole.Subscribe(subj, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
	}
	if err := hole.Flush(); err != nil {
		t.Fatal(err)
	}
	// From the first call after the hole is in place: no earlier silence
	// is waited out.
	t0 := time.Now()
	refused := 0
	// Rounds until a round after /healthz said why (bounded: the prober
	// says so after a few failed probes).
	for round, notReady := 0, false; !notReady; round++ {
		if round >= 20 || time.Since(t0) > 2*time.Minute {
			t.Fatalf("/healthz still ready after %d rounds (%s): %+v", round, time.Since(t0), getHealthz(t, base))
		}
		notReady = !getHealthz(t, base).Ready
		for _, c := range calls {
			m := transporttest.MeterStalls()
			r := c.do(t, base)
			stalls := m.Stop()
			t.Logf("round %d %s: %s (stalls %s) HTTP %d %.200s", round, c.name, r.Took, stalls, r.HTTP, r.Env.Message)
			switch {
			case c.unavailable(r):
				refused++
			case notReady || !r.Env.Result:
				t.Fatalf("%s with JetStream unanswered: HTTP %d %+v", c.name, r.HTTP, r.Env)
			}
			// The time the server controls: the time taken less this
			// process's stalls (the server runs in it).
			if r.Took-stalls >= 2*time.Second {
				t.Errorf("%s with JetStream unanswered took %s (%s stalled)", c.name, r.Took, stalls)
			}
		}
	}
	h := getHealthz(t, base)
	t.Logf("/healthz after %s: %+v; %d calls refused", time.Since(t0), h, refused)
	if h.State != "no_quorum" || !strings.Contains(h.Reason, "JetStream") {
		t.Fatalf("/healthz with JetStream unanswered: %+v", h)
	}

	// JetStream back (NATS restarted on the same address and store): the
	// server serves again by itself.
	hole.Close()
	ns.Shutdown()
	restartNATS()
	waitFor(t, "ready again", 60*time.Second, func() bool { return getHealthz(t, base).Ready })
	for _, c := range calls {
		waitFor(t, c.name+" after JetStream came back", 30*time.Second, func() bool { return c.do(t, base).Env.Result })
	}
	if code := stop(); code != 0 {
		t.Fatalf("server exit %d", code)
	}
}

// TestAPIWhileNATSFrozen: `gseproc server` on an external NATS that stops
// answering without the connection closing (a relay that carries nothing
// either way: as a NATS server stopped with SIGSTOP). From the first call
// after the freeze (nothing had noticed it; no silence waited out), a
// call is answered 503 with the reason (NATS answers nothing, not even a
// PING) within 2 s of the time the server controls (the time taken less
// this process's measured stalls: on an idle machine, the time taken);
// /healthz then says why at once; every later call is refused at once.
// Thawed, the server serves again by itself, with what it stored before.
func TestAPIWhileNATSFrozen(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and NATS")
	}
	_, _, base, stop, _, relay := serverOnNATSVia(t, true)
	calls, taskID := outageCalls(t, base)

	relay.Freeze(true)
	m := transporttest.MeterStalls()
	first := calls[0].do(t, base)
	stalls := m.Stop()
	t.Logf("first call after the freeze: %s (stalls %s): HTTP %d %s", first.Took, stalls, first.HTTP, first.Env.Message)
	if !calls[0].unavailable(first) || !strings.Contains(first.Env.Message, "NATS answers nothing") {
		t.Fatalf("first call after the freeze: HTTP %d %+v", first.HTTP, first.Env)
	}
	if first.Took-stalls >= 2*time.Second {
		t.Fatalf("first call after the freeze answered after %s (%s stalled)", first.Took, stalls)
	}
	// /healthz: at once (no wait), as the store found it.
	h := getHealthz(t, base)
	t.Logf("/healthz: %+v", h)
	if h.Ready || h.State != "nats_disconnected" || !strings.Contains(h.Reason, "NATS answers nothing") {
		t.Fatalf("/healthz right after the first refusal: %+v", h)
	}
	for round := range 2 {
		for _, c := range calls {
			m := transporttest.MeterStalls()
			r := c.do(t, base)
			stalls := m.Stop()
			t.Logf("round %d %s: %s (stalls %s) HTTP %d %.200s", round, c.name, r.Took, stalls, r.HTTP, r.Env.Message)
			if !c.unavailable(r) {
				t.Fatalf("%s while NATS is frozen: HTTP %d %+v", c.name, r.HTTP, r.Env)
			}
			if r.Took-stalls >= 2*time.Second {
				t.Errorf("%s while NATS is frozen took %s (%s stalled)", c.name, r.Took, stalls)
			}
		}
		if round == 0 {
			time.Sleep(3 * time.Second)
		}
	}

	relay.Freeze(false)
	back := time.Now()
	waitFor(t, "ready again", 60*time.Second, func() bool { return getHealthz(t, base).Ready })
	t.Logf("ready %s after the thaw", time.Since(back))
	for _, c := range calls {
		var r outageReply
		waitFor(t, c.name+" after the thaw", 30*time.Second, func() bool {
			r = c.do(t, base)
			return r.Env.Result
		})
		if c.name == "native task" && !strings.Contains(string(r.Env.Data), taskID) {
			t.Fatalf("the task stored before the freeze: %s", r.Env.Data)
		}
	}
	if code := stop(); code != 0 {
		t.Fatalf("server exit %d", code)
	}
}

// TestHealthzWhileNATSFrozenIdle: `gseproc server` on an external NATS
// that freezes (a relay that carries nothing either way, as a NATS server
// stopped with SIGSTOP) while no API call is made. /healthz and /readyz
// turn by themselves (the server's background probe), saying that NATS
// answers nothing (nats_disconnected), not that JetStream has no quorum;
// thawed, the server is ready again by itself. The time from the freeze
// to /healthz turning is logged (the product's figure: about 2 s on an
// idle machine); it is bounded here generously, less this process's
// measured stalls, so that a loaded machine meets it.
func TestHealthzWhileNATSFrozenIdle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and NATS")
	}
	_, _, base, stop, _, relay := serverOnNATSVia(t, true)
	m := transporttest.MeterStalls()
	t0 := time.Now()
	relay.Freeze(true)
	var h healthz
	waitFor(t, "/healthz turning with NATS frozen and no API call", 60*time.Second, func() bool {
		h = getHealthz(t, base)
		return !h.Ready
	})
	took, stalls := time.Since(t0), m.Stop()
	t.Logf("/healthz turned %s after the freeze (stalls %s): %+v", took, stalls, h)
	if took-stalls >= 6*time.Second {
		t.Errorf("/healthz turned %s after the freeze (%s stalled)", took, stalls)
	}
	// Saying why: at once on an idle machine; on a very loaded one the
	// store's probe may first find neither (no verdict in its 3 s, counted
	// after 3 in a row as JetStream not answering).
	waitFor(t, "/healthz saying NATS answers nothing", 60*time.Second, func() bool {
		h = getHealthz(t, base)
		return h.State == "nats_disconnected" && strings.Contains(h.Reason, "NATS answers nothing")
	})
	r := callJSON(t, http.MethodGet, base+"/readyz", nil)
	if r.Result || !strings.Contains(r.Message, "NATS answers nothing") {
		t.Fatalf("/readyz with NATS frozen: %v %s", r.Result, r.Message)
	}
	relay.Freeze(false)
	back := time.Now()
	waitFor(t, "ready again after the thaw", 60*time.Second, func() bool { return getHealthz(t, base).Ready })
	t.Logf("ready %s after the thaw", time.Since(back))
	if code := stop(); code != 0 {
		t.Fatalf("server exit %d", code)
	}
}
