package model

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rolling operations. A task with a Rollout does not send its op to every
// host at once: it goes batch by batch over the hosts (all of a host's
// targets in the same batch), an optional first canary batch, a pause
// between batches (a duration, or until an operator resumes), and a
// failure threshold that stops the roll. DecideRoll is the one rule: it
// is told where the roll is and answers what to do next; the engine does
// it.

// Quantity is a count of hosts or a percentage ("10%") of them.
type Quantity struct {
	N       int
	Percent bool
}

func (q Quantity) String() string {
	if q.Percent {
		return strconv.Itoa(q.N) + "%"
	}
	return strconv.Itoa(q.N)
}

// IsZero reports whether q is unset (0, as a count).
func (q Quantity) IsZero() bool { return q.N == 0 && !q.Percent }

// Of is q over total: a count as it is, a percentage rounded up.
func (q Quantity) Of(total int) int {
	if !q.Percent {
		return q.N
	}
	return (total*q.N + 99) / 100
}

// Exceeded reports whether bad failures over size targets exceed q taken
// as the failures tolerated: more than N, or more than N% of size.
func (q Quantity) Exceeded(bad, size int) bool {
	if q.Percent {
		return bad*100 > q.N*size
	}
	return bad > q.N
}

// ParseQuantity reads "N" or "N%".
func ParseQuantity(s string) (Quantity, error) {
	s = strings.TrimSpace(s)
	num, pct := strings.CutSuffix(s, "%")
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || num == "" || strings.HasPrefix(num, "+") {
		return Quantity{}, fmt.Errorf("want a count (10) or a percentage (10%%), got %q", s)
	}
	return Quantity{N: n, Percent: pct}, nil
}

// FailScope is what a failure threshold is counted over.
type FailScope string

// Failure threshold scopes.
const (
	FailPerBatch FailScope = "batch" // the failures of the batch running
	FailPerTask  FailScope = "task"  // every failure of the task so far
)

// PauseManual is RolloutSpec.Pause for "wait until an operator resumes".
const PauseManual = "manual"

// RolloutSpec is a rollout as requests, the task record and scenario
// files ([step.rollout]) write it.
type RolloutSpec struct {
	// Batch is the hosts of one batch: "10" or "10%" of the task's hosts.
	Batch string `json:"batch" toml:"batch"`
	// Canary is the hosts of an optional first batch ("", "1", "5%"): a
	// failure in it stops the roll whatever MaxFail says.
	Canary string `json:"canary,omitempty" toml:"canary"`
	// Pause between batches: a duration ("30s"), "manual" (until an
	// operator resumes) or "" / "0" (none).
	Pause string `json:"pause,omitempty" toml:"pause"`
	// MaxFail is the failures tolerated ("0" when empty: the first
	// failure stops the roll), a count or a percentage of FailScope's
	// hosts. Unreachable and timed-out hosts are failures.
	MaxFail string `json:"max_fail,omitempty" toml:"max_fail"`
	// FailScope is "batch" (default) or "task".
	FailScope FailScope `json:"fail_scope,omitempty" toml:"fail_scope"`
}

// Rollout is a parsed, valid RolloutSpec.
type Rollout struct {
	Batch       Quantity
	Canary      Quantity
	Pause       time.Duration
	PauseManual bool
	MaxFail     Quantity
	FailScope   FailScope
}

// MaxRollPause bounds a timed pause between batches.
const MaxRollPause = 24 * time.Hour

