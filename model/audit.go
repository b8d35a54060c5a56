package model

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
)

// Actor is who asked for a change: the gateway app and the user it calls
// for (authenticated by the API server), the operator at a terminal (the
// CLI's local user, the console's operator, an SSH key's operator name)
// and the channel it came through.
type Actor struct {
	App      string `json:"app,omitempty"`
	User     string `json:"user,omitempty"`
	Operator string `json:"operator,omitempty"`
	// Via is the channel: "api:<endpoint>", "cli", "console", "ssh", "engine".
	Via string `json:"via,omitempty"`
}

// String is "operator (user via app, via)" with the empty parts left out.
func (a Actor) String() string {
	var parts []string
	for _, p := range []struct{ k, v string }{{"app", a.App}, {"user", a.User}, {"operator", a.Operator}, {"via", a.Via}} {
		if p.v != "" {
			parts = append(parts, p.k+"="+p.v)
		}
	}
	if len(parts) == 0 {
		return "(unknown)"
	}
	return strings.Join(parts, " ")
}

// MaxActorField bounds each field of an Actor.
const MaxActorField = 128

// CheckActorField checks one actor field (or audit filter) from outside
// (a header, a query, a config file): valid UTF-8, printable, no spaces at
// the ends, at most MaxActorField bytes. Empty is allowed (unknown).
func CheckActorField(s string) error {
	if len(s) > MaxActorField {
		return fmt.Errorf("%d bytes, more than %d", len(s), MaxActorField)
	}
	for _, r := range s {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return fmt.Errorf("%q holds an invalid or non-printable character", s)
		}
	}
	if strings.TrimSpace(s) != s {
		return fmt.Errorf("%q has spaces at its ends", s)
	}
	return nil
}

// Audit actions.
const (
	AuditOperate       = "operate"        // an operation was asked for (a task created, or refused)
	AuditTaskFinished  = "task_finished"  // a task ended: its counts
	AuditCancel        = "cancel"         // a task was cancelled
	AuditSaveProcess   = "save_process"   // a definition created or replaced
	AuditDeleteProcess = "delete_process" // a definition removed
	AuditSimulate      = "simulate"       // a live control of the simulated fleet (Op names it)
	AuditSeed          = "seed"           // definitions of the simulated fleet added to the registry at start
	// AuditScopeDenied: a request refused because it reached outside the
	// caller's scopes (a namespace or business not granted); Op names the
	// endpoint, Namespaces what was asked for, Summary the field and why.
	AuditScopeDenied = "scope_denied"
	AuditSetGroup    = "set_process_group" // a namespace's process group set (or cleared) on hosts
	// A rolling task paused, resumed or aborted (RollAction).
	AuditPause  = string(RollPause)
	AuditResume = string(RollResume)
	AuditAbort  = string(RollAbort)
)

// AuditActions lists every audit action.
var AuditActions = []string{AuditOperate, AuditTaskFinished, AuditCancel, AuditSaveProcess, AuditDeleteProcess,
	AuditSimulate, AuditSeed, AuditScopeDenied, AuditSetGroup, AuditPause, AuditResume, AuditAbort}

// Audit outcomes.
const (
	AuditOK      = "ok"      // done (for operate: the task was created)
	AuditRefused = "refused" // refused before anything happened (validation, read-only, scope)
	AuditError   = "error"   // failed while being done
)

// AuditEntry is one record of the audit trail: who asked for what, on
// what, and what came of it.
type AuditEntry struct {
	Seq        uint64    `json:"seq"` // assigned by the store, increasing
	Time       time.Time `json:"time"`
	Actor      Actor     `json:"actor"`
	Action     string    `json:"action"`
	Op         string    `json:"op,omitempty"`         // the op's name (operate, task_finished)
	Namespaces []string  `json:"namespaces,omitempty"` // the scope touched, sorted
	// Targets names what was acted on: the selector ("namespace web,
	// labels [app=nginx]"), process keys, a task id; at most MaxAuditTargets.
	Targets     []string `json:"targets,omitempty"`
	TargetCount int      `json:"target_count,omitempty"` // (host, process) targets of an operation
	TaskID      string   `json:"task_id,omitempty"`
	Result      string   `json:"result"`            // AuditOK, AuditRefused, AuditError
	Summary     string   `json:"summary,omitempty"` // counts, or the reason of a refusal
}

