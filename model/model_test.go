package model

import (
	"cmp"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func validProcess() Process {
	pol := DefaultPolicy()
	pol.AutoType = AutoResident
	return Process{
		Meta: Meta{Namespace: "web", Name: "nginx", Labels: map[string]string{"app": "nginx"}},
		Spec: Spec{
			Identity: Identity{ProcName: "nginx", SetupPath: "/usr/local/nginx", PidPath: "/var/run/nginx.pid", User: "www"},
			Control:  Control{StartCmd: "./start.sh", StopCmd: "./stop.sh", ShellExt: "sh"},
			Resource: Resource{CPU: 30, Mem: 10},
			Policy:   pol,
		},
	}
}

// manyLabels is n valid labels.
func manyLabels(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("k%03d", i)] = "v"
	}
	return m
}

func TestProcessValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *Process)
		field  string // "" = valid
		reason string
	}{
		{"valid", func(p *Process) {}, "", ""},
		{"namespace required", func(p *Process) { p.Meta.Namespace = "" }, "meta.namespace", "required"},
		{"namespace colon", func(p *Process) { p.Meta.Namespace = "a:b" }, "meta.namespace", "':'"},
		{"name required", func(p *Process) { p.Meta.Name = "" }, "meta.name", "required"},
		{"name newline", func(p *Process) { p.Meta.Name = "a\nb" }, "meta.name", "newline"},
		{"name NUL", func(p *Process) { p.Meta.Name = "a\x00b" }, "meta.name", "NUL"},
		{"name blank", func(p *Process) { p.Meta.Name = "   " }, "meta.name", "blank"},
		{"label key with =", func(p *Process) { p.Meta.Labels = map[string]string{"a=b": "c"} }, "meta.labels[a=b]", "'='"},
		{"labels at the bound", func(p *Process) { p.Meta.Labels = manyLabels(MaxLabels) }, "", ""},
		{"labels past the bound", func(p *Process) { p.Meta.Labels = manyLabels(MaxLabels + 1) }, "meta.labels", "more than 64"},
		{"proc_name required", func(p *Process) { p.Spec.Identity.ProcName = "" }, "spec.identity.proc_name", "required"},
		{"proc_name path", func(p *Process) { p.Spec.Identity.ProcName = "bin/nginx" }, "spec.identity.proc_name", "not allowed"},
		{"setup_path required", func(p *Process) { p.Spec.Identity.SetupPath = "" }, "spec.identity.setup_path", "required"},
		{"setup_path relative", func(p *Process) { p.Spec.Identity.SetupPath = "usr/local" }, "spec.identity.setup_path", "absolute"},
		{"setup_path newline", func(p *Process) { p.Spec.Identity.SetupPath = "/usr/\nlocal" }, "spec.identity.setup_path", "newline"},
		{"pid_path required", func(p *Process) { p.Spec.Identity.PidPath = "" }, "spec.identity.pid_path", "required"},
		{"pid_path NUL", func(p *Process) { p.Spec.Identity.PidPath = "/run/\x00x.pid" }, "spec.identity.pid_path", "NUL"},
		{"config_path relative", func(p *Process) { p.Spec.Identity.ConfigPath = "etc/x.conf" }, "spec.identity.config_path", "absolute"},
		{"log_path relative", func(p *Process) { p.Spec.Identity.LogPath = "logs" }, "spec.identity.log_path", "absolute"},
		{"user with space", func(p *Process) { p.Spec.Identity.User = "a b" }, "spec.identity.user", "account"},
		{"command NUL", func(p *Process) { p.Spec.Control.StopCmd = "kill\x00" }, "spec.control.stop_cmd", "NUL"},
		{"shell ext", func(p *Process) { p.Spec.Control.ShellExt = "cmd" }, "spec.control.cmd_shell_ext", "sh, bat, ps1"},
		{"cpu over 100", func(p *Process) { p.Spec.Resource.CPU = 101 }, "spec.resource.cpu", "out of range"},
		{"cpu negative", func(p *Process) { p.Spec.Resource.CPU = -1 }, "spec.resource.cpu", "out of range"},
		{"mem over 100", func(p *Process) { p.Spec.Resource.Mem = 100.5 }, "spec.resource.mem", "out of range"},
		{"mem 100 ok", func(p *Process) { p.Spec.Resource.Mem = 100 }, "", ""},
		{"auto type 3", func(p *Process) { p.Spec.Policy.AutoType = 3 }, "spec.monitor_policy.auto_type", "not one of"},
		{"periodic needs cycle", func(p *Process) { p.Spec.Policy.AutoType = AutoPeriodic }, "spec.monitor_policy.cycle_time", "required"},
		{"periodic with cycle", func(p *Process) { p.Spec.Policy.AutoType = AutoPeriodic; p.Spec.Policy.CycleTime = 60 }, "", ""},
		{"negative retries", func(p *Process) { p.Spec.Policy.StartRetries = -1 }, "spec.monitor_policy.start_retries", ">= 0"},
		{"negative check", func(p *Process) { p.Spec.Policy.StartCheckSecs = -2 }, "spec.monitor_policy.start_check_secs", ">= 0"},
		{"op_timeout huge", func(p *Process) { p.Spec.Policy.OpTimeout = MaxOpTimeout + 1 }, "spec.monitor_policy.op_timeout", "out of range"},
		{"instance_num huge", func(p *Process) { p.Spec.Policy.InstanceNum = MaxInstanceNum + 1 }, "spec.monitor_policy.instance_num", "out of range"},
		{"op_timeout 0", func(p *Process) { p.Spec.Policy.OpTimeout = 0 }, "spec.monitor_policy.op_timeout", "leave it out for 60"},
		{"instance_num 0", func(p *Process) { p.Spec.Policy.InstanceNum = 0 }, "spec.monitor_policy.instance_num", "leave it out for 1"},
		{"start check 0", func(p *Process) { p.Spec.Policy.StartCheckSecs = 0 }, "", ""},
		{"start retries 0", func(p *Process) { p.Spec.Policy.StartRetries = 0 }, "", ""},
		{"start interval 0", func(p *Process) { p.Spec.Policy.StartInterval = 0 }, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validProcess()
			tt.mutate(&p)
			err := p.Validate("")
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			var ve ValidationError
			require.ErrorAs(t, err, &ve)
			found := false
			for _, fe := range ve {
				if fe.Field == tt.field && strings.Contains(fe.Reason, tt.reason) {
					found = true
				}
			}
			assert.True(t, found, "want %s: ...%s..., got %v", tt.field, tt.reason, ve)
		})
	}
}