// Parse checks the spec at the entrance and returns it in canonical form;
// every bad field is recorded in v under prefix (e.g. "rollout.").
func (s RolloutSpec) Parse(v *Validator, prefix string) Rollout {
	var r Rollout
	quantity := func(field, val string, required, zeroOK bool) Quantity {
		if strings.TrimSpace(val) == "" {
			if required {
				v.Add(prefix+field, "required: a count of hosts (10) or a percentage (10%)")
			}
			return Quantity{}
		}
		q, err := ParseQuantity(val)
		switch {
		case err != nil:
			v.Add(prefix+field, err.Error())
		case q.N < 0:
			v.Addf(prefix+field, "must not be negative, got %s", q)
		case q.Percent && q.N > 100:
			v.Addf(prefix+field, "a percentage is at most 100%%, got %s", q)
		case q.N == 0 && !zeroOK:
			v.Addf(prefix+field, "must be at least 1 host or 1%%, got %s", q)
		}
		return q
	}
	r.Batch = quantity("batch", s.Batch, true, false)
	if strings.TrimSpace(s.Canary) != "" {
		r.Canary = quantity("canary", s.Canary, false, true)
		if r.Canary.N == 0 {
			r.Canary = Quantity{}
		}
	}
	if r.Canary.N > 0 && r.Canary.Percent == r.Batch.Percent && r.Canary.N > r.Batch.N && r.Batch.N > 0 {
		v.Addf(prefix+"canary", "the canary batch (%s) must not be larger than a batch (%s)", r.Canary, r.Batch)
	}
	r.MaxFail = quantity("max_fail", s.MaxFail, false, true)
	switch p := strings.TrimSpace(s.Pause); p {
	case "", "0":
	case PauseManual:
		r.PauseManual = true
	default:
		d, err := time.ParseDuration(p)
		switch {
		case err != nil:
			v.Addf(prefix+"pause", "want a duration (30s, 5m) or %q, got %q", PauseManual, s.Pause)
		case d < 0:
			v.Addf(prefix+"pause", "must not be negative, got %s", p)
		case d > MaxRollPause:
			v.Addf(prefix+"pause", "at most %s (use %q to wait for an operator), got %s", MaxRollPause, PauseManual, p)
		}
		r.Pause = d
	}
	switch s.FailScope {
	case "", FailPerBatch:
		r.FailScope = FailPerBatch
	case FailPerTask:
		r.FailScope = FailPerTask
	default:
		v.Addf(prefix+"fail_scope", "want %q or %q, got %q", FailPerBatch, FailPerTask, s.FailScope)
	}
	return r
}

// ParseRollout parses s alone: a ValidationError names every bad field.
func ParseRollout(s RolloutSpec) (Rollout, error) {
	v := &Validator{}
	r := s.Parse(v, "rollout.")
	return r, v.Err()
}

// Spec is r written as a RolloutSpec (canonical strings).
func (r Rollout) Spec() RolloutSpec {
	s := RolloutSpec{Batch: r.Batch.String(), MaxFail: r.MaxFail.String(), FailScope: r.FailScope}
	if r.Canary.N > 0 {
		s.Canary = r.Canary.String()
	}
	switch {
	case r.PauseManual:
		s.Pause = PauseManual
	case r.Pause > 0:
		s.Pause = r.Pause.String()
	}
	return s
}

// String is the rollout in one line, e.g. "batch 10% · canary 1 · pause 30s · max-fail 2 per batch".
func (r Rollout) String() string {
	parts := []string{"batch " + r.Batch.String()}
	if r.Canary.N > 0 {
		parts = append(parts, "canary "+r.Canary.String())
	}
	switch {
	case r.PauseManual:
		parts = append(parts, "pause until resumed")
	case r.Pause > 0:
		parts = append(parts, "pause "+r.Pause.String())
	}
	parts = append(parts, "max-fail "+r.MaxFail.String()+" per "+string(r.FailScope))
	return strings.Join(parts, " · ")
}

// MarshalJSON writes the spec form.
func (r Rollout) MarshalJSON() ([]byte, error) { return json.Marshal(r.Spec()) }

// UnmarshalJSON reads the spec form and checks it.
func (r *Rollout) UnmarshalJSON(b []byte) error {
	var s RolloutSpec
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	p, err := ParseRollout(s)
	if err != nil {
		return err
	}
	*r = p
	return nil
}

// Batch is one batch of a plan: the targets [Lo, Hi) on Hosts hosts.
type Batch struct {
	Lo, Hi int
	Hosts  int
	Canary bool
}

// Plan cuts a task's targets into batches. hostTargets lists, in target
// order, how many consecutive targets each host has (targets grouped by
// host). The canary batch (if any) comes first; every batch has at least
// one host; the plan is the same for the same input, so a resumed roll
// finds the batches it started.
func (r Rollout) Plan(hostTargets []int) []Batch {
	hosts := len(hostTargets)
	var out []Batch
	lo, h := 0, 0
	take := func(n int, canary bool) {
		n = max(1, min(n, hosts-h))
		b := Batch{Lo: lo, Hosts: n, Canary: canary}
		for range n {
			lo += hostTargets[h]
			h++
		}
		b.Hi = lo
		out = append(out, b)
	}
	if c := r.Canary.Of(hosts); c > 0 && hosts > 0 {
		take(c, true)
	}
	size := max(1, r.Batch.Of(hosts))
	for h < hosts {
		take(size, false)
	}
	return out
}

