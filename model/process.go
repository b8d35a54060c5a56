package model

import (
	"maps"
	"sort"
	"strings"
)

// Process is the one internal process definition that every request form
// translates into. It is the meta/spec form of the GSE proc APIs; the
// process_infos fields that form lacks (value_key, func_id, instance_id,
// contact, cmd_shell_ext, cycle_time, instance_num, the start-check window)
// have their places in Identity, Control and Policy.
//
// Identity: a definition is identified by Key() = "namespace:name".
//   - meta/spec form: namespace and name as given.
//   - process_infos form (operate_proc, operate_process, manage_proc): the
//     agent's index key is value_key, defaulting to setup_path + "/" + proc_name.
//     It becomes Name; Namespace is the request's scope, "biz_<id>" or
//     "biz_set_<id>" (see ScopeNamespace). The contact/proc_owner is kept in
//     Identity.Contact. So value_key <-> name within the scope's namespace,
//     and the agent's .proc valuekey is always Key().
type Process struct {
	Meta Meta `json:"meta"`
	Spec Spec `json:"spec"`
}

// Meta names a process and carries its labels.
type Meta struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Labels    Labels `json:"labels,omitempty"`
}

// Spec is what the agent needs to run and host the process.
type Spec struct {
	Identity Identity `json:"identity"`
	Control  Control  `json:"control"`
	Resource Resource `json:"resource"`
	Policy   Policy   `json:"monitor_policy"`
}

// Identity locates the process on a host.
type Identity struct {
	ProcName   string `json:"proc_name"`
	SetupPath  string `json:"setup_path"`
	PidPath    string `json:"pid_path"`
	ConfigPath string `json:"config_path,omitempty"`
	LogPath    string `json:"log_path,omitempty"`
	User       string `json:"user,omitempty"` // account; empty means root
	IndexKey   string `json:"index_key,omitempty"`
	ValueKey   string `json:"value_key,omitempty"`
	Contact    string `json:"contact,omitempty"`
	FuncID     string `json:"func_id,omitempty"`
	InstanceID string `json:"instance_id,omitempty"`
}

// Control holds the commands, run with sh -c in setup_path.
type Control struct {
	StartCmd   string `json:"start_cmd,omitempty"`
	StopCmd    string `json:"stop_cmd,omitempty"`
	RestartCmd string `json:"restart_cmd,omitempty"`
	ReloadCmd  string `json:"reload_cmd,omitempty"`
	KillCmd    string `json:"kill_cmd,omitempty"`
	VersionCmd string `json:"version_cmd,omitempty"`
	HealthCmd  string `json:"health_cmd,omitempty"`
	ShellExt   string `json:"cmd_shell_ext,omitempty"` // sh (default), bat, ps1
}

// UnsupportedShell is the per-host answer of an agent that runs its
// commands with sh (every gseproc agent: Linux, macOS) for a process whose
// cmd_shell_ext it cannot run: bat and ps1 are Windows scripts (gse-api.md
// §4.11). "" when it can. Agent and simulator answer it (65535) for every
// op that would run or host the process; status and unregister still work.
func (c Control) UnsupportedShell() string {
	switch c.ShellExt {
	case "", "sh":
		return ""
	}
	return "cmd_shell_ext " + c.ShellExt + " is not supported on this OS: this agent runs sh scripts; bat and ps1 need a Windows agent"
}

// Resource holds limits in percent of the whole machine; 0 means no limit.
type Resource struct {
	CPU float64 `json:"cpu"`
	Mem float64 `json:"mem"`
}

// Policy says how the process is hosted. A field a definition leaves out
// takes its documented default (DefaultPolicy) where the definition
// enters and its absence is known: JSON decoded into NewProcess or
// NewProcessDef (the native API, apply), the GSE/JOB forms
// (backend/server/wire), the console's form (an empty field), the
// simulator's catalog. Past the entrance a value is what it says, 0
// included; nothing downstream defaults a field again:
//
//   - start_check_secs 0: the start is judged at once: the first live pid
//     in the pid file counts (a job: the command must not fail within the
//     agent's min_start_wait);
//   - start_retries 0: a hosted process that exits is not restarted: it is
//     given up (fatal, event process_cancel_restart) at once;
//   - start_interval 0: no interval of its own: restarts follow the
//     agent's backoff (the first at once, then backoff_base doubling up to
//     backoff_max) instead of start_interval doubling;
//   - start_check_end_secs, stop_check_secs, cycle_time: 0 is their
//     default (no end window, the agent's min_stop_wait, not periodic);
//   - op_timeout 0 and instance_num 0 mean nothing (no time to run a
//     command, no instance to run): Validate refuses them with the reason.
//
// Every field whose default is not 0 is always encoded (no omitempty), so
// a stored or sent definition decodes to what it was.
type Policy struct {
	AutoType          AutoType `json:"auto_type"`
	StartCheckSecs    int      `json:"start_check_secs"`     // start_check_begin_time
	StartCheckEndSecs int      `json:"start_check_end_secs"` // start_check_end_time
	StopCheckSecs     int      `json:"stop_check_secs,omitempty"`
	StartRetries      int      `json:"start_retries"`
	StartInterval     int      `json:"start_interval"` // seconds
	CycleTime         int      `json:"cycle_time,omitempty"`
	InstanceNum       int      `json:"instance_num"`
	OpTimeout         int      `json:"op_timeout"` // seconds
	CrontabRule       string   `json:"crontab_rule,omitempty"`
}

