package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBenchCompareRefusesUnknownTool: `bench compare --only` with a name
// that is not a tool compared is a usage error naming it, before anything
// starts (it would otherwise measure gseproc alone).
func TestBenchCompareRefusesUnknownTool(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"bench", "compare", "--only", "s6,supervisor"}, Stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
	if code != 2 || !strings.Contains(errb.String(), `--only: "supervisor" is not a tool compared`) {
		t.Fatalf("code %d, stderr %q, stdout %q; want 2 and the name refused", code, errb.String(), out.String())
	}
}

// TestBenchAgent runs `gseproc bench agent` as make bench does, with this
// test binary as gseproc: the real server and a real agent process, two
// hosted processes saved through the client (from the documented
// defaults) and started with `gseproc op start`, then the agent's figures
// read from /proc. A definition the server refuses, or an op start that
// does not start both, fails it (as make bench failed once).
func TestBenchAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and an agent process")
	}
	t.Setenv(envAsGseproc, "1")
	// Its work dir under a temp dir of this test's own, which every
	// process it starts has in its environment.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errb syncBuf
	code := Main(ctx, []string{"bench", "agent", "--procs", "2", "--idle", "1s"}, Stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
	t.Log(out.String())
	if code != 0 || !strings.Contains(out.String(), "agent: 2 hosted processes started") || !regexp.MustCompile(`agent: pid [0-9]+ runs /`).MatchString(out.String()) ||
		!regexp.MustCompile(`agent idle, 2 hosted: RSS [0-9.]+ MB .*; [0-9]+ threads; cpu`).MatchString(out.String()) {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and the figures of an idle agent with 2 hosted processes", code, out.String(), errb.String())
	}
	// Everything it started is stopped, the hosted processes included,
	// and its work dir removed.
	if ents, err := os.ReadDir(tmp); err != nil || len(ents) != 0 {
		t.Errorf("left in TMPDIR: %v %v", ents, err)
	}
	mark := []byte("\x00TMPDIR=" + tmp + "\x00")
	var left []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left = nil
		pids, _ := filepath.Glob("/proc/[0-9]*/environ")
		for _, p := range pids {
			if env, err := os.ReadFile(p); err == nil && bytes.Contains(append([]byte{0}, env...), mark) {
				cmd, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
				left = append(left, filepath.Base(filepath.Dir(p))+": "+strings.ReplaceAll(string(cmd), "\x00", " "))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

// TestBenchFlagsRefused: agent's, compare's and fleet's counts and
// durations out of range are usage errors naming the flag, before
// anything starts (a value below 1 was replaced by its default; a
// profile run with nowhere to go or past the runs was silently none).
func TestBenchFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"agent", "--procs", "0"}, "--procs: 0, want at least 1"},
		{[]string{"agent", "--idle", "0s"}, "--idle: 0s, want more than 0"},
		{[]string{"compare", "--samples", "-1"}, "--samples: -1, want at least 1"},
		{[]string{"compare", "--settle", "0s"}, "--settle: 0s, want more than 0"},
		{[]string{"compare", "--fanout-hosts", "0"}, "--fanout-hosts: 0, want 1..62500"},
		{[]string{"compare", "--fanout-hosts", "62501"}, "--fanout-hosts: 62501, want 1..62500"},
		{[]string{"compare", "--runs", "0"}, "--runs: 0, want at least 1"},
		{[]string{"fleet", "--idle", "0s"}, "--idle: 0s, want more than 0"},
		{[]string{"fleet", "--runs", "0"}, "--runs: 0, want at least 1"},
		{[]string{"fleet", "--runs", "2", "--profile", "/nonexistent", "--profile-run", "3"}, "--profile-run: 3, want 0..2 (--runs)"},
		{[]string{"fleet", "--profile-run", "-1", "--profile", "/nonexistent"}, "--profile-run: -1, want 0..3 (--runs)"},
		{[]string{"fleet", "--profile-run", "2"}, "--profile-run: 2 without --profile DIR"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append([]string{"bench"}, tc.args...), Stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
		if code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("bench %v: code %d, stderr %q, stdout %q; want 2 and %q", tc.args, code, errb.String(), out.String(), tc.want)
		}
	}
}
