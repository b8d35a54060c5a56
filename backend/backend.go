// Package backend declares the one interface the console and the HTTP
// server talk to. The embedded engine (backend/engine) and the HTTP client
// (backend/client) both satisfy it.
package backend

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"gseproc/backend/server/wire"
	"gseproc/model"
)

// Backend is everything the console and the API server need.
type Backend interface {
	// Info says what this backend is (embedded or remote, read-only, sizes).
	Info(ctx context.Context) (Info, error)

	// Namespaces lists namespaces with their process and host counts and labels.
	Namespaces(ctx context.Context) ([]NamespaceSummary, error)
	// Hosts lists hosts with their agent state and the state of the matching
	// processes on them; an empty query lists the whole fleet.
	Hosts(ctx context.Context, q HostQuery) ([]HostView, error)
	// Processes lists definitions matching the query.
	Processes(ctx context.Context, q ProcQuery) ([]model.ProcessDef, error)
	// SaveProcess validates and creates or replaces a definition
	// (a model.ValidationError names every bad field).
	SaveProcess(ctx context.Context, def model.ProcessDef) error
	// DeleteProcess removes a definition by key "namespace:name".
	DeleteProcess(ctx context.Context, key string) error

	// Operate validates the request, creates a task and starts it; it returns
	// as soon as the task exists (results arrive through Watch).
	Operate(ctx context.Context, req OperateRequest) (model.Task, error)
	// Task returns a task with every sub-result so far.
	Task(ctx context.Context, id string) (TaskView, error)
	// Tasks lists recent tasks, newest first.
	Tasks(ctx context.Context, limit int) ([]model.Task, error)
	// Watch streams a task's results: first every final result with
	// Seq > after (in Seq order), then new ones as they arrive. The channel
	// closes when the task is complete or ctx ends. Any number of watchers.
	Watch(ctx context.Context, id string, after int64) (<-chan model.Result, error)
	// Cancel stops a running task: pending targets become cancelled.
	Cancel(ctx context.Context, id string) error
	// ControlRoll pauses, resumes or aborts a rolling task (one whose
	// OperateRequest had a Rollout), whichever server runs it; it returns
	// the task as it was found. Pause: no more hosts are sent the op until
	// a resume (those running it finish); resume: the roll goes on, past a
	// manual pause between batches too; abort: the targets not sent yet
	// are cancelled and the roll ends. model.ErrConflict when the task is
	// not a roll or is over.
	ControlRoll(ctx context.Context, id string, act model.RollAction) (model.Task, error)

	// Events streams host events (restarts, give-ups, limit breaches,
	// agents going on/offline) as they happen; RecentEvents lists the last n.
	Events(ctx context.Context) (<-chan model.Event, error)
	RecentEvents(ctx context.Context, n int) ([]model.Event, error)

	// SetProcessGroups sets the process group (resource pool) of
	// req.Namespace on each of req.Hosts, or clears it when req.Resource
	// limits nothing: each host's agent is told at once and enforces it;
	// the group is stored for the hosts whose agent took it. One result
	// per host, in order: 0, or the agent's refusal, 117 unreachable, 116
	// no reply in time. A model.ValidationError names every bad field.
	SetProcessGroups(ctx context.Context, req GroupRequest) ([]GroupResult, error)
	// ProcessGroups lists the stored process groups of q.Namespace (every
	// namespace when empty) on q.Hosts (every host when empty), by
	// namespace and host.
	ProcessGroups(ctx context.Context, q GroupQuery) ([]model.ProcessGroup, error)

	// Audit lists the audit trail's entries matching q, newest first: every
	// change and operation with who asked for it (the actor of the call's
	// context, see WithActor), its scope, targets, task and outcome.
	Audit(ctx context.Context, q model.AuditQuery) ([]model.AuditEntry, error)

	// Simulate carries out a live control of the simulated fleet (take
	// hosts offline, crash a process, slow agents down ...; see
	// model.SimAction) on the hosts the selector picks, and returns what
	// it did; each change is also an event. A fleet of real agents refuses
	// it with model.ErrNotSimulated.
	Simulate(ctx context.Context, req SimRequest) (model.SimOutcome, error)

	// Logs streams the log of one process on one host (LogQuery): its
	// captured stdout or stderr, or a file under its log_path, from
	// q.Bytes before the end (at a line boundary), in chunks of whole
	// lines. Not following, the channel closes once what the log held at
	// the first answer is sent; following, once the process has exited
	// and its log is read, or ctx ends. A chunk with Error set is the
	// last (the agent unreachable or refusing). A model.ValidationError
	// names every bad field; a process not deployed on the host is
	// model.ErrNotFound.
	Logs(ctx context.Context, q LogQuery) (<-chan model.TailChunk, error)
}

