// Package wire holds the GSE/JOB API's wire formats: the request forms of
// the documents and their translation into domain definitions (model),
// the hosts as the forms name them (bk_supplier_id, agent ids), and the
// result content the documents show. The engine and model know none of
// it: the server parses a request here at its entrance and renders its
// replies from typed results here.
package wire

import (
	"fmt"
	"maps"
	"strings"

	"gseproc/model"
)

// The request forms of the API documents, and their translation into model.Process.

// Scope is the JOB APIs' resource scope: bk_biz_id, or bk_scope_type + bk_scope_id.
type Scope struct {
	Type string `json:"bk_scope_type"` // "biz" or "biz_set"
	ID   string `json:"bk_scope_id"`
}

// Scope types.
const (
	ScopeBiz    = "biz"
	ScopeBizSet = "biz_set"
)

func (s Scope) String() string { return s.Type + ":" + s.ID }

// Namespace is the registry namespace of the process_infos form's
// definitions within this scope: "biz_1", "biz_set_7".
func (s Scope) Namespace() string { return s.Type + "_" + s.ID }

// Validate checks type and id.
func (s Scope) Validate(v *model.Validator) {
	switch s.Type {
	case ScopeBiz, ScopeBizSet:
	case "":
		v.Add("bk_scope_type", "required (or give bk_biz_id)")
	default:
		v.Addf("bk_scope_type", "%q is not one of biz, biz_set", s.Type)
	}
	if s.ID == "" {
		v.Add("bk_scope_id", "required (or give bk_biz_id)")
	} else {
		n := 0
		if _, err := fmt.Sscanf(s.ID, "%d", &n); err != nil || n <= 0 || fmt.Sprint(n) != s.ID {
			v.Addf("bk_scope_id", "%q is not a positive integer id", s.ID)
		}
	}
}

// InfoForm says which endpoint a process_infos entry came from; each
// fills defaults and commands differently.
type InfoForm int

// process_infos forms.
const (
	FormOperateProc    InfoForm = iota // JOB operate_proc (v1): commands synthesised from setup_path, proc_name, cmd_shell_ext
	FormOperateProcess                 // JOB operate_process (v2): every field passed through
	FormManageProc                     // JOB manage_proc: register (1) / unregister (2)
)

// ProcessInfo is one process_infos[] entry of operate_proc, operate_process
// and manage_proc. Pointer fields tell "absent" from zero.
type ProcessInfo struct {
	SetupPath           string   `json:"setup_path"`
	ProcName            string   `json:"proc_name"`
	PidPath             string   `json:"pid_path"`
	CfgPath             string   `json:"cfg_path,omitempty"`
	LogPath             string   `json:"log_path,omitempty"`
	Contact             string   `json:"contact,omitempty"`
	ProcOwner           string   `json:"proc_owner,omitempty"`
	StartCmd            string   `json:"start_cmd,omitempty"`
	StopCmd             string   `json:"stop_cmd,omitempty"`
	RestartCmd          string   `json:"restart_cmd,omitempty"`
	ReloadCmd           string   `json:"reload_cmd,omitempty"`
	KillCmd             string   `json:"kill_cmd,omitempty"`
	FuncID              string   `json:"func_id,omitempty"`
	InstanceID          string   `json:"instance_id,omitempty"`
	ValueKey            string   `json:"value_key,omitempty"`
	Type                *int     `json:"type,omitempty"`
	CycleTime           *int     `json:"cycle_time,omitempty"`
	InstanceNum         *int     `json:"instance_num,omitempty"`
	StartCheckBeginTime *int     `json:"start_check_begin_time,omitempty"`
	StartCheckEndTime   *int     `json:"start_check_end_time,omitempty"`
	OpTimeout           *int     `json:"op_timeout,omitempty"`
	Account             string   `json:"account,omitempty"`
	CmdShellExt         string   `json:"cmd_shell_ext,omitempty"`
	CPULmt              *float64 `json:"cpu_lmt,omitempty"`
	MemLmt              *float64 `json:"mem_lmt,omitempty"`
	IPList              []Host   `json:"ip_list"`
}