func TestValidateCollectsEveryError(t *testing.T) {
	p := Process{}
	p.Spec.Resource.CPU = 500
	p.Spec.Policy.AutoType = AutoPeriodic
	err := p.Validate("items[3]")
	var ve ValidationError
	require.ErrorAs(t, err, &ve)
	fields := ve.Fields()
	for _, want := range []string{"items[3].meta.namespace", "items[3].meta.name", "items[3].spec.identity.proc_name",
		"items[3].spec.identity.setup_path", "items[3].spec.identity.pid_path", "items[3].spec.resource.cpu",
		"items[3].spec.monitor_policy.cycle_time"} {
		assert.Contains(t, fields, want)
	}
	assert.Contains(t, err.Error(), "items[3].spec.resource.cpu: 500 is out of range [0,100]")
}

func TestParseOp(t *testing.T) {
	tests := []struct {
		in   string
		want OpType
		err  string
	}{
		{"start", OpStart, ""}, {"STOP", OpStop, ""}, {"status", OpStatus, ""}, {"check", OpStatus, ""},
		{"register", OpRegister, ""}, {"auto", OpRegister, ""}, {"unregister", OpUnregister, ""},
		{"noauto", OpUnregister, ""}, {"restart", OpRestart, ""}, {"reload", OpReload, ""}, {"kill", OpKill, ""},
		{"0", OpStart, ""}, {"9", OpKill, ""}, {"7", OpRestart, ""},
		{"5", 0, "op_type 5 is not one of"}, {"6", 0, "not one of"}, {"-1", 0, "not one of"},
		{"explode", 0, `unknown op "explode"`},
	}
	for _, tt := range tests {
		got, err := ParseOp(tt.in)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
	assert.Len(t, AllOps(), 8)
	for _, op := range AllOps() {
		assert.NotEmpty(t, op.Describe(), op)
	}
}

func TestManageOp(t *testing.T) {
	op, ok := ManageOp(1).ToOpType()
	assert.True(t, ok)
	assert.Equal(t, OpRegister, op)
	op, ok = ManageOp(2).ToOpType()
	assert.True(t, ok)
	assert.Equal(t, OpUnregister, op)
	_, ok = ManageOp(3).ToOpType()
	assert.False(t, ok)
}

func TestHosts(t *testing.T) {
	h, err := ParseAgentID("1:10.0.0.1")
	require.NoError(t, err)
	assert.Equal(t, Host{IP: "10.0.0.1", CloudID: 1}, h)
	assert.Equal(t, "1:10.0.0.1", h.AgentID())
	h6, err := ParseAgentID("0:fe80::1")
	require.NoError(t, err)
	assert.Equal(t, "fe80::1", h6.IP)
	for _, bad := range []string{"10.0.0.1", "x:10.0.0.1", "-1:10.0.0.1", "0:10.0.0.300", "0:"} {
		_, err := ParseAgentID(bad)
		assert.Error(t, err, bad)
	}
	v := &Validator{}
	Host{IP: "10.0.0", CloudID: -1}.Validate(v, "ip_list[0]")
	assert.Equal(t, []string{"ip_list[0].ip", "ip_list[0].bk_cloud_id"}, v.Errors().Fields())
}

func TestTaskID(t *testing.T) {
	at := time.Date(2018, 3, 15, 18, 5, 51, 0, time.UTC)
	id := FormatTaskID(at, 1000)
	assert.Equal(t, "GSETASK:20180315180551:1000", id)
	got, seq, err := ParseTaskID(id)
	require.NoError(t, err)
	assert.True(t, got.Equal(at))
	assert.EqualValues(t, 1000, seq)
	for _, bad := range []string{"GSETASK:XXXXXXXXXX", "TASK:20180315180551:1", "GSETASK:20180315180551:x", "GSETASK:2018:1"} {
		_, _, err := ParseTaskID(bad)
		assert.Error(t, err, bad)
	}
}

func TestCodesAndStates(t *testing.T) {
	tests := []struct {
		op   OpType
		code int
		want ResultState
	}{
		{OpStart, CodeSuccess, StateSuccess},
		{OpStart, CodeAlreadyRunning, StateSuccess},
		{OpStop, CodeAlreadyRunning, StateFailed},
		{OpStop, CodeNotRunning, StateSuccess},
		{OpKill, CodeNotRunning, StateSuccess},
		{OpStart, CodeNotRunning, StateFailed},
		{OpRegister, CodeAlreadyRegistered, StateSuccess},
		{OpStart, CodePostCheckFailed, StateFailed},
		{OpStart, CodeCommandFailed, StateFailed},
		{OpStart, CodeAgentAbnormal, StateUnreachable},
		{OpStart, CodeTimeout, StateTimeout},
		{OpStatus, CodeRunning, StateRunning},
		{OpRestart, CodeIllegalOp, StateFailed},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, StateForCode(tt.op, tt.code), "%s %d", tt.op, tt.code)
	}
	for st, final := range map[TaskStatus]bool{TaskPending: false, TaskRunning: false, TaskDone: true, TaskFailed: true, TaskCanceled: true} {
		assert.Equal(t, final, st.Final(), st)
	}
	var c Counts
	c.Add(StateSuccess, 3)
	c.Add(StateFailed, 1)
	c.Add(StateTimeout, 1)
	c.Add(StatePending, 2)
	assert.Equal(t, 5, c.Final())
	assert.Equal(t, 2, c.Bad())
	assert.Equal(t, 7, c.Total())
}

