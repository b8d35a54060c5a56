package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDemoHeadless(t *testing.T) {
	code, out, errOut := run(t, "demo", "--headless", filepath.Join("..", "..", "testdata", "scenarios", "partition-heal.toml"))
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{`scenario "partition heals" (seed 23, 400 hosts)`, "took", "offline", "back online", "restored", "op status on db:mysqld", "done:", "hosts 400, offline 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(bad, []byte("name = \"x\"\n[[step]]\nat = \"later\"\naction = \"offline\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "demo", "--headless", bad); code != 2 || !strings.Contains(errOut, "step[0].at") {
		t.Fatalf("bad scenario: exit %d: %s", code, errOut)
	}
	if code, _, errOut := run(t, "demo", filepath.Join("..", "..", "testdata", "scenarios", "crash-storm.toml")); code != 1 || !strings.Contains(errOut, "terminal") {
		t.Fatalf("live demo without a terminal: exit %d: %s", code, errOut)
	}
}
