package server

import (
	"net/http"
	"strings"
	"testing"

	"gseproc/backend"
	"gseproc/model"
)

// TestPolicyAbsentIsDefaultZeroIsZero: at every entrance of the API, a
// policy field a definition leaves out takes its documented default and
// one given as 0 is stored as 0 (it used to become 5, 4 or 10): the native
// save, the native operate's inline items and the GSE meta form;
// op_timeout 0 is refused naming the field.
func TestPolicyAbsentIsDefaultZeroIsZero(t *testing.T) {
	e := newEnv(t, testConfig())
	def := func(name, policy string) string {
		return `{"process": {"meta": {"namespace": "zero", "name": "` + name + `"}, "spec": {
			"identity": {"proc_name": "` + name + `", "setup_path": "/opt/z", "pid_path": "/opt/z/` + name + `.pid"},
			"control": {"start_cmd": "./start.sh", "stop_cmd": "./stop.sh"}` + policy + `}},
			"hosts": [{"ip": "10.0.0.1", "bk_cloud_id": 0}]}`
	}
	zeros := `, "monitor_policy": {"auto_type": 1, "start_check_secs": 0, "start_retries": 0, "start_interval": 0}`
	for name, body := range map[string]string{
		"absent": def("absent", `, "monitor_policy": {"auto_type": 1}`),
		"zeros":  def("zeros", zeros),
	} {
		if r := e.do(http.MethodPost, "/api/v1/processes", []byte(body), nil); !r.Result {
			t.Fatalf("save %s: %d %s", name, r.Code, r.Message)
		}
	}
	r := e.do(http.MethodPost, "/api/v1/processes", []byte(def("notime", `, "monitor_policy": {"auto_type": 1, "op_timeout": 0}`)), nil)
	if r.Result || !strings.Contains(r.Message, "process.spec.monitor_policy.op_timeout: 0 leaves no time") {
		t.Fatalf("op_timeout 0 saved: %v %s", r.Result, r.Message)
	}
	// Inline items of a native operate (start: they are saved).
	items := `{"op_type": 0, "items": [` + def("item-absent", `, "monitor_policy": {"auto_type": 1}`) + `, ` + def("item-zeros", zeros) + `]}`
	if r := e.do(http.MethodPost, "/api/v1/operate", []byte(items), nil); !r.Result {
		t.Fatalf("operate with items: %d %s", r.Code, r.Message)
	}
	// The GSE meta form.
	spec := specWire("meta-zeros", "./start.sh")
	spec["monitor_policy"] = map[string]any{"auto_type": 1, "start_check_secs": 0, "start_retries": 0, "start_interval": 0}
	reg := withAuth(map[string]any{"meta": map[string]any{"namespace": "zero", "name": "meta-zeros"},
		"hosts": []any{map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 0}}, "spec": spec})
	if r := e.post(gseBase+"register_proc_info/", reg); !r.Result {
		t.Fatalf("register: %d %s", r.Code, r.Message)
	}

	defs, err := e.eng.Processes(t.Context(), backend.ProcQuery{Namespace: "zero"})
	if err != nil || len(defs) != 5 {
		t.Fatalf("definitions %d (%v)", len(defs), err)
	}
	for _, d := range defs {
		pol := d.Process.Spec.Policy
		want := model.DefaultPolicy()
		want.AutoType = model.AutoResident
		if strings.HasSuffix(d.Process.Meta.Name, "zeros") {
			want.StartCheckSecs, want.StartRetries, want.StartInterval = 0, 0, 0
		}
		if pol != want {
			t.Errorf("%s stored with policy %+v, want %+v", d.Process.Key(), pol, want)
		}
	}
}