// BatchProgress counts one batch's (or the whole task's) targets.
type BatchProgress struct {
	Size    int `json:"targets"`
	Pending int `json:"pending"` // not sent yet
	Running int `json:"running"`
	OK      int `json:"ok"`
	Bad     int `json:"failed"` // failed, timed out or unreachable: what --max-fail counts
	// Cancelled counts targets a cancel or a stopped roll ended: never
	// sent, or told to stop. They are not failures of the op (a stopped
	// roll's unsent batches listed them as failed).
	Cancelled int `json:"cancelled"`
	// LastFinished is when its latest result came (zero when none).
	LastFinished time.Time `json:"last_finished,omitzero"`
}

// Add counts one result.
func (p *BatchProgress) Add(r Result) {
	p.Size++
	p.add(r, 1)
}

// Move counts a target that went from state from to r.
func (p *BatchProgress) Move(from ResultState, r Result) {
	p.add(Result{State: from}, -1)
	p.add(r, 1)
}

func (p *BatchProgress) add(r Result, n int) {
	switch {
	case r.State == StatePending || r.State == "":
		p.Pending += n
	case r.State == StateRunning:
		p.Running += n
	case r.State.OK():
		p.OK += n
	case r.State == StateCancelled:
		p.Cancelled += n
	default:
		p.Bad += n
	}
	if n > 0 && r.Finished.After(p.LastFinished) {
		p.LastFinished = r.Finished
	}
}

// Complete reports whether every target of it is final.
func (p BatchProgress) Complete() bool { return p.Pending == 0 && p.Running == 0 }

// RollControl is what operators asked of a roll: kept apart from its
// progress (written by whichever server runs it), so that any server can
// pause, resume or abort it.
type RollControl struct {
	Paused   bool      `json:"paused,omitempty"`
	PausedBy string    `json:"paused_by,omitempty"`
	PausedAt time.Time `json:"paused_at,omitzero"`
	// Waiting is the batch whose start waits for an operator (a manual
	// pause), as the server running the roll wrote it; Released the
	// latest such batch an operator resumed. 0: none (batch 0 never waits).
	Waiting   int       `json:"waiting,omitempty"`
	Released  int       `json:"released,omitempty"`
	Aborted   bool      `json:"aborted,omitempty"`
	AbortedBy string    `json:"aborted_by,omitempty"`
	AbortedAt time.Time `json:"aborted_at,omitzero"`
}

// RollAction is what an operator asks of a running roll.
type RollAction string

// Roll actions.
const (
	// RollPause: no more hosts are sent the op (those running it finish)
	// until a resume.
	RollPause RollAction = "pause"
	// RollResume: the roll goes on (after a pause, or past a manual pause
	// between batches).
	RollResume RollAction = "resume"
	// RollAbort: the roll stops for good; the targets not sent yet are
	// cancelled (those running finish), and the task ends cancelled.
	RollAbort RollAction = "abort"
)

// ParseRollAction reads an action: an error names the valid ones.
func ParseRollAction(s string) (RollAction, error) {
	switch a := RollAction(s); a {
	case RollPause, RollResume, RollAbort:
		return a, nil
	}
	return "", fmt.Errorf("want pause, resume or abort, got %q", s)
}

// Apply changes c as operator by asks with act at now.
func (c RollControl) Apply(act RollAction, by string, now time.Time) RollControl {
	switch act {
	case RollPause:
		if !c.Paused {
			c.Paused, c.PausedBy, c.PausedAt = true, by, now
		}
	case RollResume:
		c.Paused, c.PausedBy, c.PausedAt = false, "", time.Time{}
		c.Released = max(c.Released, c.Waiting)
	case RollAbort:
		if !c.Aborted {
			c.Aborted, c.AbortedBy, c.AbortedAt = true, by, now
		}
	}
	return c
}

// RollInput is where a roll is: what DecideRoll is told.
type RollInput struct {
	Batches []Batch // the plan
	Started int     // batches started (0..len(Batches))
	// Current is the progress of batch Started-1 (zero when Started is 0);
	// Total that of the whole task.
	Current, Total BatchProgress
	Control        RollControl
	Now            time.Time
}

// RollDo is what a roll does next.
type RollDo string

// Roll decisions.
const (
	RollDispatch   RollDo = "dispatch"    // send batch Batch's pending targets (start it when Batch == Started)
	RollRunning    RollDo = "running"     // batch Batch is running: wait for its results
	RollWait       RollDo = "wait"        // wait until Until, then decide again
	RollWaitResume RollDo = "wait_resume" // wait for an operator to resume
	RollStop       RollDo = "stop"        // stop: no more targets are sent; Reason says why
	RollDone       RollDo = "done"        // every batch is over
)