// LogQuery asks for a process's log on a host (Backend.Logs).
type LogQuery struct {
	// Process is the process's key "namespace:name".
	Process string     `json:"proc"`
	Host    model.Host `json:"host"`
	// Stream is stdout (when empty), stderr or file; File names a file
	// under log_path (relative) for stream file: empty is log_path itself
	// when a file, else its newest file.
	Stream   model.LogStream `json:"stream,omitempty"`
	File     string          `json:"file,omitempty"`
	Instance int             `json:"instance,omitempty"`
	// Bytes is how far before the end to start (model.DefaultTailBack
	// when 0, at most model.MaxTailBack).
	Bytes  int64 `json:"bytes,omitempty"`
	Follow bool  `json:"follow,omitempty"`
}

// Validate checks the query at the entrance (every bad field named),
// canonicalises its host and fills the stream's default.
func (q *LogQuery) Validate() error {
	v := &model.Validator{}
	ns, name, ok := model.SplitKey(q.Process)
	if !ok {
		v.Addf("proc", "%q: want namespace:name", q.Process)
	} else {
		model.ValidateNamespace(v, "proc", ns)
		v.CheckName("proc", name, true, 512)
	}
	if h, err := q.Host.Canonical(); err != nil {
		v.Add("host", err.Error())
	} else {
		q.Host = h
	}
	if q.Stream == "" {
		q.Stream = model.LogStdout
	}
	q.Tail().Validate(v, "")
	if q.Bytes < 0 || q.Bytes > model.MaxTailBack {
		v.Addf("bytes", "%d is out of range [0,%d]", q.Bytes, model.MaxTailBack)
	}
	return v.Err()
}

// Tail is the first request of the query's stream: from Bytes before the end.
func (q LogQuery) Tail() model.TailRequest {
	back := q.Bytes
	if back == 0 {
		back = model.DefaultTailBack
	}
	return model.TailRequest{Stream: q.Stream, File: q.File, Instance: q.Instance, Offset: -1, Back: min(back, model.MaxTailBack)}
}

// SimRequest is one simulator control: the change, and the hosts it may
// act on. Selector (Namespace, Name, Labels, Hosts; not Targets) selects
// the hosts carrying the matching processes, or every host when empty; a
// process-level action (crash, memory) needs Namespace and Name.
type SimRequest struct {
	model.SimChange
	Selector Selector `json:"selector,omitzero"`
	Source   string   `json:"source,omitempty"`
	Operator string   `json:"operator,omitempty"`
}

// Validate checks the request at the entrance: every bad field named.
// It canonicalises the selector's hosts and fills the change's defaults.
func (r *SimRequest) Validate() error {
	v := &model.Validator{}
	r.SimChange.Validate(v, "")
	r.Selector.Hosts = model.CanonicalHosts(v, "selector.hosts", r.Selector.Hosts)
	if len(r.Selector.Targets) > 0 {
		v.Add("selector.targets", "not used by simulator controls: select by namespace, name, labels or hosts")
	}
	if r.Action.ProcessLevel() && (r.Selector.Namespace == "" || r.Selector.Name == "") {
		v.Addf("selector.name", "%s acts on one process: give its namespace and name", r.Action)
	}
	return v.Err()
}

