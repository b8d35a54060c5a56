package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"gseproc/backend/agent/agentcmd"
)

// runAgent runs the host agent in this process (agentcmd.Run): `gseproc
// agent --config FILE`. The gseproc binary itself execs gseproc-agent
// instead when it can (ExecAgent).
func runAgent(ctx context.Context, args []string, io Stdio) error {
	return agentcmd.Run(ctx, args, io)
}

// AgentBinary is the agent's own binary (backend/agent/cmd/gseproc-agent),
// installed beside gseproc: the agent alone, a fraction of gseproc's code
// mapped (issue 13: an idle agent's RSS).
const AgentBinary = "gseproc-agent"

// AgentInProcessEnv, set to 1, keeps `gseproc agent` in the gseproc
// process even when gseproc-agent is installed beside it.
const AgentInProcessEnv = "GSEPROC_AGENT_INPROCESS"

// ExecAgent replaces this process with gseproc-agent when args (without
// the program name) are `agent ...`, gseproc-agent lies beside this
// executable, is as private as it (same owner, writable by no one else)
// and says it is of this version (Version); the agent's arguments are
// handed on. Otherwise it returns and the agent runs in this process
// (runAgent), saying on w why when gseproc-agent is there but not used.
// Only a binary's main calls it: in a test or an embedding, cli.Main runs
// the agent in process.
func ExecAgent(args []string, w io.Writer) {
	if len(args) == 0 || args[0] != "agent" || os.Getenv(AgentInProcessEnv) == "1" {
		return
	}
	self, err := os.Executable()
	if err != nil {
		return
	}
	bin := filepath.Join(filepath.Dir(self), AgentBinary)
	if _, err := os.Lstat(bin); errors.Is(err, os.ErrNotExist) {
		return
	}
	if err := agentBinaryUsable(self, bin, Version); err != nil {
		fmt.Fprintf(w, "gseproc agent: not using %s: %v; the agent runs inside gseproc\n", bin, err)
		return
	}
	err = execBinary(bin, append([]string{bin}, args[1:]...), os.Environ())
	fmt.Fprintf(w, "gseproc agent: exec %s: %v; the agent runs inside gseproc\n", bin, err)
}

// agentBinaryUsable says why bin may not stand in for self's agent, or
// nil: it must be a regular file, owned by self's owner, writable by no
// one else, and `bin version` must answer "gseproc-agent <version>".
func agentBinaryUsable(self, bin, version string) error {
	if err := sameOwnerPrivate(self, bin); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return fmt.Errorf("%s version: %w", AgentBinary, err)
	}
	got := strings.TrimSpace(string(out))
	if want := AgentBinary + " " + version; got != want {
		return fmt.Errorf("it is %q, not %q", got, want)
	}
	return nil
}