// Documented defaults (gse-api.md §3.3, §8.6).
const (
	DefaultStartCheckSecs = 5
	DefaultOpTimeout      = 60
	DefaultStartRetries   = 4
	DefaultStartInterval  = 10
	MaxOpTimeout          = 86400
	MaxInstanceNum        = 1024
)

// Key is the process identity "namespace:name" (the agent's valuekey).
func (p Process) Key() string { return p.Meta.Namespace + ":" + p.Meta.Name }

// SplitKey splits "namespace:name" at the first colon.
func SplitKey(key string) (ns, name string, ok bool) { return strings.Cut(key, ":") }

// Account is the user the commands run as (root when unset).
func (p Process) Account() string {
	if p.Spec.Identity.User == "" {
		return "root"
	}
	return p.Spec.Identity.User
}

// DefaultPolicy is the policy of a definition that gives none of its
// fields: the documented defaults (gse-api.md §3.3, §8.6). auto_type has
// none here (0 is periodic); the GSE/JOB forms default it themselves. An
// entrance starts from it and sets what the definition gives.
func DefaultPolicy() Policy {
	return Policy{StartCheckSecs: DefaultStartCheckSecs, StartRetries: DefaultStartRetries,
		StartInterval: DefaultStartInterval, OpTimeout: DefaultOpTimeout, InstanceNum: 1}
}

// NewProcess is an empty definition with the default policy: what an
// entrance decodes JSON into (encoding/json keeps what the input leaves
// out), so that an absent policy field has its default and a given one,
// 0 included, its value.
func NewProcess() Process { return Process{Spec: Spec{Policy: DefaultPolicy()}} }

// NewProcessDef is NewProcess with no hosts, to decode a ProcessDef into.
func NewProcessDef() ProcessDef { return ProcessDef{Process: NewProcess()} }

// Canonical returns p with its paths in clean form (CleanPath) and sh for
// an empty cmd_shell_ext, once it has been validated: what is stored and
// sent to agents.
func (p Process) Canonical() Process {
	if p.Spec.Control.ShellExt == "" {
		p.Spec.Control.ShellExt = "sh"
	}
	id := &p.Spec.Identity
	id.SetupPath = CleanPath(id.SetupPath)
	id.PidPath = CleanPath(id.PidPath)
	id.ConfigPath = CleanPath(id.ConfigPath)
	id.LogPath = CleanPath(id.LogPath)
	return p
}

// Clone returns a deep copy (labels are copied).
func (p Process) Clone() Process {
	p.Meta.Labels = maps.Clone(p.Meta.Labels)
	return p
}

// CheckWindow is how long after a start command the agent keeps checking
// that the process came up: from StartCheckSecs to max(begin, end).
func (p Process) CheckWindow() (begin, end int) {
	begin, end = p.Spec.Policy.StartCheckSecs, p.Spec.Policy.StartCheckEndSecs
	if end < begin {
		end = begin
	}
	return begin, end
}

// Deadline is the per-host budget for one op in seconds: op_timeout plus the
// start-check window for ops that start something.
func (p Process) Deadline(op OpType) int {
	d := p.Spec.Policy.OpTimeout // at least 1 in a valid definition
	switch op {
	case OpStart, OpRestart:
		_, end := p.CheckWindow()
		d += end
	case OpStop, OpKill:
		d += p.Spec.Policy.StopCheckSecs
	}
	return d
}

// Command returns the command for op, and whether one is set.
func (p Process) Command(op OpType) (string, bool) { return p.Spec.Control.Command(op) }