// infoNames maps internal field paths to process_infos wire names.
var infoNames = model.FieldNames{
	"meta.namespace": "bk_scope_id", "meta.name": "value_key",
	"spec.identity.proc_name": "proc_name", "spec.identity.setup_path": "setup_path",
	"spec.identity.pid_path": "pid_path", "spec.identity.config_path": "cfg_path",
	"spec.identity.log_path": "log_path", "spec.identity.user": "account",
	"spec.identity.value_key": "value_key",
	"spec.control.start_cmd":  "start_cmd", "spec.control.stop_cmd": "stop_cmd",
	"spec.control.restart_cmd": "restart_cmd", "spec.control.reload_cmd": "reload_cmd",
	"spec.control.kill_cmd": "kill_cmd", "spec.control.cmd_shell_ext": "cmd_shell_ext",
	"spec.resource.cpu": "cpu_lmt", "spec.resource.mem": "mem_lmt",
	"spec.monitor_policy.auto_type": "type", "spec.monitor_policy.cycle_time": "cycle_time",
	"spec.monitor_policy.start_check_secs":     "start_check_begin_time",
	"spec.monitor_policy.start_check_end_secs": "start_check_end_time",
	"spec.monitor_policy.op_timeout":           "op_timeout",
	"spec.monitor_policy.instance_num":         "instance_num",
}

// DefaultValueKey is model.DefaultValueKey: the agent index key when
// value_key is empty.
func DefaultValueKey(setupPath, procName string) string {
	return model.DefaultValueKey(setupPath, procName)
}

// ToProcess translates the entry into a definition in the scope's namespace.
//
// operate_proc (v1) synthesises the commands the way the JOB server does:
// "./start.sh <proc_name> &" for sh (run in setup_path), "start.bat <proc_name>"
// for bat/ps1, with proc_name quoted for the target shell (model.ShellQuote,
// CmdQuote; validation also holds it to ProcNameChars); no kill_cmd (the agent SIGKILLs the process group); type 1;
// cpu 50 / mem 30 when absent; op_timeout 10; start check 5..1.
//
// type, when absent: 0 (periodic) if cycle_time is given, else 1 (resident),
// which reconciles the documents' "default 0" with examples that give no
// cycle_time.
func (pi ProcessInfo) ToProcess(form InfoForm, scope Scope) model.Process {
	p := model.Process{}
	p.Meta.Namespace = scope.Namespace()
	vk := pi.ValueKey
	if vk == "" && pi.SetupPath != "" && pi.ProcName != "" {
		vk = DefaultValueKey(pi.SetupPath, pi.ProcName)
	}
	p.Meta.Name = vk
	contact := pi.Contact
	if contact == "" {
		contact = pi.ProcOwner
	}
	p.Spec.Identity = model.Identity{
		ProcName: pi.ProcName, SetupPath: pi.SetupPath, PidPath: pi.PidPath,
		ConfigPath: pi.CfgPath, LogPath: pi.LogPath, User: pi.Account,
		ValueKey: vk, Contact: contact, FuncID: pi.FuncID, InstanceID: pi.InstanceID,
	}
	p.Spec.Control = model.Control{
		StartCmd: pi.StartCmd, StopCmd: pi.StopCmd, RestartCmd: pi.RestartCmd,
		ReloadCmd: pi.ReloadCmd, KillCmd: pi.KillCmd, ShellExt: pi.CmdShellExt,
	}
	// Every policy field the entry leaves out takes its documented default;
	// one it gives is kept, 0 included (model.Policy says what 0 means).
	p.Spec.Policy = model.DefaultPolicy()
	pol := &p.Spec.Policy
	pol.AutoType = model.AutoResident
	if pi.Type != nil {
		pol.AutoType = model.AutoType(*pi.Type)
	} else if pi.CycleTime != nil && *pi.CycleTime > 0 {
		pol.AutoType = model.AutoPeriodic
	}
	setInt(&pol.CycleTime, pi.CycleTime)
	setInt(&pol.InstanceNum, pi.InstanceNum)
	setInt(&pol.StartCheckSecs, pi.StartCheckBeginTime)
	setInt(&pol.StartCheckEndSecs, pi.StartCheckEndTime)
	setInt(&pol.OpTimeout, pi.OpTimeout)
	if pi.CPULmt != nil {
		p.Spec.Resource.CPU = *pi.CPULmt
	}
	if pi.MemLmt != nil {
		p.Spec.Resource.Mem = *pi.MemLmt
	}

	if form == FormOperateProc {
		ext := pi.CmdShellExt
		if ext == "" {
			ext = "sh"
		}
		p.Spec.Control.ShellExt = ext
		mk := func(script string) string {
			if ext == "sh" {
				return "./" + script + ".sh " + model.ShellQuote(pi.ProcName) + " &"
			}
			return script + "." + ext + " " + model.CmdQuote(pi.ProcName)
		}
		p.Spec.Control.StartCmd = mk("start")
		p.Spec.Control.StopCmd = mk("stop")
		p.Spec.Control.RestartCmd = mk("restart")
		p.Spec.Control.ReloadCmd = mk("reload")
		p.Spec.Control.KillCmd = ""
		pol.AutoType = model.AutoResident
		if pi.CPULmt == nil {
			p.Spec.Resource.CPU = 50
		}
		if pi.MemLmt == nil {
			p.Spec.Resource.Mem = 30
		}
		if pi.OpTimeout == nil {
			pol.OpTimeout = 10
		}
		if pi.StartCheckBeginTime == nil {
			pol.StartCheckSecs = 5
		}
		if pi.StartCheckEndTime == nil {
			pol.StartCheckEndSecs = 1
		}
	}
	if p.Spec.Control.ShellExt == "" {
		p.Spec.Control.ShellExt = "sh"
	}
	return p
}