// RollDecision is DecideRoll's answer.
type RollDecision struct {
	Do     RollDo
	Batch  int       // the batch it concerns (0-based)
	Until  time.Time // RollWait
	Reason string    // in words, for the task view and the log
	// Aborted: RollStop because an operator aborted the roll (not a threshold).
	Aborted bool
}

// DecideRoll says what a roll in state in does next. It starts nothing
// and reads no clock: in.Now is the time.
func DecideRoll(r Rollout, in RollInput) RollDecision {
	cur := in.Started - 1
	if in.Control.Aborted {
		by := in.Control.AbortedBy
		if by == "" {
			by = "an operator"
		}
		return RollDecision{Do: RollStop, Batch: max(cur, 0), Aborted: true, Reason: "aborted by " + by}
	}
	if cur >= 0 {
		b := in.Batches[cur]
		switch {
		case b.Canary && in.Current.Bad > 0:
			return RollDecision{Do: RollStop, Batch: cur, Reason: fmt.Sprintf(
				"canary batch failed: %d of %d targets failed", in.Current.Bad, in.Current.Size)}
		case r.FailScope == FailPerTask && r.MaxFail.Exceeded(in.Total.Bad, in.Total.Size):
			return RollDecision{Do: RollStop, Batch: cur, Reason: fmt.Sprintf(
				"failure threshold exceeded in batch %d: %d of the task's %d targets failed (max-fail %s per task)",
				cur+1, in.Total.Bad, in.Total.Size, r.MaxFail)}
		case r.FailScope != FailPerTask && r.MaxFail.Exceeded(in.Current.Bad, in.Current.Size):
			return RollDecision{Do: RollStop, Batch: cur, Reason: fmt.Sprintf(
				"failure threshold exceeded in batch %d: %d of its %d targets failed (max-fail %s per batch)",
				cur+1, in.Current.Bad, in.Current.Size, r.MaxFail)}
		}
		if in.Current.Pending > 0 {
			if in.Control.Paused {
				return RollDecision{Do: RollWaitResume, Batch: cur, Reason: pausedBy(in.Control)}
			}
			return RollDecision{Do: RollDispatch, Batch: cur, Reason: fmt.Sprintf("batch %d of %d running", cur+1, len(in.Batches))}
		}
		if in.Current.Running > 0 {
			reason := fmt.Sprintf("batch %d of %d running", cur+1, len(in.Batches))
			if in.Control.Paused {
				reason += "; " + pausedBy(in.Control) + ": no more hosts are sent the op"
			}
			return RollDecision{Do: RollRunning, Batch: cur, Reason: reason}
		}
	}
	next := in.Started
	if next >= len(in.Batches) {
		return RollDecision{Do: RollDone, Batch: max(cur, 0), Reason: fmt.Sprintf("all %d batches done", len(in.Batches))}
	}
	if in.Control.Paused {
		return RollDecision{Do: RollWaitResume, Batch: next, Reason: pausedBy(in.Control)}
	}
	if next > 0 {
		switch {
		case r.PauseManual && in.Control.Released < next:
			return RollDecision{Do: RollWaitResume, Batch: next, Reason: fmt.Sprintf(
				"batch %d of %d done: waiting for an operator to resume", next, len(in.Batches))}
		case r.Pause > 0 && in.Now.Before(in.Current.LastFinished.Add(r.Pause)):
			until := in.Current.LastFinished.Add(r.Pause)
			return RollDecision{Do: RollWait, Batch: next, Until: until, Reason: fmt.Sprintf(
				"batch %d of %d done: pausing %s before the next", next, len(in.Batches), r.Pause)}
		}
	}
	return RollDecision{Do: RollDispatch, Batch: next, Reason: fmt.Sprintf("batch %d of %d starting", next+1, len(in.Batches))}
}

func pausedBy(c RollControl) string {
	if c.PausedBy == "" {
		return "paused"
	}
	return "paused by " + c.PausedBy
}

// RollState is a roll's progress as the task record keeps it (written
// by the server running the task, fenced).
type RollState struct {
	Batches int `json:"batches"` // planned
	Started int `json:"started"` // batches started
	// Stopped says why the roll stopped before its last batch (a
	// threshold, an abort); StoppedBatch is the batch (1-based) it was in.
	Stopped      string `json:"stopped,omitempty"`
	StoppedBatch int    `json:"stopped_batch,omitempty"`
}