// Scope is the selector in words, for events and the audit trail.
func (s Selector) Scope() string {
	var parts []string
	switch {
	case s.Namespace != "" && s.Name != "":
		parts = append(parts, s.Namespace+":"+s.Name)
	case s.Namespace != "":
		parts = append(parts, s.Namespace)
	}
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+s.Labels[k])
	}
	if n := len(s.Hosts); n == 1 {
		parts = append(parts, s.Hosts[0].String())
	} else if n > 1 {
		parts = append(parts, fmt.Sprintf("%d named hosts", n))
	}
	if len(parts) == 0 {
		return "whole fleet"
	}
	return strings.Join(parts, " ")
}

// StatusSharer is a Backend in its reader's own process (the engine)
// whose results' statuses (model.Result.Status, from Task, TaskResults and
// Watch) are its own records, never changed once handed out (a newer
// status replaces one whole): a reader may keep them as they are instead
// of a copy. The embedded console's watch kept a compact copy of each
// (16 MB for a status op over 228,000 processes) of what the engine and
// its store hold anyway.
type StatusSharer interface {
	SharesStatuses() bool
}

// SharesStatuses reports whether be's results' statuses may be kept as
// they are (StatusSharer).
func SharesStatuses(be Backend) bool {
	s, ok := be.(StatusSharer)
	return ok && s.SharesStatuses()
}

// TaskSummarizer is a Backend that reads a task without its results (the
// HTTP client: the results of a task over 100,000 hosts are a reply of
// ~65 MB, and a watch that only wants the task's status and counts, or
// its roll, need not read them).
type TaskSummarizer interface {
	// TaskSummary is Task without its results (Results nil).
	TaskSummary(ctx context.Context, id string) (TaskView, error)
}

// TaskSummary reads task id of be without its results (Results nil): through
// TaskSummarizer when be is one, else through Task.
func TaskSummary(ctx context.Context, be Backend, id string) (TaskView, error) {
	if th, ok := be.(TaskSummarizer); ok {
		return th.TaskSummary(ctx, id)
	}
	v, err := be.Task(ctx, id)
	v.Results = nil
	return v, err
}

// HostsReader is a Backend that hands a host listing over one host at a
// time as it reads it (the HTTP client, from the reply's body): a listing
// of 100,000 hosts is ~90 MB as a []HostView, most of it process statuses
// a console turns into rows of its own at once.
type HostsReader interface {
	// HostsEach is Hosts, each host passed to fn (in Hosts' order)
	// instead of returned: fn must copy what it keeps of the view, which
	// is reused after fn returns, its host label map (HostInfo.Labels)
	// too; the process label maps and the strings it holds are not
	// changed afterwards: they may be kept.
	HostsEach(ctx context.Context, q HostQuery, fn func(*HostView)) error
}

// HostsEach lists the hosts q matches with each passed to fn (see
// HostsReader): one at a time where be can, else from Hosts.
func HostsEach(ctx context.Context, be Backend, q HostQuery, fn func(*HostView)) error {
	if hr, ok := be.(HostsReader); ok {
		return hr.HostsEach(ctx, q, fn)
	}
	hv, err := be.Hosts(ctx, q)
	for i := range hv {
		fn(&hv[i])
	}
	return err
}

// HostListReader is a Backend that lists hosts in the list form (the
// HTTP client: /api/v1/hosts?form=list, wire.ReadHostList): what a host
// list shows of each host, each repeated part sent once. A full listing
// of 100,000 hosts was 82 MB, most of it process statuses a list does
// not show, and seconds to encode and decode.
type HostListReader interface {
	// HostListEach is HostsEach with each view's processes holding,
	// of their status, only ProcKey, State, PID and Hosted (the rest
	// zero). fn must copy what it keeps of the view, which is reused
	// after fn returns, its host label map too; the process label maps
	// and the strings are not changed afterwards: they may be kept.
	HostListEach(ctx context.Context, q HostQuery, fn func(*HostView)) error
}

