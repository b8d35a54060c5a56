// Package scenario tells a story with the simulated fleet: a TOML file of
// timed steps (at 5 s take 3% of web offline; at 10 s crash nginx on 10
// hosts; at 20 s bring them back), each a live control of the simulator
// (model.SimAction) or an operation, run against a backend.Backend.
//
// A Runner plays the steps on a Clock: the wall clock for a live demo
// (`gseproc demo FILE` opens the console on it), or a scenario clock that
// moves only as the story does for a headless run (Headless), where the
// fleet's own timed behaviour (flapping agents, relaunches after backoff)
// is advanced on the same clock. Which hosts a step picks is a hash of the
// fleet's seed, so the same seed tells the same story: the same events,
// the same final states.
//
// A file is input like any other: unknown keys, bad values and steps out
// of order are refused with the field named (step[2].share).
package scenario

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/model"
)

// ActionOp is a step that runs an operation (Op) on the selected
// processes, as an operator would, and waits for its task to finish.
const ActionOp = "op"

// MaxSteps and MaxLength bound a scenario.
const (
	MaxSteps  = 1000
	MaxLength = 24 * time.Hour
)

// Scenario is a parsed, checked story.
type Scenario struct {
	Name        string
	Description string
	// Fleet is the simulated fleet the story is told on: the [fleet]
	// table over the defaults of [simulator].
	Fleet config.SimulatorConfig
	// End is how long the story runs (at least its last step; default
	// the last step plus 10 s, so what it set going plays out).
	End   time.Duration
	Steps []Step
}

// Step is one timed step.
type Step struct {
	At time.Duration
	// Sim is the control (Action "" when the step is an op).
	Sim backend.SimRequest
	// Op is the operation of an "op" step.
	Op *model.OpType
	// Rollout rolls an op step batch by batch (nil: all hosts at once);
	// checked when the file is parsed.
	Rollout *model.RolloutSpec
}

// What is the step in words.
func (s Step) What() string {
	if s.Op != nil && s.Rollout != nil {
		return fmt.Sprintf("rolling %s on %s", *s.Op, s.Sim.Selector.Scope())
	}
	if s.Op != nil {
		return fmt.Sprintf("op %s on %s", *s.Op, s.Sim.Selector.Scope())
	}
	return fmt.Sprintf("%s on %s", s.Sim.Action, s.Sim.Selector.Scope())
}

// file is the TOML form.
type file struct {
	Name        string          `toml:"name"`
	Description string          `toml:"description"`
	End         config.Duration `toml:"end"`
	Fleet       *fleetTable     `toml:"fleet"`
	Step        []stepTable     `toml:"step"`
}

type fleetTable struct {
	Hosts           *int             `toml:"hosts"`
	Seed            *int64           `toml:"seed"`
	Clouds          *int             `toml:"clouds"`
	Namespaces      []string         `toml:"namespaces"`
	LatencyMedian   *config.Duration `toml:"latency_median"`
	LatencyP99      *config.Duration `toml:"latency_p99"`
	FailureRate     *float64         `toml:"failure_rate"`
	OfflineRate     *float64         `toml:"offline_rate"`
	UnreachableRate *float64         `toml:"unreachable_rate"`
	CrashRate       *float64         `toml:"crash_rate"`
}

type stepTable struct {
	At           string             `toml:"at"`
	Action       string             `toml:"action"`
	Op           string             `toml:"op"`
	Namespace    string             `toml:"namespace"`
	Name         string             `toml:"name"`
	Labels       map[string]string  `toml:"labels"`
	Hosts        []string           `toml:"hosts"`
	Share        share              `toml:"share"`
	Count        int                `toml:"count"`
	Latency      config.Duration    `toml:"latency"`
	LatencyP99   config.Duration    `toml:"latency_p99"`
	Rate         *float64           `toml:"rate"`
	RestartFails share              `toml:"restart_fails"`
	Times        int                `toml:"times"`
	Every        config.Duration    `toml:"every"`
	Note         string             `toml:"note"`
	Rollout      *model.RolloutSpec `toml:"rollout"`
}

// share is "3%" or 0.03 in TOML.
type share struct {
	v   float64
	err error
}

func (s *share) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case string:
		s.v, s.err = model.ParseShare(x)
	case float64:
		s.v = x
	case int64:
		s.v = float64(x)
	default:
		s.err = fmt.Errorf("%v is not a share: write \"3%%\" or 0.03", v)
	}
	return nil // reported with the field's name by Parse
}

// Load reads and parses the scenario file at path.
func Load(path string) (Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Scenario{}, fmt.Errorf("read scenario: %w", err)
	}
	sc, err := Parse(data)
	if err != nil {
		return Scenario{}, fmt.Errorf("scenario %s: %w", path, err)
	}
	return sc, nil
}

