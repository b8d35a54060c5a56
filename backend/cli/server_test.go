package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gseproc/backend/config"
	"gseproc/backend/node/nodetest"
)

var listenRe = regexp.MustCompile(`listening on (http://\S+)`)

// startServer runs `gseproc server args...` through Main and returns its
// URL and a stop function that cancels it and returns its exit code.
func startServer(t *testing.T, args ...string) (string, *syncBuf, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errb := &syncBuf{}, &syncBuf{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, append([]string{"server"}, args...), Stdio{In: strings.NewReader(""), Out: out, Err: errb})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := listenRe.FindStringSubmatch(out.String()); m != nil {
			stopped := false
			stop := func() int {
				if stopped {
					return 0
				}
				stopped = true
				cancel()
				select {
				case code := <-done:
					return code
				case <-time.After(20 * time.Second):
					t.Fatal("server did not stop within 20s of cancel")
					return -1
				}
			}
			t.Cleanup(func() { stop() })
			return m[1], errb, stop
		}
		select {
		case code := <-done:
			cancel()
			t.Fatalf("server exited %d before listening:\n%s\n%s", code, out.String(), errb.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("server did not print its address in 20s:\n%s", errb.String())
		}
	}
}

type envelopeReply = nodetest.Envelope

func postJSON(t *testing.T, url string, body []byte) envelopeReply {
	t.Helper()
	return nodetest.CallJSON(t, http.MethodPost, url, body)
}

func callJSON(t *testing.T, method, url string, body []byte) envelopeReply {
	t.Helper()
	return nodetest.CallJSON(t, method, url, body)
}

// TestServerDemo: `gseproc server --demo` serves the documents' examples
// as written, and `gseproc op --server URL` operates through it.
func TestServerDemo(t *testing.T) {
	base, stderr, stop := startServer(t, "--demo", "--listen", "127.0.0.1:0", "--nats-listen", "127.0.0.1:-1")
	if !strings.Contains(stderr.String(), "demo credentials in use") {
		t.Errorf("no demo-credentials warning in the log:\n%s", stderr.String())
	}
	// Seed 004 verbatim: no gateway fields at all.
	seed, err := os.ReadFile("../server/testdata/seed004_gse_operate_proc.request.json")
	if err != nil {
		t.Fatal(err)
	}
	r := postJSON(t, base+"/api/c/compapi/v2/gse/operate_proc/", seed)
	if !r.Result || r.Code != 0 {
		t.Fatalf("seed 004: %d %s", r.Code, r.Message)
	}
	var d struct {
		TaskID string `json:"task_id"`
	}
	_ = json.Unmarshal(r.Data, &d)
	key := "1:2:10.0.0.1:gse:proc-test"
	waitFor(t, "a final result for "+key, 30*time.Second, func() bool {
		q, _ := json.Marshal(map[string]string{"bk_app_code": "esb_test", "bk_app_secret": "xxx", "bk_token": "xxx", "task_id": d.TaskID})
		r = postJSON(t, base+"/api/c/compapi/v2/gse/get_proc_operate_result/", q)
		if r.Code == 0 {
			var m map[string]struct {
				ErrorCode int `json:"error_code"`
			}
			_ = json.Unmarshal(r.Data, &m)
			if e, ok := m[key]; ok && e.ErrorCode != 115 {
				if e.ErrorCode != 0 && e.ErrorCode != 828 {
					t.Fatalf("start of proc-test: error_code %d", e.ErrorCode)
				}
				return true
			}
		} else if r.Code != 1000115 {
			t.Fatalf("get_proc_operate_result: %d %s", r.Code, r.Message)
		}
		return false
	})
	// Seed 002 verbatim (bk_app_code esb_test / xxx, biz 1).
	seed, _ = os.ReadFile("../server/testdata/seed002_operate_proc.request.json")
	if r := postJSON(t, base+"/api/c/compapi/v2/job/operate_proc/", seed); !r.Result {
		t.Fatalf("seed 002: %d %s", r.Code, r.Message)
	}
	// A wrong secret is refused.
	bad := bytes.Replace(seed, []byte(`"bk_app_secret": "xxx"`), []byte(`"bk_app_secret": "yyy"`), 1)
	if r := postJSON(t, base+"/api/c/compapi/v2/job/operate_proc/", bad); r.Result || r.Code != 1306403 {
		t.Fatalf("wrong secret: %v %d %s", r.Result, r.Code, r.Message)
	}

	// gseproc op --server URL
	code, stdout, errOut := run(t, "op", "status", "--server", base, "--ns", "gse", "--name", "proc-test", "--json")
	if code != 0 {
		t.Fatalf("op --server: exit %d\n%s\n%s", code, stdout, errOut)
	}
	lines := jsonResults(t, stdout)
	hosts := map[string]bool{}
	for _, l := range lines {
		hosts[l.AgentID] = true
		if l.Code != 0 || l.Content == "" {
			t.Errorf("status of %s: code %d content %q", l.AgentID, l.Code, l.Content)
		}
	}
	for _, h := range []string{"0:10.0.0.1", "1:10.0.0.1", "0:127.0.0.1"} {
		if !hosts[h] {
			t.Errorf("op --server: no result for %s (got %v)", h, hosts)
		}
	}
	if code, _, errOut := run(t, "op", "status", "--server", "ftp://nowhere", "--ns", "gse"); code == 0 || !strings.Contains(errOut, "http://") {
		t.Errorf("bad --server URL: exit %d, %s", code, errOut)
	}
	if code := stop(); code != 0 {
		t.Fatalf("server exit %d after cancel", code)
	}
}