func setInt(dst *int, src *int) {
	if src != nil {
		*dst = *src
	}
}

// Hosts is the entry's ip_list as domain hosts (supplier ids left out:
// Suppliers collects them).
func (pi ProcessInfo) Hosts() []model.Host {
	out := make([]model.Host, len(pi.IPList))
	for i, h := range pi.IPList {
		out[i] = h.Model()
	}
	return out
}

// ValidateInfos checks a process_infos array for the given form, naming
// fields as the client sent them ("process_infos[2].cpu_lmt"), and puts
// every ip_list host into its canonical form in place. It returns each
// entry's definition (ToProcess), which it checked.
func ValidateInfos(v *model.Validator, form InfoForm, scope Scope, infos []ProcessInfo, maxHosts int) []model.Process {
	if len(infos) == 0 {
		v.Add("process_infos", "required: at least one entry")
	}
	procs := make([]model.Process, len(infos))
	hosts := 0
	for i, pi := range infos {
		prefix := fmt.Sprintf("process_infos[%d]", i)
		if form == FormManageProc {
			if strings.TrimSpace(pi.ProcOwner) == "" && strings.TrimSpace(pi.Contact) == "" {
				v.Add(prefix+".proc_owner", "required")
			}
		}
		p := pi.ToProcess(form, scope)
		p.ValidateDefInto(v, prefix, infoNames)
		procs[i] = p
		if len(pi.IPList) == 0 {
			v.Add(prefix+".ip_list", "required: at least one host")
		}
		for j, h := range pi.IPList {
			c := h.Canonicalize(v, fmt.Sprintf("%s.ip_list[%d]", prefix, j))
			infos[i].IPList[j] = Host{IP: c.IP, CloudID: c.CloudID, SupplierID: h.SupplierID}
		}
		hosts += len(pi.IPList)
	}
	if maxHosts > 0 && hosts > maxHosts {
		v.Addf("process_infos", "%d hosts in one request, more than the limit of %d", hosts, maxHosts)
	}
	return procs
}

// ProcRequest is the meta/spec form: operate_proc (GSE), operate_proc_v2,
// each element of operate_proc_multi, register/update/unregister_proc_info
// and get_proc_status.
type ProcRequest struct {
	Meta        model.Meta `json:"meta"`
	OpType      *int       `json:"op_type,omitempty"`
	Hosts       []Host     `json:"hosts"`
	AgentIDList []string   `json:"agent_id_list,omitempty"`
	Spec        *SpecWire  `json:"spec,omitempty"`
}

// SpecWire is spec as the meta form sends it: monitor_policy in
// register/update_proc_info, alive_monitor_policy in operate_proc_v2/multi.
type SpecWire struct {
	Identity           model.Identity  `json:"identity"`
	Control            model.Control   `json:"control"`
	Resource           *model.Resource `json:"resource,omitempty"`
	MonitorPolicy      *PolicyWire     `json:"monitor_policy,omitempty"`
	AliveMonitorPolicy *PolicyWire     `json:"alive_monitor_policy,omitempty"`
	WarnReportPolicy   *struct {
		ReportID int `json:"report_id"`
	} `json:"warn_report_policy,omitempty"`
	Configmap []struct {
		Path string `json:"path"`
		MD5  string `json:"md5"`
	} `json:"configmap,omitempty"`
}