// RollView is a roll as the task view shows it: where it is, why, and
// every batch.
type RollView struct {
	// State: running, paused, waiting (a timed pause, until Until),
	// waiting_resume (a manual pause), stopped (Stopped says why), done,
	// cancelled (the task was cancelled).
	State     string      `json:"state"`
	Reason    string      `json:"reason"`
	Until     time.Time   `json:"until,omitzero"`
	Threshold string      `json:"threshold"` // "max-fail 2 per batch"
	Stopped   string      `json:"stopped,omitempty"`
	Started   int         `json:"started"` // batches started
	Control   RollControl `json:"control"`
	Batches   []BatchView `json:"batches"`
}

// BatchView is one batch of a RollView: its hosts, state (done, running,
// waiting, not_sent) and progress.
type BatchView struct {
	Hosts  int    `json:"hosts"`
	Canary bool   `json:"canary,omitempty"`
	State  string `json:"state"`
	BatchProgress
}

// Roll view and batch states.
const (
	RollStateRunning       = "running"
	RollStatePaused        = "paused"
	RollStateWaiting       = "waiting"
	RollStateWaitingResume = "waiting_resume"
	RollStateStopped       = "stopped"
	RollStateDone          = "done"
	RollStateCancelled     = "cancelled"
	BatchNotSent           = "not_sent"
)

// Threshold is the failure threshold in words.
func (r Rollout) Threshold() string {
	return "max-fail " + r.MaxFail.String() + " per " + string(r.FailScope)
}

// HostRuns lists how many consecutive targets each host has, in order
// (Plan's input): targets of a roll are grouped by host.
func HostRuns(hosts []Host) []int {
	var out []int
	for i, h := range hosts {
		if i > 0 && hosts[i-1] == h {
			out[len(out)-1]++
			continue
		}
		out = append(out, 1)
	}
	return out
}

// PlanProgress counts results (in target order) per batch of plan and
// over the whole task.
func PlanProgress(plan []Batch, results []Result) (prog []BatchProgress, total BatchProgress) {
	return PlanProgressOf(plan, func(i int) Result { return results[i] })
}

// PlanProgressOf is PlanProgress of the results result(i) gives by
// target index (a table's: ResultTable), none made all at once.
func PlanProgressOf(plan []Batch, result func(i int) Result) (prog []BatchProgress, total BatchProgress) {
	prog = make([]BatchProgress, len(plan))
	for b, bt := range plan {
		for i := bt.Lo; i < bt.Hi; i++ {
			res := result(i)
			prog[b].Add(res)
			total.Add(res)
		}
	}
	return prog, total
}

// ViewRoll builds the view of task t (a rolling one) from its plan, the
// progress of each batch and of the whole task, and its control.
func ViewRoll(t Task, c RollControl, plan []Batch, prog []BatchProgress, total BatchProgress, now time.Time) RollView {
	var st RollState
	if t.Roll != nil {
		st = *t.Roll
	}
	v := RollView{Threshold: t.Rollout.Threshold(), Stopped: st.Stopped, Started: st.Started, Control: c,
		Batches: make([]BatchView, len(plan))}
	in := RollInput{Batches: plan, Started: st.Started, Total: total, Control: c, Now: now}
	if st.Started > 0 && st.Started <= len(prog) {
		in.Current = prog[st.Started-1]
	}
	d := DecideRoll(*t.Rollout, in)
	v.Reason = d.Reason
	switch {
	case st.Stopped != "":
		v.State, v.Reason = RollStateStopped, st.Stopped
	case t.Status == TaskCanceled:
		v.State, v.Reason = RollStateCancelled, "the task was cancelled"
	case t.Status.Final() || d.Do == RollDone:
		v.State = RollStateDone
	case d.Do == RollStop:
		v.State = RollStateStopped
	case d.Do == RollWait:
		v.State, v.Until = RollStateWaiting, d.Until
	case d.Do == RollWaitResume && !c.Paused && c.Waiting >= d.Batch:
		// (Said once the server running the roll has stored that it
		// waits there: a resume from then on releases it.)
		v.State = RollStateWaitingResume
	case c.Paused:
		v.State = RollStatePaused
	default:
		v.State = RollStateRunning
	}
	over := v.State == RollStateStopped || v.State == RollStateCancelled || v.State == RollStateDone
	for i, b := range plan {
		bv := BatchView{Hosts: b.Hosts, Canary: b.Canary}
		if i < len(prog) {
			bv.BatchProgress = prog[i]
		}
		switch {
		case i < st.Started && bv.Complete():
			bv.State = RollStateDone
		case i < st.Started:
			bv.State = RollStateRunning
		case over:
			bv.State = BatchNotSent
		default:
			bv.State = RollStateWaiting
		}
		v.Batches[i] = bv
	}
	return v
}
