package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A three-server cluster on 127.0.0.1, each `gseproc server` run through
// Main in this process, each embedding one node of one NATS cluster with
// JetStream replicated 3 ways.

var healthRe = regexp.MustCompile(`health at (http://\S+)/readyz`)

// clusterPorts are a 3-node cluster's fixed addresses (a node restarted
// comes back where its peers, agents and clients look for it). They are
// picked free by listening and closing; another process may take one in
// between, which fails the test loudly (a bind error), not silently.
type clusterPorts struct {
	route, nats, http [3]int
}

func pickClusterPorts(t *testing.T) clusterPorts {
	t.Helper()
	var p clusterPorts
	for _, arr := range []*[3]int{&p.route, &p.nats, &p.http} {
		for i := range arr {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			arr[i] = ln.Addr().(*net.TCPAddr).Port
			defer ln.Close()
		}
	}
	return p
}

// writeClusterConfigs writes each node's config file in dir: the routes of
// all three (with the route credential), 3 replicas, a stable server id,
// the native API open (the test drives it without credentials), and
// extra appended (agents' credentials).
func writeClusterConfigs(t *testing.T, dir string, p clusterPorts, extra string) []string {
	t.Helper()
	var routes []string
	for _, r := range p.route {
		routes = append(routes, fmt.Sprintf("%q", fmt.Sprintf("nats-route://127.0.0.1:%d", r)))
	}
	var files []string
	for i := range 3 {
		f := filepath.Join(dir, fmt.Sprintf("n%d.toml", i+1))
		cfg := fmt.Sprintf(`[server]
listen = "127.0.0.1:%d"
native_auth = false
[engine]
server_id = "s%d"
lease_ttl = "3s"
[nats]
listen = "127.0.0.1:%d"
store_dir = %q
server_name = "n%d"
replicas = 3
heartbeat_interval = "200ms"
offline_after = "6s"
[nats.cluster]
name = "gseproc-test"
listen = "127.0.0.1:%d"
routes = [%s]
user = "route"
password = "route-secret"
%s`, p.http[i], i+1, p.nats[i], filepath.Join(dir, fmt.Sprintf("n%d", i+1)), i+1, p.route[i], strings.Join(routes, ", "), extra)
		if err := os.WriteFile(f, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// clusterServer is one running `gseproc server`.
type clusterServer struct {
	URL       string // http://127.0.0.1:port
	out, errb *syncBuf
	stop      func() int // cancels it and returns its exit code
}

// startClusterServer runs `gseproc server --config cfgFile` and returns
// once its health endpoint answers (it may still wait for its peers).
func startClusterServer(t *testing.T, cfgFile string) *clusterServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &clusterServer{out: &syncBuf{}, errb: &syncBuf{}}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"server", "--config", cfgFile}, Stdio{In: strings.NewReader(""), Out: s.out, Err: s.errb})
	}()
	stopped, code := false, 0
	s.stop = func() int {
		if !stopped {
			stopped = true
			cancel()
			select {
			case code = <-done:
			case <-time.After(30 * time.Second):
				t.Errorf("server %s did not stop within 30s", cfgFile)
				code = -1
			}
		}
		return code
	}
	t.Cleanup(func() { s.stop() })
	waitFor(t, "health address of "+cfgFile, 30*time.Second, func() bool {
		select {
		case c := <-done:
			done <- c
			t.Fatalf("server %s exited %d:\n%s", cfgFile, c, s.errb.String())
		default:
		}
		m := healthRe.FindStringSubmatch(s.out.String())
		if m != nil {
			s.URL = m[1]
		}
		return m != nil
	})
	return s
}

// readiness is /readyz's answer.
type readiness struct {
	HTTP    int
	Message string
	State   string
	Ready   bool
	Reason  string
	JS      struct {
		OK      bool `json:"ok"`
		NodesUp int  `json:"nodes_up"`
		Want    int  `json:"nodes_want"`
		Forming bool `json:"forming"`
	}
	AgentsOnline int
}

