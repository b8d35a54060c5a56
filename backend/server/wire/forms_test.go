package wire

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gseproc/model"
)

func ptr[T any](v T) *T { return &v }

func TestProcessInfoForms(t *testing.T) {
	scope := Scope{Type: ScopeBiz, ID: "1"}
	// Seed 002 (operate_proc v1): commands synthesised.
	v1 := ProcessInfo{SetupPath: "/usr/local/xxx", ProcName: "gseagent", PidPath: "/usr/local/xxx", Account: "root",
		CmdShellExt: "bat", CPULmt: ptr(50.0), MemLmt: ptr(30.0), IPList: []Host{{IP: "10.0.0.1"}}}
	p := v1.ToProcess(FormOperateProc, scope)
	assert.Equal(t, "biz_1", p.Meta.Namespace)
	assert.Equal(t, "/usr/local/xxx/gseagent", p.Meta.Name)
	assert.Equal(t, "start.bat gseagent", p.Spec.Control.StartCmd)
	assert.Equal(t, model.AutoResident, p.Spec.Policy.AutoType)
	assert.Equal(t, 10, p.Spec.Policy.OpTimeout)
	v1.CmdShellExt = ""
	p = v1.ToProcess(FormOperateProc, scope)
	assert.Equal(t, "./start.sh gseagent &", p.Spec.Control.StartCmd)
	assert.Equal(t, "", p.Spec.Control.KillCmd)

	// Seed 000 (operate_process v2): pass-through, no type -> resident, defaults.
	v2 := ProcessInfo{SetupPath: "/usr/local/xxx", ProcName: "gseagent", PidPath: "/usr/local/xxx", Account: "root",
		Contact: "root", CPULmt: ptr(50.0), MemLmt: ptr(30.0), IPList: []Host{{IP: "10.0.0.1"}}}
	p = v2.ToProcess(FormOperateProcess, Scope{Type: ScopeBiz, ID: "1"})
	assert.Equal(t, model.AutoResident, p.Spec.Policy.AutoType)
	assert.Equal(t, model.DefaultOpTimeout, p.Spec.Policy.OpTimeout)
	assert.Equal(t, "root", p.Spec.Identity.Contact)
	require.NoError(t, p.Validate(""))

	// Seed 001 (manage_proc): value_key names the definition.
	mp := ProcessInfo{ProcName: "nginx", ProcOwner: "root", SetupPath: "/data/home/nginx/bin/", PidPath: "/data/var/run/nginx/",
		ValueKey: "key_test", Type: ptr(2), CPULmt: ptr(20.0), MemLmt: ptr(30.0), CycleTime: ptr(10), InstanceNum: ptr(2),
		StartCheckBeginTime: ptr(5), StartCheckEndTime: ptr(5), OpTimeout: ptr(5), IPList: []Host{{IP: "10.0.0.1"}}}
	p = mp.ToProcess(FormManageProc, scope)
	assert.Equal(t, "biz_1:key_test", p.Key())
	assert.Equal(t, model.AutoOneShot, p.Spec.Policy.AutoType)
	assert.Equal(t, 2, p.Spec.Policy.InstanceNum)
	assert.Equal(t, 5+5, p.Deadline(model.OpStart))
	v := &model.Validator{}
	ValidateInfos(v, FormManageProc, scope, []ProcessInfo{mp}, 0)
	require.NoError(t, v.Err())

	// Periodic by cycle_time when type is absent.
	per := mp
	per.Type = nil
	assert.Equal(t, model.AutoPeriodic, per.ToProcess(FormOperateProcess, scope).Spec.Policy.AutoType)
}

func TestValidateInfosNamesWireFields(t *testing.T) {
	scope := Scope{Type: ScopeBiz, ID: "1"}
	bad := ProcessInfo{ProcName: "", SetupPath: "relative", PidPath: "", CPULmt: ptr(101.0), Type: ptr(0),
		IPList: []Host{{IP: "300.1.1.1"}}}
	v := &model.Validator{}
	ValidateInfos(v, FormManageProc, scope, []ProcessInfo{validInfo(), bad}, 0)
	fields := v.Errors().Fields()
	for _, want := range []string{"process_infos[1].proc_name", "process_infos[1].setup_path", "process_infos[1].pid_path",
		"process_infos[1].cpu_lmt", "process_infos[1].cycle_time", "process_infos[1].ip_list[0].ip", "process_infos[1].proc_owner"} {
		assert.Contains(t, fields, want)
	}
	for _, f := range fields {
		assert.True(t, strings.HasPrefix(f, "process_infos[1]"), "valid entry 0 reported: %s", f)
	}

	v = &model.Validator{}
	ValidateInfos(v, FormOperateProcess, scope, nil, 0)
	assert.Equal(t, []string{"process_infos"}, v.Errors().Fields())

	v = &model.Validator{}
	ValidateInfos(v, FormOperateProcess, scope, []ProcessInfo{validInfo(), validInfo()}, 1)
	assert.ErrorContains(t, v.Err(), "more than the limit of 1")
}

