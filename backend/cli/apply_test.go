package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gseproc/model"
)

// TestApplyPolicyAbsentIsDefaultZeroIsZero: a definition file's policy
// fields take their documented defaults where it leaves them out and keep
// a 0 it gives (one definition or an array), and a field nobody knows is
// still refused inside the spec.
func TestApplyPolicyAbsentIsDefaultZeroIsZero(t *testing.T) {
	def := func(name, policy string) string {
		return `{"process": {"meta": {"namespace": "zero", "name": "` + name + `"}, "spec": {
			"identity": {"proc_name": "` + name + `", "setup_path": "/opt/z", "pid_path": "/opt/z/z.pid"},
			"control": {"start_cmd": "./start.sh"}` + policy + `}},
			"hosts": [{"ip": "10.0.0.1", "bk_cloud_id": 0}]}`
	}
	read := func(s string) ([]model.ProcessDef, error) {
		return readDefs("-", Stdio{In: strings.NewReader(s)})
	}
	absent := model.DefaultPolicy()
	absent.AutoType = model.AutoResident
	zeros := absent
	zeros.StartCheckSecs, zeros.StartRetries, zeros.StartInterval = 0, 0, 0
	zeroJSON := `, "monitor_policy": {"auto_type": 1, "start_check_secs": 0, "start_retries": 0, "start_interval": 0}`
	for _, tc := range []struct {
		in   string
		want []model.Policy
	}{
		{def("a", `, "monitor_policy": {"auto_type": 1}`), []model.Policy{absent}},
		{def("z", zeroJSON), []model.Policy{zeros}},
		{"[" + def("z", zeroJSON) + ", " + def("a", `, "monitor_policy": {"auto_type": 1}`) + "]", []model.Policy{zeros, absent}},
	} {
		defs, err := read(tc.in)
		if err != nil || len(defs) != len(tc.want) {
			t.Fatalf("%d definitions (%v), want %d", len(defs), err, len(tc.want))
		}
		for i, d := range defs {
			if d.Process.Spec.Policy != tc.want[i] {
				t.Errorf("definition %d: policy %+v, want %+v", i, d.Process.Spec.Policy, tc.want[i])
			}
		}
	}
	// No policy at all: every default but auto_type (which has none).
	defs, err := read(def("n", ""))
	if err != nil || defs[0].Process.Spec.Policy != model.DefaultPolicy() {
		t.Fatalf("no monitor_policy: %+v (%v)", defs, err)
	}
	for _, bad := range []string{def("u", `, "monitor_policy": {"auto_type": 1, "start_chek_secs": 0}`), "[" + def("u", `, "nonsense": 1`) + "]"} {
		if _, err := read(bad); err == nil || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("unknown field accepted: %v", err)
		}
	}
}

// TestApplyNameRule: apply refuses a file with a name the name rule
// refuses (model.CheckDefName), naming it, and saves none of the file.
func TestApplyNameRule(t *testing.T) {
	def := func(name string) string {
		return `{"process": {"meta": {"namespace": "names", "name": "` + name + `"}, "spec": {
			"identity": {"proc_name": "p", "setup_path": "/opt/p", "pid_path": "/opt/p/p.pid"},
			"control": {"start_cmd": "./start.sh"}, "monitor_policy": {"auto_type": 1}}},
			"hosts": [{"ip": "10.0.0.1", "bk_cloud_id": 0}]}`
	}
	file := filepath.Join(t.TempDir(), "defs.json")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("[" + def("proc-test-1") + ", " + def("my app!") + ", " + def("a:b") + "]")
	code, out, errOut := run(t, "apply", file, "--dry-run")
	if code != 2 || out != "" || !strings.Contains(errOut, "nothing saved") {
		t.Fatalf("exit %d, want 2 and nothing saved:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{`[1].process.meta.name: "my app!": character ' '`, `[2].process.meta.name: "a:b": character ':'`} {
		if !strings.Contains(errOut, want) {
			t.Errorf("no %q in:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "[0].") {
		t.Errorf("the conforming name is refused:\n%s", errOut)
	}
	write(def("nginx_1"))
	if code, out, errOut := run(t, "apply", file, "--dry-run"); code != 0 || !strings.Contains(out, "would save names:nginx_1") {
		t.Fatalf("a conforming name: exit %d\n%s%s", code, out, errOut)
	}
}
