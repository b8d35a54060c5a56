package cli

import (
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