func validInfo() ProcessInfo {
	return ProcessInfo{ProcName: "a", ProcOwner: "root", SetupPath: "/opt/a", PidPath: "/opt/a/a.pid", IPList: []Host{{IP: "10.0.0.2"}}}
}

func TestScope(t *testing.T) {
	tests := []struct {
		s     Scope
		field string
	}{
		{Scope{ScopeBiz, "1"}, ""},
		{Scope{ScopeBizSet, "7"}, ""},
		{Scope{"team", "1"}, "bk_scope_type"},
		{Scope{ScopeBiz, ""}, "bk_scope_id"},
		{Scope{ScopeBiz, "x"}, "bk_scope_id"},
		{Scope{ScopeBiz, "0"}, "bk_scope_id"},
		{Scope{ScopeBiz, "01"}, "bk_scope_id"},
	}
	for _, tt := range tests {
		v := &model.Validator{}
		tt.s.Validate(v)
		if tt.field == "" {
			assert.NoError(t, v.Err(), tt.s)
		} else {
			assert.Contains(t, v.Errors().Fields(), tt.field, tt.s)
		}
	}
	assert.Equal(t, "biz_set_7", Scope{ScopeBizSet, "7"}.Namespace())
}

func TestMetaForm(t *testing.T) {
	// gse-api.md §4.2: operate_proc_multi element, verbatim.
	raw := `{"meta": {"namespace": "gse", "name": "proc-test-1", "labels": {"proc_name": "proc-test-1"}},
    "op_type": 0, "hosts": [{"ip": "10.0.0.1", "bk_cloud_id": 1}],
    "spec": {
      "identity": {"index_key": "", "proc_name": "proc-test-1", "setup_path": "/data/gsetest/",
                   "pid_path": "/data/gsetest/proc-test-1.pid", "config_path": "/data/gsetest/proc-test-1.conf",
                   "log_path": "/data/gsetest/logs/", "user": "root"},
      "control": {"start_cmd": "./start.sh", "stop_cmd": "./stop.sh", "restart_cmd": "./restart.sh",
                  "reload_cmd": "./reload.sh", "kill_cmd": "./kill.sh", "version_cmd": "./version.sh",
                  "health_cmd": "./health.sh"},
      "alive_monitor_policy": {"auto_type": 1, "start_check_secs": 5, "stop_check_secs": 5,
                               "start_retries": 3, "start_interval": 20, "crotab_rule": ""},
      "warn_report_policy": {"report_id": 0},
      "configmap": [{"path": "", "md5": ""}]}}`
	var r ProcRequest
	require.NoError(t, json.Unmarshal([]byte(raw), &r))
	p := r.ToProcess()
	require.NoError(t, p.Validate(""))
	assert.Equal(t, "gse:proc-test-1", p.Key())
	assert.Equal(t, 3, p.Spec.Policy.StartRetries)
	assert.Equal(t, 20, p.Spec.Policy.StartInterval)
	assert.Equal(t, "./kill.sh", p.Spec.Control.KillCmd)
	v := &model.Validator{}
	hosts := r.Targets(v, "")
	require.NoError(t, v.Err())
	assert.Equal(t, []HostRef{{Host: model.Host{IP: "10.0.0.1", CloudID: 1}}}, hosts)

	r.AgentIDList = []string{"0:10.0.0.2", "bad", "020000000242010A00002F17521298676503", "02xx0000000000000000"}
	v = &model.Validator{}
	hosts = r.Targets(v, "proc_operate_req[0].")
	assert.Equal(t, []HostRef{{Host: model.Host{IP: "10.0.0.2"}}, {}, {AgentID: "020000000242010a00002f17521298676503"}, {}}, hosts)
	assert.Equal(t, []string{"proc_operate_req[0].agent_id_list[1]", "proc_operate_req[0].agent_id_list[3]"}, v.Errors().Fields())
}