func TestLabels(t *testing.T) {
	k, v, err := ParseLabel("app = nginx")
	require.NoError(t, err)
	assert.Equal(t, "app", k)
	assert.Equal(t, "nginx", v)
	_, _, err = ParseLabel("nginx")
	assert.Error(t, err)
	assert.True(t, MatchLabels(map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1"}))
	assert.False(t, MatchLabels(map[string]string{"a": "1"}, map[string]string{"a": "2"}))
	assert.Equal(t, []string{"a=1", "b=2"}, SortedLabels(map[string]string{"b": "2", "a": "1"}))
}

func TestMetaValidate(t *testing.T) {
	v := &Validator{}
	Meta{Namespace: "a:b"}.ValidateInto(v, "proc_operate_req[1]", false)
	assert.Equal(t, []string{"proc_operate_req[1].meta.namespace"}, v.Errors().Fields())
	v = &Validator{}
	Meta{Namespace: "gse"}.ValidateInto(v, "", true)
	assert.Equal(t, []string{"meta.name"}, v.Errors().Fields())
	v = &Validator{}
	Meta{Namespace: "gse", Labels: map[string]string{"a=b": "x"}}.ValidateInto(v, "", false)
	assert.NoError(t, v.Err(), "labels are checked with the definition, not here")
}

func TestBackoff(t *testing.T) {
	const ms = time.Millisecond
	b := Backoff{Base: 100 * ms, Max: time.Second, Jitter: 0.2, Immediate: true}
	tests := []struct {
		b    Backoff
		k    int
		r    float64
		want time.Duration
	}{
		{b, 0, 0.5, 0},
		{b, 1, 0.5, 100 * ms},
		{b, 2, 0.5, 200 * ms},
		{b, 3, 0.5, 400 * ms},
		{b, 10, 0.5, time.Second},
		{b, 10, 0.999, time.Second}, // the cap holds after the jitter
		{b, 10, 0, 800 * ms},
		{b, 1, 0, 80 * ms},
		{b, 1, 1, 120 * ms},
		{Backoff{Base: 100 * ms, Max: time.Second, Jitter: 0.2}, 0, 0.5, 100 * ms},
		{Backoff{Base: 100 * ms, Max: time.Second, Jitter: 0.2}, 1, 0.5, 200 * ms},
		{Backoff{Base: 100 * ms, Max: time.Second, Jitter: 0.2}, 60, 0.5, time.Second},
		{Backoff{Base: 100 * ms}, 5, 0.7, 3200 * ms}, // no cap, no jitter
	}
	for _, tc := range tests {
		if got := tc.b.Delay(tc.k, tc.r); got != tc.want {
			t.Errorf("%+v.Delay(%d, %v) = %s, want %s", tc.b, tc.k, tc.r, got, tc.want)
		}
	}
}

func TestHostOrder(t *testing.T) {
	// Listed in order.
	hosts := []Host{
		{CloudID: 0, IP: "10.0.0.2"},
		{CloudID: 0, IP: "10.0.0.10"},
		{CloudID: 0, IP: "10.0.1.1"},
		{CloudID: 0, IP: "192.168.0.1"},
		{CloudID: 0, IP: "::1"},
		{CloudID: 0, IP: "fe80::1"},
		{CloudID: 0, IP: "not-an-address"},
		{CloudID: 1, IP: "10.0.0.1"},
		{CloudID: 2, IP: "9.9.9.9"},
	}
	for i := range hosts {
		for j := range hosts {
			if got, want := CompareHosts(hosts[i], hosts[j]), cmp.Compare(i, j); got != want {
				t.Errorf("CompareHosts(%s, %s) = %d, want %d", hosts[i], hosts[j], got, want)
			}
		}
	}
	if CompareHosts(Host{IP: "::ffff:10.0.0.2"}, Host{IP: "10.0.0.2"}) != 0 {
		t.Error("an IPv4-mapped address is the IPv4 address")
	}
}

// TestValidateAllocates: a valid definition is validated without making
// its field names (a label's name is the one made); one with errors still
// names them under the prefix (TestValidateCollectsEveryError).
func TestValidateAllocates(t *testing.T) {
	p := validProcess()
	require.NoError(t, p.Validate("process"))
	n := testing.AllocsPerRun(100, func() { _ = p.Validate("process") })
	assert.LessOrEqual(t, n, 2.0, "allocations per Validate of a valid definition with one label")
	p.Spec.Identity.PidPath = "run/x.pid"
	err := p.Validate("process")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `process.spec.identity.pid_path: "run/x.pid" is not an absolute path`)
}

// A label, a name checked by CheckName and a path refuse what a terminal
// would obey or a JSON round trip would change: C0 controls but tab, DEL,
// the C1 range (U+009B is a one-character CSI) and bytes not UTF-8.
func TestBadChar(t *testing.T) {
	for _, tc := range []struct {
		s, want string
	}{
		{"nginx", ""},
		{"a\tb", ""},
		{"zone=上海-1", ""},
		{"é", ""},
		{"\uFFFD", ""}, // the replacement character itself is text
		{"a\x00b", "a NUL byte"},
		{"a\nb", "a newline"},
		{"a\rb", "a newline"},
		{"a\x1b[2Jb", "a control character"},
		{"a\x7fb", "a control character"},
		{"a\u009b2Jb", "a control character"},
		{"a\u0085b", "a control character"},
		{"a\xffb", "a byte that is not UTF-8"},
		{"a\xc2", "a byte that is not UTF-8"},
	} {
		if got := badChar(tc.s); got != tc.want {
			t.Errorf("badChar(%q) = %q, want %q", tc.s, got, tc.want)
		}
		v := &Validator{}
		v.CheckLabel("labels", "k", tc.s)
		v.CheckPath("setup_path", "/opt/"+tc.s, true)
		if refused := v.Err() != nil; refused != (tc.want != "") {
			t.Errorf("label value and path %q refused: %v, want %v (%v)", tc.s, refused, tc.want != "", v.Err())
		}
	}
}