// Parse reads a scenario, refusing unknown keys and naming every bad field.
func Parse(data []byte) (Scenario, error) {
	var f file
	md, err := toml.Decode(string(data), &f)
	if err != nil {
		return Scenario{}, fmt.Errorf("parse: %w", err)
	}
	v := &model.Validator{}
	for _, k := range md.Undecoded() {
		v.Addf(k.String(), "unknown key")
	}
	sc := Scenario{Name: strings.TrimSpace(f.Name), Description: strings.TrimSpace(f.Description), Fleet: config.Default().Simulator}
	v.CheckName("name", strings.ReplaceAll(sc.Name, " ", "_"), true, 80)
	if ft := f.Fleet; ft != nil {
		set(&sc.Fleet.Hosts, ft.Hosts)
		set(&sc.Fleet.Seed, ft.Seed)
		set(&sc.Fleet.Clouds, ft.Clouds)
		set(&sc.Fleet.LatencyMedian, ft.LatencyMedian)
		set(&sc.Fleet.LatencyP99, ft.LatencyP99)
		set(&sc.Fleet.FailureRate, ft.FailureRate)
		set(&sc.Fleet.OfflineRate, ft.OfflineRate)
		set(&sc.Fleet.UnreachableRate, ft.UnreachableRate)
		set(&sc.Fleet.CrashRate, ft.CrashRate)
		if ft.Namespaces != nil {
			sc.Fleet.Namespaces = ft.Namespaces
		}
	}
	if sc.Fleet.Seed == 0 {
		v.Add("fleet.seed", "must not be 0: a story is told on a fixed seed")
	}
	if err := sc.Fleet.Validate(); err != nil {
		v.Add("fleet", err.Error())
	}
	if len(f.Step) == 0 || len(f.Step) > MaxSteps {
		v.Addf("step", "want 1 to %d steps, got %d", MaxSteps, len(f.Step))
	}
	var last time.Duration
	for i, st := range f.Step {
		p := fmt.Sprintf("step[%d].", i)
		s, ok := parseStep(v, p, st)
		if !ok {
			continue
		}
		if s.At < last {
			v.Addf(p+"at", "%s is before the step above (%s): steps come in time order", s.At, last)
		}
		last = s.At
		if ns := s.Sim.Selector.Namespace; ns != "" && !slices.Contains(sc.Fleet.Namespaces, ns) {
			v.Addf(p+"namespace", "%q is not one of the fleet's namespaces %v", ns, sc.Fleet.Namespaces)
		}
		sc.Steps = append(sc.Steps, s)
	}
	sc.End = f.End.D()
	switch {
	case sc.End == 0:
		sc.End = last + 10*time.Second
	case sc.End < last:
		v.Addf("end", "%s is before the last step (%s)", sc.End, last)
	}
	if sc.End > MaxLength {
		v.Addf("end", "%s is longer than %s", sc.End, MaxLength)
	}
	if err := v.Err(); err != nil {
		return Scenario{}, err
	}
	return sc, nil
}

func set[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

// parseStep checks one step; ok is false when it could not be read at all.
func parseStep(v *model.Validator, p string, st stepTable) (Step, bool) {
	var s Step
	at, err := time.ParseDuration(st.At)
	switch {
	case st.At == "":
		v.Add(p+"at", "required: when the step happens, e.g. \"5s\"")
		return s, false
	case err != nil:
		v.Addf(p+"at", "%q is not a duration like 5s or 1m30s", st.At)
		return s, false
	case at < 0 || at > MaxLength:
		v.Addf(p+"at", "%s is not in [0,%s]", at, MaxLength)
		return s, false
	}
	s.At = at
	if st.Share.err != nil {
		v.Add(p+"share", st.Share.err.Error())
	}
	if st.RestartFails.err != nil {
		v.Add(p+"restart_fails", st.RestartFails.err.Error())
	}
	req := backend.SimRequest{
		SimChange: model.SimChange{Action: model.SimAction(st.Action), Share: st.Share.v, Count: st.Count,
			LatencyMS: int(st.Latency.D().Milliseconds()), LatencyP99MS: int(st.LatencyP99.D().Milliseconds()),
			Rate: st.Rate, RestartFails: st.RestartFails.v, Times: st.Times, EveryMS: int(st.Every.D().Milliseconds()), Note: st.Note},
		Selector: backend.Selector{Namespace: st.Namespace, Name: st.Name, Labels: st.Labels},
		Source:   "demo",
	}
	for j, h := range st.Hosts {
		hh, err := model.ParseAgentID(h)
		if err != nil {
			v.Addf(fmt.Sprintf("%shosts[%d]", p, j), "%v", err)
			continue
		}
		req.Selector.Hosts = append(req.Selector.Hosts, hh)
	}
	if st.Action == ActionOp {
		op, err := model.ParseOp(st.Op)
		if err != nil {
			v.Add(p+"op", err.Error())
		}
		s.Op = &op
		if st.Rollout != nil {
			spec := *st.Rollout
			spec.Parse(v, p+"rollout.")
			s.Rollout = &spec
		}
		if req.Selector.Namespace == "" {
			v.Add(p+"namespace", "required for an op step")
		}
		if req.Share != 0 || req.Count != 0 {
			v.Add(p+"share", "an op step acts on every selected process; narrow it with name, labels or hosts")
		}
		req.Action = ""
		s.Sim = req
		return s, true
	}
	if st.Op != "" {
		v.Add(p+"op", "only an op step (action = \"op\") takes an op")
	}
	if st.Rollout != nil {
		v.Add(p+"rollout", "only an op step (action = \"op\") is rolled")
	}
	var ve model.ValidationError
	if err := req.Validate(); errors.As(err, &ve) {
		for _, fe := range ve {
			v.Add(p+fe.Field, fe.Reason)
		}
	} else if err != nil {
		v.Add(p+"action", err.Error())
	}
	s.Sim = req
	return s, true
}