// Command returns the command for op, and whether one is set. By
// pointer: opsem.CommandsIn asks it of every op's process five times, and
// a Process (or a Control) copied for each call was a tenth of a
// simulated host's work per request.
func (c *Control) Command(op OpType) (string, bool) {
	var s string
	switch op {
	case OpStart:
		s = c.StartCmd
	case OpStop:
		s = c.StopCmd
	case OpRestart:
		s = c.RestartCmd
	case OpReload:
		s = c.ReloadCmd
	case OpKill:
		s = c.KillCmd
	}
	return s, strings.TrimSpace(s) != ""
}

// MatchLabels reports whether every selector pair is among the labels.
func MatchLabels(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ParseLabel parses "key=value".
func ParseLabel(s string) (string, string, error) {
	k, val, ok := strings.Cut(s, "=")
	k = strings.TrimSpace(k)
	if !ok || k == "" {
		return "", "", ValidationError{{Field: "label", Reason: "want key=value, got " + quote(s)}}
	}
	return k, strings.TrimSpace(val), nil
}

// SortedLabels renders labels as sorted "k=v" strings.
func SortedLabels(l map[string]string) []string {
	out := make([]string, 0, len(l))
	for k, v := range l {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func quote(s string) string { return "\"" + s + "\"" }

// Validate checks every field of the definition and returns a
// ValidationError naming each offending field (prefix is the path of the
// definition in the request, e.g. "process_infos[0]"; names use the wire
// names of the meta/spec form unless a form maps them back).
//
// A valid definition is checked under the bare field names (constants)
// and allocates nothing for names; only one with errors is checked again
// under prefix to name them: an agent validates every request, status
// ops included, and their field names were most of what a status
// allocated.
func (p Process) Validate(prefix string) error {
	v := &Validator{}
	p.ValidateInto(v, "", nil)
	if len(v.errs) == 0 || prefix == "" {
		return v.Err()
	}
	v = &Validator{}
	p.ValidateInto(v, prefix, nil)
	return v.Err()
}

// FieldNames maps internal field names to the names of a request form, so
// messages name the field the client sent. Nil means the meta/spec names.
type FieldNames map[string]string

func (f FieldNames) name(prefix, internal string) string {
	n := internal
	if f != nil {
		if m, ok := f[internal]; ok {
			n = m
		}
	}
	if prefix == "" {
		return n
	}
	return prefix + "." + n
}

// ValidateInto adds the definition's errors to v.
func (p Process) ValidateInto(v *Validator, prefix string, names FieldNames) {
	p.Meta.checkIdentity(v, names.name(prefix, "meta.namespace"), names.name(prefix, "meta.name"), true)
	p.ValidateSpecInto(v, prefix, names)
}

// ValidateDefInto is ValidateInto for a definition being saved or sent (the
// entrances: the engine's canonicalDef, the API forms, the console's form,
// apply): its meta.name is held to the name rule (CheckDefName), not only
// to CheckName's. Agents keep ValidateInto: a definition stored before the
// rule stays operable.
func (p Process) ValidateDefInto(v *Validator, prefix string, names FieldNames) {
	p.Meta.checkDefIdentity(v, names.name(prefix, "meta.namespace"), names.name(prefix, "meta.name"), p.Spec.Identity)
	p.ValidateSpecInto(v, prefix, names)
}

// ValidateDefInto checks the namespace and the name of a definition being
// saved or sent whose spec is checked apart (the GSE meta form): the name
// rule, as Process.ValidateDefInto; id is the definition's identity (the
// JOB default key, CheckDefName).
func (m Meta) ValidateDefInto(v *Validator, prefix string, id Identity) {
	m.checkDefIdentity(v, FieldNames(nil).name(prefix, "meta.namespace"), FieldNames(nil).name(prefix, "meta.name"), id)
}

func (m Meta) checkDefIdentity(v *Validator, nsField, nameField string, id Identity) {
	ValidateNamespace(v, nsField, m.Namespace)
	v.CheckDefName(nameField, m.Name, id)
}

// ValidateInto checks the namespace and, when nameRequired, the name
// (prefix as for Process.ValidateInto); labels are checked with the
// definition. The meta-only requests (operate_proc, get_proc_status) use it.
func (m Meta) ValidateInto(v *Validator, prefix string, nameRequired bool) {
	m.checkIdentity(v, FieldNames(nil).name(prefix, "meta.namespace"), FieldNames(nil).name(prefix, "meta.name"), nameRequired)
}

func (m Meta) checkIdentity(v *Validator, nsField, nameField string, nameRequired bool) {
	ValidateNamespace(v, nsField, m.Namespace)
	v.CheckName(nameField, m.Name, nameRequired, 512)
}

// ValidateSpecInto checks everything but the namespace and name: labels,
// identity, commands, limits and policy.
func (p Process) ValidateSpecInto(v *Validator, prefix string, names FieldNames) {
	f := func(internal string) string { return names.name(prefix, internal) }
	m, id, pol := p.Meta, p.Spec.Identity, p.Spec.Policy

	v.CheckLabelCount(f("meta.labels"), len(m.Labels))
	for k, val := range m.Labels {
		v.CheckLabel(f("meta.labels")+"["+k+"]", k, val)
	}

	v.CheckIdent(f("spec.identity.proc_name"), id.ProcName, true, 256, procNameChar, ProcNameChars)
	ext := p.Spec.Control.ShellExt
	v.checkHostPath(f("spec.identity.setup_path"), id.SetupPath, true, ext)
	v.checkHostPath(f("spec.identity.pid_path"), id.PidPath, true, ext)
	v.checkHostPath(f("spec.identity.config_path"), id.ConfigPath, false, ext)
	v.checkHostPath(f("spec.identity.log_path"), id.LogPath, false, ext)
	v.CheckName(f("spec.identity.user"), id.User, false, 64)
	if strings.ContainsAny(id.User, " :/") {
		v.Add(f("spec.identity.user"), "is not a valid account name")
	}
	v.CheckName(f("spec.identity.value_key"), id.ValueKey, false, 512)

	c := p.Spec.Control
	for _, cmd := range []struct{ field, s string }{
		{"spec.control.start_cmd", c.StartCmd}, {"spec.control.stop_cmd", c.StopCmd},
		{"spec.control.restart_cmd", c.RestartCmd}, {"spec.control.reload_cmd", c.ReloadCmd},
		{"spec.control.kill_cmd", c.KillCmd}, {"spec.control.version_cmd", c.VersionCmd},
		{"spec.control.health_cmd", c.HealthCmd},
	} {
		v.CheckCommand(f(cmd.field), cmd.s)
	}
	switch c.ShellExt {
	case "", "sh", "bat", "ps1":
	default:
		v.Addf(f("spec.control.cmd_shell_ext"), "%q is not one of sh, bat, ps1", c.ShellExt)
	}

	v.CheckRange(f("spec.resource.cpu"), p.Spec.Resource.CPU, 0, 100)
	v.CheckRange(f("spec.resource.mem"), p.Spec.Resource.Mem, 0, 100)

	if !pol.AutoType.Valid() {
		v.Addf(f("spec.monitor_policy.auto_type"), "%d is not one of 0 periodic, 1 resident, 2 one-shot", int(pol.AutoType))
	}
	if pol.AutoType == AutoPeriodic && pol.CycleTime <= 0 {
		v.Add(f("spec.monitor_policy.cycle_time"), "required (> 0) when type is 0 (periodic)")
	}
	if pol.CycleTime < 0 {
		v.Add(f("spec.monitor_policy.cycle_time"), "must be >= 0")
	}
	nonNeg := []struct {
		field string
		x     int
	}{
		{"spec.monitor_policy.start_check_secs", pol.StartCheckSecs},
		{"spec.monitor_policy.start_check_end_secs", pol.StartCheckEndSecs},
		{"spec.monitor_policy.stop_check_secs", pol.StopCheckSecs},
		{"spec.monitor_policy.start_retries", pol.StartRetries},
		{"spec.monitor_policy.start_interval", pol.StartInterval},
	}
	for _, n := range nonNeg {
		if n.x < 0 {
			v.Add(f(n.field), "must be >= 0")
		}
	}
	switch {
	case pol.OpTimeout == 0:
		v.Addf(f("spec.monitor_policy.op_timeout"), "0 leaves no time to run a command: give 1..%d seconds, or leave it out for %d", MaxOpTimeout, DefaultOpTimeout)
	case pol.OpTimeout < 0 || pol.OpTimeout > MaxOpTimeout:
		v.Addf(f("spec.monitor_policy.op_timeout"), "%d is out of range [1,%d]", pol.OpTimeout, MaxOpTimeout)
	}
	switch {
	case pol.InstanceNum == 0:
		v.Addf(f("spec.monitor_policy.instance_num"), "0 instances is nothing to run: give 1..%d, or leave it out for 1", MaxInstanceNum)
	case pol.InstanceNum < 0 || pol.InstanceNum > MaxInstanceNum:
		v.Addf(f("spec.monitor_policy.instance_num"), "%d is out of range [1,%d]", pol.InstanceNum, MaxInstanceNum)
	}
}

// ProcessDef is a definition in the registry with the hosts it is deployed on.
type ProcessDef struct {
	Process Process `json:"process"`
	Hosts   []Host  `json:"hosts"`
	Updated int64   `json:"updated,omitempty"` // unix seconds
	Rev     uint64  `json:"rev,omitempty"`     // store revision, for optimistic updates
}