func (s *clusterServer) readyz(t *testing.T) readiness {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(s.URL + "/readyz")
	if err != nil {
		return readiness{Message: err.Error()}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env struct {
		Message string `json:"message"`
		Data    struct {
			State        string          `json:"state"`
			Ready        bool            `json:"ready"`
			Reason       string          `json:"reason"`
			JetStream    json.RawMessage `json:"jetstream"`
			AgentsOnline int             `json:"agents_online"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("/readyz: %v: %s", err, raw)
	}
	r := readiness{HTTP: resp.StatusCode, Message: env.Message, State: env.Data.State, Ready: env.Data.Ready, Reason: env.Data.Reason, AgentsOnline: env.Data.AgentsOnline}
	_ = json.Unmarshal(env.Data.JetStream, &r.JS)
	return r
}

// get GETs path and returns the status and the envelope's message.
func (s *clusterServer) get(t *testing.T, path string) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(s.URL + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var env struct {
		Message string `json:"message"`
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &env)
	return resp.StatusCode, env.Message
}

func waitReady(t *testing.T, what string, ss ...*clusterServer) {
	t.Helper()
	waitFor(t, what, 120*time.Second, func() bool {
		for _, s := range ss {
			if r := s.readyz(t); !r.Ready || r.HTTP != http.StatusOK {
				return false
			}
		}
		return true
	})
}

// TestClusterStartUp: the first start of a three-server cluster, one
// server at a time, and a server restarted alone. A server alone waits
// for its peers instead of exiting: its /readyz says what it waits for
// (the cluster's first start needs all three; afterwards two of three),
// every API call is refused with 503 and that reason, and it becomes
// ready by itself when its peers come.
func TestClusterStartUp(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three servers as a cluster")
	}
	dir := t.TempDir()
	files := writeClusterConfigs(t, dir, pickClusterPorts(t), "")

	s1 := startClusterServer(t, files[0])
	waitFor(t, "a lone first node says the cluster is forming", 60*time.Second, func() bool {
		r := s1.readyz(t)
		return r.HTTP == http.StatusServiceUnavailable && r.State == "no_quorum" && r.JS.Forming
	})
	if r := s1.readyz(t); !strings.Contains(r.Reason, "first start needs all 3 nodes") || r.JS.NodesUp != 1 {
		t.Fatalf("lone first node: %+v", r)
	}
	if code, msg := s1.get(t, "/api/v1/tasks"); code != http.StatusServiceUnavailable || !strings.Contains(msg, "first start needs all 3 nodes") {
		t.Fatalf("API call on a lone first node: %d %q", code, msg)
	}
	if code, _ := s1.get(t, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz of a waiting node: %d", code)
	}

	s2 := startClusterServer(t, files[1])
	waitFor(t, "two nodes see each other, still forming", 60*time.Second, func() bool {
		r := s1.readyz(t)
		return r.JS.NodesUp == 2 && r.JS.Forming && !r.Ready
	})
	s3 := startClusterServer(t, files[2])
	waitReady(t, "the three servers ready", s1, s2, s3)
	for _, s := range []*clusterServer{s1, s2, s3} {
		if !listenRe.MatchString(s.out.String()) {
			t.Fatalf("ready server printed no serving banner:\n%s", s.out.String())
		}
		if code, msg := s.get(t, "/api/v1/tasks"); code != http.StatusOK {
			t.Fatalf("API call on a ready server: %d %q", code, msg)
		}
	}

	for _, s := range []*clusterServer{s1, s2, s3} {
		if code := s.stop(); code != 0 {
			t.Fatalf("server exit %d:\n%s", code, s.errb.String())
		}
	}

	// Restarted alone, a server of a formed cluster waits for a quorum.
	s1 = startClusterServer(t, files[0])
	waitFor(t, "a lone node waits for 2 of 3", 60*time.Second, func() bool {
		r := s1.readyz(t)
		return r.State == "no_quorum" && strings.Contains(r.Reason, "waiting for 2 of 3 nodes (1 up)") && !r.JS.Forming
	})
	if code, msg := s1.get(t, "/api/v1/tasks"); code != http.StatusServiceUnavailable || !strings.Contains(msg, "waiting for 2 of 3 nodes") {
		t.Fatalf("API call on a lone node: %d %q", code, msg)
	}
	if !strings.Contains(s1.errb.String(), "waiting for 2 of 3 nodes") {
		t.Fatalf("the lone node's log does not say what it waits for:\n%s", s1.errb.String())
	}
	s2 = startClusterServer(t, files[1])
	waitReady(t, "two of three ready", s1, s2)
	if code := s1.stop(); code != 0 {
		t.Fatalf("server exit %d", code)
	}
}
