//go:build linux

package agent

import (
	"strings"
	"testing"

	"gseproc/model"
)

// TestWindowsScriptsOnLinux: a process whose cmd_shell_ext is bat or ps1
// (a Windows host's, setup_path and pid_path like C:\gse\plugins\bin) sent
// to a Linux agent: every op that would run or host it answers 65535 "not
// supported on this OS", status and the no-op answers still work, nothing
// is hosted; the simulator answers the same.
func TestWindowsScriptsOnLinux(t *testing.T) {
	t.Parallel()
	execs := map[string]executor{"simulator": newSimExec(t), "agent": &agentExec{a: newAgent(t, "")}}
	for name, ex := range execs {
		for _, ext := range []string{"bat", "ps1"} {
			t.Run(name+"/"+ext, func(t *testing.T) {
				p, _ := setup(t, "win"+ext, nil)
				p.Spec.Control.ShellExt = ext
				p.Spec.Control.StartCmd = `C:\gse\plugins\bin\start.` + ext + " basereport"
				p.Spec.Control.RestartCmd = `C:\gse\plugins\bin\restart.` + ext + " basereport"
				p.Spec.Identity.SetupPath = `C:\gse\plugins\bin`
				p.Spec.Identity.PidPath = `C:\gse\plugins\bin\run\basereport.pid`
				steps := []struct {
					op   model.OpType
					code int
				}{
					{model.OpStart, model.CodeCommandFailed},
					{model.OpRegister, model.CodeCommandFailed},
					{model.OpRestart, model.CodeCommandFailed},
					{model.OpStatus, model.CodeSuccess},
					{model.OpStop, model.CodeNotRunning},
					{model.OpKill, model.CodeNotRunning},
					{model.OpUnregister, model.CodeNotRunning},
				}
				for _, s := range steps {
					r := ex.do(t, s.op, p, 0)
					if r.Code != s.code {
						t.Fatalf("%s: code %d (%s), want %d", s.op, r.Code, r.Message, s.code)
					}
					if s.code == model.CodeCommandFailed && !strings.Contains(r.Message, "cmd_shell_ext "+ext+" is not supported on this OS") {
						t.Fatalf("%s: message %q does not say the OS cannot run %s", s.op, r.Message, ext)
					}
				}
				st := ex.do(t, model.OpStatus, p, 0).Status
				if st == nil || st.Hosted || st.State.Up() {
					t.Fatalf("after the refusals: %+v, want not hosted, not running", st)
				}
			})
		}
	}
}