func TestContent(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := model.Result{Host: model.Host{IP: "10.0.0.1"}, Op: model.OpStart, Code: 0, Hosted: true, Finished: now,
		Proc: model.ResultProc{ProcName: "nginx", SetupPath: "/usr/local/nginx"}}
	var ctl struct {
		Value []map[string]any `json:"value"`
	}
	require.NoError(t, json.Unmarshal([]byte(Content(r)), &ctl))
	require.Len(t, ctl.Value, 1)
	assert.Equal(t, "nginx", ctl.Value[0]["procName"])
	assert.Equal(t, "success", ctl.Value[0]["result"])
	assert.Equal(t, true, ctl.Value[0]["isAuto"])
	r.Code, r.Message = model.CodePostCheckFailed, "post-check failed"
	require.NoError(t, json.Unmarshal([]byte(Content(r)), &ctl))
	assert.Equal(t, "post-check failed", ctl.Value[0]["result"])
	assert.Empty(t, Content(model.Result{Host: r.Host, Op: model.OpStart, State: model.StateCancelled}), "a result never run has no content")

	r.Op, r.Code, r.Status = model.OpStatus, 0, &model.ProcStatus{State: model.ProcStopped, PID: 0}
	var sc struct {
		IP      string `json:"ip"`
		Process []struct {
			ProcName string           `json:"procname"`
			Instance []map[string]any `json:"instance"`
		} `json:"process"`
	}
	require.NoError(t, json.Unmarshal([]byte(Content(r)), &sc))
	assert.Equal(t, "10.0.0.1", sc.IP)
	assert.Equal(t, "nginx", sc.Process[0].ProcName)
	assert.EqualValues(t, -1, sc.Process[0].Instance[0]["pid"])
	r.Status = &model.ProcStatus{State: model.ProcRunning, PID: 4437, Hosted: true, StartTime: now.Add(-time.Minute)}
	require.NoError(t, json.Unmarshal([]byte(Content(r)), &sc))
	assert.EqualValues(t, 4437, sc.Process[0].Instance[0]["pid"])
	assert.EqualValues(t, 60, sc.Process[0].Instance[0]["elapsedTime"])
	assert.EqualValues(t, now.Unix(), sc.Process[0].Instance[0]["report_time"])
}

func TestSuppliers(t *testing.T) {
	hs := []Host{{IP: "10.0.0.1", CloudID: 1, SupplierID: 2}, {IP: "::FFFF:10.0.0.2", SupplierID: 7}, {IP: "10.0.0.3"}, {IP: "bad", SupplierID: 3}}
	assert.Equal(t, map[string]int{"1:10.0.0.1": 2, "0:10.0.0.2": 7}, Suppliers(nil, hs))
	assert.Nil(t, Suppliers(nil, hs[2:3]), "no supplier, no map")
	v := &model.Validator{}
	got := CanonicalHosts(v, "hosts", []Host{{IP: "10.0.0.1", SupplierID: -2}, {IP: "::ffff:10.0.0.9", CloudID: 3, SupplierID: 9}})
	assert.Equal(t, []string{"hosts[0].bk_supplier_id"}, v.Errors().Fields())
	assert.Equal(t, []model.Host{{}, {IP: "10.0.0.9", CloudID: 3}}, got)
}

// TestNoShellSplicing: the v1 form's synthesised commands carry proc_name
// as one quoted word, and validation refuses a proc_name out of its
// character set.
func TestNoShellSplicing(t *testing.T) {
	hostile := "x;touch pwned;true"
	scope := Scope{Type: ScopeBiz, ID: "1"}
	pi := ProcessInfo{SetupPath: "/opt/a", ProcName: hostile, PidPath: "/opt/a/a.pid", IPList: []Host{{IP: "10.0.0.1"}}}
	p := pi.ToProcess(FormOperateProc, scope)
	assert.Equal(t, `./start.sh 'x;touch pwned;true' &`, p.Spec.Control.StartCmd)
	assert.Equal(t, `./stop.sh 'x;touch pwned;true' &`, p.Spec.Control.StopCmd)
	pi.CmdShellExt = "bat"
	assert.Equal(t, `start.bat "x;touch pwned;true"`, pi.ToProcess(FormOperateProc, scope).Spec.Control.StartCmd)
	v := &model.Validator{}
	ValidateInfos(v, FormOperateProc, scope, []ProcessInfo{pi}, 0)
	assert.Equal(t, []string{"process_infos[0].proc_name"}, v.Errors().Fields())
}

