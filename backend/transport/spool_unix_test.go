//go:build unix

package transport

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"gseproc/model"
)

// TestSpoolPartialWriteCutOff: a write of the spool that fails half-way
// (a disk full, a file size limit) leaves no torn line behind: the next
// event's line would be glued to it and lost at the next start. The
// failing write happens in a child process under RLIMIT_FSIZE.
func TestSpoolPartialWriteCutOff(t *testing.T) {
	ev := func(id string, n int) model.Event {
		return model.Event{ID: id, Host: h1, ProcKey: "ns:p", Kind: model.EventRestartSuccess, Message: strings.Repeat("m", n)}
	}
	if dir := os.Getenv("GSEPROC_TEST_SPOOL_DIR"); dir != "" {
		sp, _, err := openSpool(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := sp.writeEvents([]model.Event{ev("a-1", 10)}); err != nil {
			t.Fatal(err)
		}
		var old syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
			t.Fatal(err)
		}
		lim := old
		lim.Cur = uint64(sp.size) + 100
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
			t.Skip("cannot set RLIMIT_FSIZE:", err)
		}
		werr := sp.writeEvents([]model.Event{ev("a-2", 4000)})
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
			t.Fatal(err)
		}
		if werr == nil {
			t.Fatal("a write past RLIMIT_FSIZE succeeded")
		}
		if err := sp.writeEvents([]model.Event{ev("a-3", 10)}); err != nil {
			t.Fatal(err)
		}
		_ = sp.close()
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSpoolPartialWriteCutOff$", "-test.v")
	cmd.Env = append(os.Environ(), "GSEPROC_TEST_SPOOL_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "SKIP") {
		t.Skipf("child skipped:\n%s", out)
	}
	_, pending, err := openSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range pending {
		ids = append(ids, e.ID)
	}
	if strings.Join(ids, ",") != "a-1,a-3" {
		t.Fatalf("pending after a failed write: %q, want a-1,a-3 (a-2 was never kept)", ids)
	}
}