// HostLabelSetReader is a HostListReader that hands each host's labels
// over as the inventory keeps them, a shared set (the engine over the
// NATS dispatcher): the list form's writer reads each set as it is
// instead of taking apart a map made for each host (a listing of 100,000
// hosts made 100,000 maps, ~30 MB, and a quarter of its CPU went to
// making and reading them).
type HostLabelSetReader interface {
	// HostListSets is HostListEach with the host's labels in labels, a
	// shared set (read only, may be kept) and v.Labels nil; when the
	// inventory keeps no sets, labels is nil and v.Labels holds them
	// (reused after fn returns, as HostListEach's). With sets, head (when
	// not nil) is called once before the first host with all the
	// listing may name: every process (key and labels) a view may carry
	// and the label set of every host it may list (repeated as hosts
	// share them); without sets it is not called.
	HostListSets(ctx context.Context, q HostQuery, head func(procs []ProcView, sets []model.LabelSet), fn func(v *HostView, labels model.LabelSet)) error
}

// HostListEach lists the hosts q matches for a host list, each passed to
// fn: in the list form where be can (HostListReader), else whole
// (HostsEach).
func HostListEach(ctx context.Context, be Backend, q HostQuery, fn func(*HostView)) error {
	if hr, ok := be.(HostListReader); ok {
		return hr.HostListEach(ctx, q, fn)
	}
	return HostsEach(ctx, be, q, fn)
}

// TaskResultsReader is a Backend that hands a task's results over one at
// a time as it reads them (the HTTP client, from the reply's body), never
// holding them all: a task over 100,000 hosts has ~218,000, ~60 MB as a
// []model.Result, which a watch turns into rows of its own at once.
type TaskResultsReader interface {
	// TaskResults is Task, each result passed to fn (in the order Task
	// has them) instead of returned: fn must copy what it keeps of the
	// result, which is reused after fn returns. The view's Results is
	// nil.
	TaskResults(ctx context.Context, id string, fn func(*model.Result)) (TaskView, error)
}

// TaskResults reads task id of be with each of its results passed to fn
// (see TaskResultsReader): one at a time where be can, else from Task.
func TaskResults(ctx context.Context, be Backend, id string, fn func(*model.Result)) (TaskView, error) {
	if tr, ok := be.(TaskResultsReader); ok {
		return tr.TaskResults(ctx, id, fn)
	}
	v, err := be.Task(ctx, id)
	for i := range v.Results {
		fn(&v.Results[i])
	}
	v.Results = nil
	return v, err
}

// RefusalRecorder is a Backend that keeps the audit trail (the engine).
// A layer that refuses a request itself because it reaches outside the
// caller's scopes (the API server for an app, Restrict for an SSH
// operator) records the refusal there (RecordRefusal), so that a denied
// attempt is in the trail with who made it, what it asked for and why it
// was refused, like the refusals of the engine itself.
type RefusalRecorder interface {
	// RecordRefusal appends en as a refusal (Result refused) made by the
	// actor of ctx.
	RecordRefusal(ctx context.Context, en model.AuditEntry) error
}

// RecordRefusal records en in be's audit trail when be keeps one (see
// RefusalRecorder); a failure to record is logged by be and not returned:
// the request is refused either way.
func RecordRefusal(ctx context.Context, be Backend, en model.AuditEntry) {
	if r, ok := be.(RefusalRecorder); ok {
		_ = r.RecordRefusal(ctx, en)
	}
}

// Info describes a backend.
type Info struct {
	Mode      string `json:"mode"` // "embedded" or "remote"
	Endpoint  string `json:"endpoint,omitempty"`
	ReadOnly  bool   `json:"read_only"`
	Hosts     int    `json:"hosts"`
	Online    int    `json:"online"`
	Processes int    `json:"processes"`
	Running   int    `json:"running_tasks"`
	Version   string `json:"version"`
}

// NamespaceSummary is one namespace of the registry.
type NamespaceSummary struct {
	Name      string              `json:"name"`
	Processes int                 `json:"processes"`
	Hosts     int                 `json:"hosts"`
	Labels    map[string][]string `json:"labels,omitempty"` // key -> distinct values
}

// HostQuery selects hosts. Zero fields do not filter.
type HostQuery struct {
	Namespace string            `json:"namespace,omitempty"`
	Name      string            `json:"name,omitempty"`   // process name within Namespace
	Labels    map[string]string `json:"labels,omitempty"` // process label selector
	Hosts     []model.Host      `json:"hosts,omitempty"`
	AgentIDs  []string          `json:"agent_ids,omitempty"` // GSE 2.0 agent ids (canonical)
	Limit     int               `json:"limit,omitempty"`
}