// MaxAuditTargets bounds the target names one entry keeps (the count is
// always exact).
const MaxAuditTargets = 50

// CapTargets keeps the first MaxAuditTargets names and says how many more.
func CapTargets(names []string) []string {
	if len(names) <= MaxAuditTargets {
		return names
	}
	out := slices.Clone(names[:MaxAuditTargets])
	return append(out, fmt.Sprintf("... and %d more", len(names)-MaxAuditTargets))
}

// AuditQuery selects audit entries; zero fields do not filter. Matches
// of the text fields are exact.
type AuditQuery struct {
	Since     time.Time `json:"since,omitzero"`   // Time >= Since
	Until     time.Time `json:"until,omitzero"`   // Time < Until
	Before    uint64    `json:"before,omitempty"` // Seq < Before (paging back)
	App       string    `json:"app,omitempty"`
	User      string    `json:"user,omitempty"`
	Operator  string    `json:"operator,omitempty"`
	Namespace string    `json:"namespace,omitempty"` // one of the entry's namespaces
	Action    string    `json:"action,omitempty"`
	Op        string    `json:"op,omitempty"`
	TaskID    string    `json:"task_id,omitempty"`
	Result    string    `json:"result,omitempty"`
	Limit     int       `json:"limit,omitempty"` // newest first; <= 0: DefaultAuditLimit
}

// DefaultAuditLimit is the entries a query returns when it sets no limit;
// MaxAuditLimit is the most it may ask for.
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 10000
)

// Match reports whether e is selected by q (Limit aside).
func (q AuditQuery) Match(e AuditEntry) bool {
	switch {
	case !q.Since.IsZero() && e.Time.Before(q.Since),
		!q.Until.IsZero() && !e.Time.Before(q.Until),
		q.Before != 0 && e.Seq >= q.Before,
		q.App != "" && e.Actor.App != q.App,
		q.User != "" && e.Actor.User != q.User,
		q.Operator != "" && e.Actor.Operator != q.Operator,
		q.Namespace != "" && !slices.Contains(e.Namespaces, q.Namespace),
		q.Action != "" && e.Action != q.Action,
		q.Op != "" && e.Op != q.Op,
		q.TaskID != "" && e.TaskID != q.TaskID,
		q.Result != "" && e.Result != q.Result:
		return false
	}
	return true
}

// Want is how many entries the query returns at most.
func (q AuditQuery) Want() int {
	if q.Limit <= 0 {
		return DefaultAuditLimit
	}
	return min(q.Limit, MaxAuditLimit)
}

// ValidateInto checks the query's fields.
func (q AuditQuery) ValidateInto(v *Validator) {
	if q.Limit < 0 || q.Limit > MaxAuditLimit {
		v.Addf("limit", "%d is not in [0,%d]", q.Limit, MaxAuditLimit)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		v.Add("until", "must be after since")
	}
	if q.Action != "" && !slices.Contains(AuditActions, q.Action) {
		v.Addf("action", "%q is not one of %s", q.Action, strings.Join(AuditActions, ", "))
	}
	switch q.Result {
	case "", AuditOK, AuditRefused, AuditError:
	default:
		v.Addf("result", "%q is not one of ok, refused, error", q.Result)
	}
	for _, f := range []struct{ name, val string }{{"app", q.App}, {"user", q.User}, {"operator", q.Operator}, {"namespace", q.Namespace}, {"op", q.Op}, {"task_id", q.TaskID}} {
		if err := CheckActorField(f.val); err != nil {
			v.Add(f.name, err.Error())
		}
	}
}
