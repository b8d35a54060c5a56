package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLogsThroughServerAndAgent: `gseproc logs` against a real server (HTTP
// on 127.0.0.1, embedded NATS) and a real agent whose process prints: the
// tail of its captured stdout and stderr in whole lines, a file under its
// log_path, escapes refused with the reason, and -f that ends by itself
// once the process is stopped.
func TestLogsThroughServerAndAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server, an agent and a real process")
	}
	base, natsURL := startDemoServer(t)
	work := t.TempDir()
	ip, host := "127.0.0.21", "0:127.0.0.21"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(work, "printer.sh"), []byte("#!/bin/sh\ntrap 'echo bye; exit 0' TERM\necho $$ > \"$GSEPROC_PID_FILE\"\n"+
		"i=0\nwhile :; do i=$((i+1)); echo \"out line $i\"; echo \"err line $i\" >&2; sleep 0.02; done\n"), 0o755))
	logDir, outside := filepath.Join(work, "logs"), t.TempDir()
	must(os.MkdirAll(logDir, 0o755))
	must(os.WriteFile(filepath.Join(logDir, "app.log"), []byte("first\n\x1b]52;c;aGk=\x07second\n"), 0o644))
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("secret\n"), 0o644))
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(logDir, "escape.log")))
	agentCfg := filepath.Join(work, "agent.toml")
	must(os.WriteFile(agentCfg, []byte("[nats]\nheartbeat_interval = \"200ms\"\n"), 0o644))
	killAtEnd(t, filepath.Join(work, "printer.pid"))
	runCmd(t, "agent", "--config", agentCfg, "--nats", natsURL, "--ip", ip, "--data-dir", filepath.Join(work, "agent"))
	waitFor(t, "agent online", 20*time.Second, func() bool {
		code, out, _ := run(t, "hosts", "--server", base, "--json")
		return code == 0 && strings.Contains(out, `"ip":"`+ip+`"`) && strings.Contains(out, `"agent_state":"online"`)
	})
	def := []map[string]any{{
		"process": map[string]any{
			"meta": map[string]any{"namespace": "demo", "name": "printer"},
			"spec": map[string]any{
				"identity":       map[string]any{"proc_name": "printer", "setup_path": work, "pid_path": filepath.Join(work, "printer.pid"), "log_path": logDir},
				"control":        map[string]any{"start_cmd": "./printer.sh &"},
				"monitor_policy": map[string]any{"auto_type": 1, "start_check_secs": 0, "op_timeout": 15},
			},
		},
		"hosts": []any{map[string]any{"ip": ip, "bk_cloud_id": 0}},
	}}
	b, _ := json.Marshal(def)
	defs := filepath.Join(work, "defs.json")
	must(os.WriteFile(defs, b, 0o644))
	if code, out, errOut := run(t, "apply", defs, "--server", base); code != 0 {
		t.Fatalf("apply: exit %d %s%s", code, out, errOut)
	}
	if code, out, errOut := run(t, "op", "start", "--ns", "demo", "--name", "printer", "--server", base); code != 0 {
		t.Fatalf("op start: exit %d %s%s", code, out, errOut)
	}
	logs := func(args ...string) (int, string, string) {
		return run(t, append([]string{"logs", "demo:printer", "--host", host, "--server", base}, args...)...)
	}

	var out string
	waitFor(t, "ten lines printed", 20*time.Second, func() bool {
		_, out, _ = logs("--bytes", "150")
		return strings.Count(out, "\n") >= 10
	})
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var n int
		if _, err := fmt.Sscanf(l, "out line %d", &n); err != nil {
			t.Fatalf("stdout tail: %q is not a whole line (%v)\n%s", l, err, out)
		}
	}
	if len(out) > 150 {
		t.Fatalf("--bytes 150 printed %d bytes", len(out))
	}
	if code, out, errOut := logs("--stream", "stderr", "--bytes", "100"); code != 0 || !strings.HasPrefix(out, "err line ") {
		t.Fatalf("stderr: exit %d %q %s", code, out, errOut)
	}
	// A file under log_path, its escape sequence removed (kept with --raw).
	if code, out, errOut := logs("--stream", "file", "--file", "app.log"); code != 0 || out != "first\nsecond\n" {
		t.Fatalf("app.log: exit %d %q %s", code, out, errOut)
	}
	if _, out, _ := logs("--stream", "file", "--file", "app.log", "--raw"); !strings.Contains(out, "\x1b]52") {
		t.Fatalf("app.log --raw: %q", out)
	}
	if code, out, errOut := logs("--stream", "file", "--file", "escape.log"); code != 1 || strings.Contains(out, "secret") || !strings.Contains(errOut, "outside log_path") {
		t.Fatalf("a symlink out of log_path: exit %d %q %s", code, out, errOut)
	}
	if code, _, errOut := logs("--stream", "file", "--file", "../printer.sh"); code != 2 || !strings.Contains(errOut, `".." segment`) {
		t.Fatalf("a .. file: exit %d %s", code, errOut)
	}

	// -f prints new lines until the process stops, then ends by itself.
	fout, ferr := &syncBuf{}, &syncBuf{}
	done := make(chan int, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		done <- Main(ctx, []string{"logs", "demo:printer", "--host", host, "--server", base, "-f", "--bytes", "50"}, Stdio{In: strings.NewReader(""), Out: fout, Err: ferr})
	}()
	waitFor(t, "-f prints new lines", 20*time.Second, func() bool { return strings.Count(fout.String(), "\n") >= 20 })
	if code, out, errOut := run(t, "op", "stop", "--ns", "demo", "--name", "printer", "--server", base); code != 0 {
		t.Fatalf("op stop: exit %d %s%s", code, out, errOut)
	}
	select {
	case code := <-done:
		if code != 0 || !strings.HasSuffix(fout.String(), "bye\n") || !strings.Contains(ferr.String(), "not running") {
			t.Fatalf("-f after stop: exit %d, ends %q, stderr %s", code, fout.String()[max(0, len(fout.String())-40):], ferr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("-f did not end after the process stopped")
	}
	// Follow lines are consecutive: nothing lost or repeated between pieces.
	prev := 0
	for _, l := range strings.Split(strings.TrimSuffix(fout.String(), "bye\n"), "\n") {
		var n int
		if _, err := fmt.Sscanf(l, "out line %d", &n); err != nil {
			continue
		}
		if prev != 0 && n != prev+1 {
			t.Fatalf("-f: line %d after %d", n, prev)
		}
		prev = n
	}
}