// HostView is one host with the matching processes on it.
type HostView struct {
	model.HostInfo
	Procs []ProcView `json:"procs,omitempty"`
}

// ProcView is the last known state of one process on one host.
type ProcView struct {
	Key     string            `json:"proc"`
	Labels  map[string]string `json:"labels,omitempty"`
	Status  model.ProcStatus  `json:"status"`
	Updated int64             `json:"updated,omitempty"` // unix seconds of the last report
}

// ProcQuery selects definitions.
type ProcQuery struct {
	Namespace string            `json:"namespace,omitempty"`
	Name      string            `json:"name,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Host      *model.Host       `json:"host,omitempty"`
}

// Selector picks (host, process) targets from the registry: the processes
// in Namespace (and Name, and matching Labels), on every host they are
// deployed on, or only on Hosts when given, and only the (host, process)
// pairs of Targets when given (e.g. the failed ones of a task, retried as
// one task). A pair that is not deployed is not a target.
type Selector struct {
	Namespace string            `json:"namespace,omitempty"`
	Name      string            `json:"name,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	// Hosts go on the wire in the compact form "cloud:ip" (wire.Hosts:
	// a select-all of 100,000 hosts is a 1.6 MB request); the object
	// form {ip, bk_cloud_id} is read too.
	Hosts   wire.Hosts     `json:"hosts,omitempty"`
	Targets []model.Target `json:"targets,omitempty"`
}

// Empty reports whether the selector selects nothing at all.
func (s Selector) Empty() bool {
	return s.Namespace == "" && s.Name == "" && len(s.Labels) == 0 && len(s.Hosts) == 0 && len(s.Targets) == 0
}

// OperateRequest is one operation. Either Selector picks registered
// definitions, or Items carries definitions with their hosts inline (the
// API's forms); inline definitions are saved to the registry first, so the
// agents and later status queries know them (except for a status op, which
// only reads: it never changes the registry).
type OperateRequest struct {
	Op       model.OpType       `json:"op_type"`
	Selector Selector           `json:"selector,omitzero"`
	Items    []model.ProcessDef `json:"items,omitempty"`
	Source   string             `json:"source,omitempty"`
	Operator string             `json:"operator,omitempty"`
	// Suppliers is stored with the task as it is (model.Task.Suppliers).
	Suppliers map[string]int `json:"bk_supplier_ids,omitempty"`
	// ByAgentID lists the targets whose host the request named by GSE 2.0
	// agent id, each with that id (Target.AgentID): their results carry it,
	// so that the result queries key each host the way the request named
	// it. A target not listed was named "cloud:ip".
	ByAgentID []model.Target `json:"by_agent_id,omitempty"`
	// Rollout, when given, rolls the operation batch by batch over the
	// targets' hosts (see model.Rollout); checked at the entrance.
	Rollout *model.RolloutSpec `json:"rollout,omitempty"`
}

// TaskView is a task with its sub-results (final and not).
type TaskView struct {
	Task    model.Task     `json:"task"`
	Results []model.Result `json:"results"`
	// Roll is where a rolling task is: its state, batches, threshold and
	// why it stopped (nil for another task).
	Roll *model.RollView `json:"roll,omitempty"`
}

// GroupRequest sets a namespace's process group on hosts.
type GroupRequest struct {
	Namespace string              `json:"namespace"`
	Hosts     []model.Host        `json:"hosts"`
	Resource  model.GroupResource `json:"resource"`
	// Suppliers is stored with each group as it is (ProcessGroup.SupplierID).
	Suppliers map[string]int `json:"bk_supplier_ids,omitempty"`
}

// GroupResult is one host's answer to a GroupRequest.
type GroupResult struct {
	Host    model.Host `json:"host"`
	Code    int        `json:"error_code"`
	Message string     `json:"error_msg"`
}

// GroupQuery selects process groups. Zero fields do not filter.
type GroupQuery struct {
	Namespace string       `json:"namespace,omitempty"`
	Hosts     []model.Host `json:"hosts,omitempty"`
}
