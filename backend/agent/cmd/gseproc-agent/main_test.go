package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// forbidden are the packages (a trailing / : and those under it) the
// agent's binary must not link.
var forbidden = []string{
	"github.com/charmbracelet/",       // bubbletea, lipgloss, wish
	"github.com/nats-io/nats-server/", // the embedded server (natsembed)
	"gseproc/backend/transport/natsembed",
	"gseproc/ui/", "gseproc/theme/", "gseproc/backend/cli",
	"gseproc/backend/engine/", "gseproc/backend/store/", "gseproc/backend/server/",
	"gseproc/backend/node/", "gseproc/backend/simulator/", "gseproc/backend/scenario/",
	"gseproc/backend/client/", "gseproc/backend/health/", "gseproc/backend/sshconsole/",
	"gseproc/backend/bench/",
}

// deps are the packages pkg links.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps", "-f", "{{.ImportPath}}", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

// forbiddenIn are the forbidden packages among ds.
func forbiddenIn(ds []string) []string {
	var bad []string
	for _, d := range ds {
		for _, f := range forbidden {
			if d == strings.TrimSuffix(f, "/") || strings.HasSuffix(f, "/") && strings.HasPrefix(d, f) {
				bad = append(bad, d)
				break
			}
		}
	}
	return bad
}

// TestAgentBinaryImports keeps gseproc-agent small: what it links is the
// agent, the client side of the transport and the config (issue 13: an
// idle agent's RSS is mostly the binary's pages it maps), never the
// engine, the store, the server, the NATS server, the console or their
// libraries.
func TestAgentBinaryImports(t *testing.T) {
	ds := deps(t, "gseproc/backend/agent/cmd/gseproc-agent")
	for _, want := range []string{"gseproc/backend/agent", "gseproc/backend/agent/agentcmd", "gseproc/backend/transport", "github.com/nats-io/nats.go"} {
		if !slices.Contains(ds, want) {
			t.Errorf("gseproc-agent does not link %s: is this the agent?", want)
		}
	}
	if bad := forbiddenIn(ds); len(bad) > 0 {
		t.Errorf("gseproc-agent links %v", bad)
	}
	// The check sees them where they are: in gseproc.
	inGseproc := forbiddenIn(deps(t, "gseproc"))
	for _, want := range []string{"github.com/charmbracelet/bubbletea", "github.com/nats-io/nats-server/v2/server", "gseproc/backend/transport/natsembed", "gseproc/backend/engine", "gseproc/backend/cli", "gseproc/ui"} {
		if !slices.Contains(inGseproc, want) {
			t.Errorf("the check does not find %s in gseproc", want)
		}
	}
}