func TestDefaultValueKey(t *testing.T) {
	if k := DefaultValueKey(`C:\gse\bin\`, "basereport"); k != `C:\gse\bin\basereport` {
		t.Errorf("value key %q", k)
	}
	if k := DefaultValueKey(`C:/gse/bin`, "basereport"); k != `C:/gse/bin/basereport` {
		t.Errorf("value key %q", k)
	}
}

// TestPolicyAbsentIsDefaultZeroIsZero: in every form a policy field left
// out takes its documented default and one given as 0 stays 0 (it used to
// become the default); op_timeout and instance_num 0 are refused with the
// wire field and the reason.
func TestPolicyAbsentIsDefaultZeroIsZero(t *testing.T) {
	scope := Scope{Type: ScopeBiz, ID: "1"}
	info := func(js string) ProcessInfo {
		var pi ProcessInfo
		require.NoError(t, json.Unmarshal([]byte(`{"setup_path": "/opt/a", "proc_name": "a", "pid_path": "/opt/a/a.pid",
			"contact": "root", "ip_list": [{"ip": "10.0.0.1", "bk_cloud_id": 0}]`+js+`}`), &pi))
		return pi
	}
	for _, form := range []InfoForm{FormOperateProcess, FormManageProc} {
		pol := info(``).ToProcess(form, scope).Spec.Policy
		assert.Equal(t, model.DefaultStartCheckSecs, pol.StartCheckSecs)
		assert.Equal(t, model.DefaultOpTimeout, pol.OpTimeout)
		assert.Equal(t, 1, pol.InstanceNum)
		assert.Equal(t, model.DefaultStartRetries, pol.StartRetries)
		assert.Equal(t, model.DefaultStartInterval, pol.StartInterval)
		assert.Zero(t, info(`, "start_check_begin_time": 0`).ToProcess(form, scope).Spec.Policy.StartCheckSecs, "form %d", form)
	}
	// operate_proc (v1) has its own defaults for what is absent, and a 0
	// given is 0 there too.
	assert.Equal(t, 5, info(``).ToProcess(FormOperateProc, scope).Spec.Policy.StartCheckSecs)
	assert.Zero(t, info(`, "start_check_begin_time": 0`).ToProcess(FormOperateProc, scope).Spec.Policy.StartCheckSecs)
	for _, js := range []string{`, "op_timeout": 0`, `, "instance_num": 0`} {
		v := &model.Validator{}
		ValidateInfos(v, FormOperateProcess, scope, []ProcessInfo{info(js)}, 0)
		field := "process_infos[0]." + strings.Split(js, `"`)[1]
		require.Contains(t, v.Errors().Fields(), field, js)
		assert.Contains(t, v.Err().Error(), "leave it out for", js)
	}

	// The meta form: monitor_policy and alive_monitor_policy alike.
	meta := func(js string) model.Process {
		var r ProcRequest
		require.NoError(t, json.Unmarshal([]byte(`{"meta": {"namespace": "web", "name": "a"}, "spec": {
			"identity": {"proc_name": "a", "setup_path": "/opt/a", "pid_path": "/opt/a/a.pid"}`+js+`}}`), &r))
		return r.ToProcess()
	}
	for _, absent := range []string{``, `, "monitor_policy": {}`, `, "alive_monitor_policy": {"auto_type": 1}`} {
		pol := meta(absent).Spec.Policy
		want := model.DefaultPolicy()
		want.AutoType = model.AutoResident
		assert.Equal(t, want, pol, absent)
	}
	for _, key := range []string{"monitor_policy", "alive_monitor_policy"} {
		pol := meta(`, "` + key + `": {"start_check_secs": 0, "start_retries": 0, "start_interval": 0, "op_timeout": 9}`).Spec.Policy
		assert.Zero(t, pol.StartCheckSecs, key)
		assert.Zero(t, pol.StartRetries, key)
		assert.Zero(t, pol.StartInterval, key)
		assert.Equal(t, 9, pol.OpTimeout, key)
	}
	p := meta(`, "monitor_policy": {"op_timeout": 0}`)
	err := p.Validate("")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.monitor_policy.op_timeout: 0 leaves no time")
}