// PolicyWire is monitor_policy / alive_monitor_policy. cycle_time,
// instance_num and start_check_end_secs are gseproc extensions so the meta
// form can carry everything the process_infos form can.
type PolicyWire struct {
	AutoType          *int   `json:"auto_type,omitempty"`
	StartCheckSecs    *int   `json:"start_check_secs,omitempty"`
	StartCheckEndSecs *int   `json:"start_check_end_secs,omitempty"`
	StopCheckSecs     *int   `json:"stop_check_secs,omitempty"`
	StartRetries      *int   `json:"start_retries,omitempty"`
	StartInterval     *int   `json:"start_interval,omitempty"`
	OpTimeout         *int   `json:"op_timeout,omitempty"`
	CycleTime         *int   `json:"cycle_time,omitempty"`
	InstanceNum       *int   `json:"instance_num,omitempty"`
	CrontabRule       string `json:"crontab_rule,omitempty"`
	CrotabRule        string `json:"crotab_rule,omitempty"` // the documents' misspelling
}

// Policy returns the policy that was sent (monitor_policy wins over
// alive_monitor_policy), or nil.
func (s *SpecWire) Policy() *PolicyWire {
	if s == nil {
		return nil
	}
	if s.MonitorPolicy != nil {
		return s.MonitorPolicy
	}
	return s.AliveMonitorPolicy
}

// ToProcess translates the meta form into a definition: every policy
// field the request leaves out takes its documented default
// (model.DefaultPolicy), one it gives is kept, 0 included. auto_type
// defaults to 1 (resident) when absent.
func (r ProcRequest) ToProcess() model.Process {
	p := model.Process{Meta: r.Meta}
	p.Meta.Labels = maps.Clone(r.Meta.Labels)
	if r.Spec == nil {
		return p
	}
	p.Spec.Identity = r.Spec.Identity
	p.Spec.Control = r.Spec.Control
	if r.Spec.Resource != nil {
		p.Spec.Resource = *r.Spec.Resource
	}
	p.Spec.Policy = model.DefaultPolicy()
	pol := &p.Spec.Policy
	pol.AutoType = model.AutoResident
	if w := r.Spec.Policy(); w != nil {
		if w.AutoType != nil {
			pol.AutoType = model.AutoType(*w.AutoType)
		}
		setInt(&pol.StartCheckSecs, w.StartCheckSecs)
		setInt(&pol.StartCheckEndSecs, w.StartCheckEndSecs)
		setInt(&pol.StopCheckSecs, w.StopCheckSecs)
		setInt(&pol.StartRetries, w.StartRetries)
		setInt(&pol.StartInterval, w.StartInterval)
		setInt(&pol.OpTimeout, w.OpTimeout)
		setInt(&pol.CycleTime, w.CycleTime)
		setInt(&pol.InstanceNum, w.InstanceNum)
		pol.CrontabRule = w.CrontabRule
		if pol.CrontabRule == "" {
			pol.CrontabRule = w.CrotabRule
		}
	}
	if p.Spec.Control.ShellExt == "" {
		p.Spec.Control.ShellExt = "sh"
	}
	return p
}

// Targets returns the hosts addressed: agent_id_list wins over hosts when
// set, as in GSE 2.0; its entries are "cloud:ip" or agent ids, which the
// caller resolves against the fleet.
func (r ProcRequest) Targets(v *model.Validator, prefix string) []HostRef {
	if len(r.AgentIDList) > 0 {
		out := make([]HostRef, 0, len(r.AgentIDList))
		for i, s := range r.AgentIDList {
			ref, err := ParseHostRef(s)
			if err != nil {
				v.Addf(fmt.Sprintf("%sagent_id_list[%d]", prefix, i), "%v", err)
			}
			out = append(out, ref)
		}
		return out
	}
	if len(r.Hosts) == 0 {
		v.Add(prefix+"hosts", "required: at least one host (or agent_id_list)")
	}
	out := make([]HostRef, len(r.Hosts))
	for i, h := range r.Hosts {
		out[i] = HostRef{Host: h.Canonicalize(v, fmt.Sprintf("%shosts[%d]", prefix, i))}
	}
	return out
}