// TestServerConfigFile: apps, listen and fleet from the file; --listen
// overrides; credentials for the client from [server.client].
func TestServerConfigFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "gseproc.toml")
	toml := `
[simulator]
hosts = 30
seed = 5
demo = true
latency_median = "1ms"
latency_p99 = "3ms"
failure_rate = 0
offline_rate = 0
unreachable_rate = 0
crash_rate = 0

[server]
listen = "127.0.0.1:1"
fleet = "simulated"

[[server.apps]]
bk_app_code = "esb_test"
salt = "abc"
secret_sha256 = "` + config.HashSecret("abc", "xxx") + `"
biz = [1]
namespaces = ["*"]

[server.client]
bk_app_code = "esb_test"
bk_app_secret = "xxx"
bk_username = "ops"
`
	if err := os.WriteFile(p, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _, stop := startServer(t, "--config", p, "--listen", "127.0.0.1:0")
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz %d", resp.StatusCode)
	}
	// Without anonymous_app, seed 004 (no gateway fields) is refused.
	seed, _ := os.ReadFile("../server/testdata/seed004_gse_operate_proc.request.json")
	if r := postJSON(t, base+"/api/c/compapi/v2/gse/operate_proc/", seed); r.Result || r.Code != 1306403 || !strings.Contains(r.Message, "bk_app_code") {
		t.Fatalf("seed 004 without credentials: %v %d %s", r.Result, r.Code, r.Message)
	}
	// The native API needs the app: op --server with [server.client] works.
	code, stdout, errOut := run(t, "op", "status", "--server", base, "--config", p, "--ns", "gse", "--json")
	if code != 0 || len(jsonResults(t, stdout)) == 0 {
		t.Fatalf("op --server with client credentials: exit %d\n%s\n%s", code, stdout, errOut)
	}
	for _, l := range jsonResults(t, stdout) {
		if l.Op != 2 {
			t.Fatalf("op %v", l.Op)
		}
	}
	t.Setenv("GSEPROC_APP_SECRET", "wrong")
	code, _, errOut = run(t, "op", "status", "--server", base, "--config", p, "--ns", "gse")
	if code == 0 || !strings.Contains(errOut, "bk_app_secret") {
		t.Fatalf("op --server with a wrong secret: exit %d: %s", code, errOut)
	}
	if code := stop(); code != 0 {
		t.Fatalf("server exit %d", code)
	}
}

func TestServerFlags(t *testing.T) {
	code, out, _ := run(t, "server", "--hash-secret", "xxx")
	m := regexp.MustCompile(`salt = "([0-9a-f]+)"\nsecret_sha256 = "([0-9a-f]{64})"`).FindStringSubmatch(out)
	if code != 0 || m == nil || config.HashSecret(m[1], "xxx") != m[2] {
		t.Fatalf("--hash-secret: exit %d, %q", code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.toml")
	_ = os.WriteFile(bad, []byte("[server]\nlisten = \"nope\"\nmax_hosts = 0\n[[server.apps]]\nbk_app_code = \"a\"\nsecret_sha256 = \"zz\"\n"), 0o600)
	code, _, errOut := run(t, "server", "--config", bad)
	for _, want := range []string{"server.listen", "server.max_hosts", "server.apps[0].secret_sha256"} {
		if code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("bad config: exit %d, want 2 and %q in:\n%s", code, want, errOut)
		}
	}
	if code, _, errOut := run(t, "server", "extra"); code != 2 || !strings.Contains(errOut, "extra") {
		t.Errorf("positional argument: exit %d %s", code, errOut)
	}
	if code, _, errOut := run(t, "server", "--demo", "--listen", "256.0.0.1:99999", "--nats-listen", "127.0.0.1:-1"); code == 0 {
		t.Errorf("bad listen address: exit 0 %s", errOut)
	}
}
