package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAgentBinaryUsable: gseproc execs the gseproc-agent beside it only
// when it is a regular file as private as gseproc and answers `version`
// with gseproc's own version; each refusal says why.
func TestAgentBinaryUsable(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no exec here")
	}
	dir := t.TempDir()
	self := filepath.Join(dir, "gseproc")
	if err := os.WriteFile(self, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	good := script("good", `[ "$1" = version ] && echo "gseproc-agent v1.2"`, 0o755)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, bin, want string // want: "" usable, else part of the refusal
	}{
		{"same version", good, ""},
		{"other version", script("old", `echo "gseproc-agent v1.1"`, 0o755), `is "gseproc-agent v1.1", not "gseproc-agent v1.2"`},
		{"another program", script("other", `echo "something v1.2"`, 0o755), "not"},
		{"version fails", script("fails", `exit 3`, 0o755), "version: exit status 3"},
		{"group-writable", script("gw", `echo "gseproc-agent v1.2"`, 0o775), "writable by group or others"},
		{"world-writable", script("ww", `echo "gseproc-agent v1.2"`, 0o757), "writable by group or others"},
		{"a symlink", link, "not a regular file"},
		{"a directory", sub, "not a regular file"},
	} {
		err := agentBinaryUsable(self, c.bin, "v1.2")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want a refusal with %q", c.name, err, c.want)
		}
	}
}

// TestGseprocAgentExecsAgentBinary: `gseproc agent` with the real
// gseproc-agent (built here, with this gseproc's version) beside it
// becomes that binary, same pid and arguments, and the agent runs; with
// one of another version, or GSEPROC_AGENT_INPROCESS=1, the agent runs in
// gseproc, and the first case says why.
func TestGseprocAgentExecsAgentBinary(t *testing.T) {
	if testing.Short() || runtime.GOOS != "linux" {
		t.Skip("builds gseproc-agent; reads /proc")
	}
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	gseproc := filepath.Join(dir, "gseproc") // this test binary, as gseproc (TestMain)
	copyFile(t, self, gseproc)
	agentBin := filepath.Join(dir, AgentBinary)
	build := func(version string) {
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-ldflags", "-X main.version="+version, "-o", agentBin, "gseproc/backend/agent/cmd/gseproc-agent")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build gseproc-agent: %v\n%s", err, out)
		}
	}
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", freePort(t)) // nobody: the agent retries, and runs meanwhile
	// runs starts gseproc agent and returns the executable its process
	// runs once the agent says it supervises, and its stderr so far.
	runs := func(name string, env ...string) (exe, stderr string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, gseproc, "agent", "--nats", natsURL, "--ip", "127.0.0.1", "--data-dir", filepath.Join(dir, name))
		cmd.Env = append(append(os.Environ(), envAsGseproc+"=1", "TMPDIR="+dir), env...)
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = time.Minute
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var errb syncBuf
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		defer func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			go func() { _, _ = io.Copy(io.Discard, out) }()
			for range lines {
			}
			_ = cmd.Wait()
		}()
		for l := range lines {
			if strings.HasPrefix(l, "gseproc agent 0:127.0.0.1: supervising") {
				exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid))
				if err != nil {
					t.Fatal(err)
				}
				return exe, errb.String()
			}
		}
		t.Fatalf("%s: the agent never said it supervises; stderr:\n%s", name, errb.String())
		return "", ""
	}

	build(Version)
	if exe, errOut := runs("same"); exe != agentBin {
		t.Errorf("beside a gseproc-agent of its version, gseproc agent runs %s, want %s; stderr:\n%s", exe, agentBin, errOut)
	}
	if exe, errOut := runs("inprocess", AgentInProcessEnv+"=1"); exe != gseproc || strings.Contains(errOut, "not using") {
		t.Errorf("with %s=1, gseproc agent runs %s, want %s, silently; stderr:\n%s", AgentInProcessEnv, exe, gseproc, errOut)
	}
	build(Version + "-other")
	if exe, errOut := runs("other"); exe != gseproc || !strings.Contains(errOut, "not using "+agentBin) || !strings.Contains(errOut, Version+"-other") {
		t.Errorf("beside a gseproc-agent of another version, gseproc agent runs %s, want %s, saying why; stderr:\n%s", exe, gseproc, errOut)
	}
}

// copyFile copies src to dst, executable.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
