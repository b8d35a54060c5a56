package model

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// SimAction is one live control of a simulated fleet, for demos and
// rehearsals: what the presenter makes happen to the simulated agents.
// Nothing of it reaches a real agent (see ErrNotSimulated).
type SimAction string

// Simulator controls.
const (
	SimOffline  SimAction = "offline"  // the picked hosts' agents stop answering
	SimOnline   SimAction = "online"   // the picked hosts' agents answer again (and stop flapping)
	SimCrash    SimAction = "crash"    // the process exits abnormally on the picked hosts; their agents apply the restart policy
	SimMemory   SimAction = "memory"   // the process's memory goes past its limit on the picked hosts; their agents stop and hold it
	SimLatency  SimAction = "latency"  // the picked hosts answer with this latency profile
	SimFailures SimAction = "failures" // the picked hosts' commands fail at this rate
	SimFlap     SimAction = "flap"     // the picked hosts' agents go offline and back, Times times, every Every
	SimRestore  SimAction = "restore"  // the picked hosts back to the profile: online, not flapping, profile latency and failure rate
)

// SimActions lists every control, in the order help shows them.
var SimActions = []SimAction{SimOffline, SimOnline, SimCrash, SimMemory, SimLatency, SimFailures, SimFlap, SimRestore}

// SimActionHelp says what each control does, in one line.
var SimActionHelp = map[SimAction]string{
	SimOffline:  "take a share of hosts offline (their agents stop answering)",
	SimOnline:   "bring hosts back online (and stop their flapping)",
	SimCrash:    "crash a process on a share of its hosts (the agents restart it by policy)",
	SimMemory:   "push a process's memory past its limit (the agents stop it and hold it down)",
	SimLatency:  "set the hosts' answer latency (median and p99, ms)",
	SimFailures: "set the rate at which the hosts' commands fail (0-1)",
	SimFlap:     "make the hosts' agents flap: offline and back, times, every period",
	SimRestore:  "put hosts back to the fleet's profile (online, steady, profile latency and failure rate)",
}

// ProcessLevel reports whether the action acts on a process (and so needs
// a namespace and a process name in its selector) rather than on agents.
func (a SimAction) ProcessLevel() bool { return a == SimCrash || a == SimMemory }

// Valid reports whether a is a known control.
func (a SimAction) Valid() bool { _, ok := SimActionHelp[a]; return ok }

// ErrNotSimulated refuses a simulator control on a fleet of real agents.
var ErrNotSimulated = errors.New("the fleet is real agents: simulator controls act only on a simulated fleet " +
	"(the embedded engine, or a server with server.fleet = \"simulated\" or \"mixed\" or --demo)")

// Limits of the controls' parameters.
const (
	MaxSimLatencyMS  = 120_000 // 2 minutes
	MaxSimFlapTimes  = 1000
	MinSimFlapEvery  = 100       // ms
	MaxSimFlapEvery  = 3_600_000 // 1 h, in ms
	DefaultFlapTimes = 3
	DefaultFlapEvery = 2000 // ms
)

// SimChange is one control with its parameters, parsed and checked by
// Validate. How many hosts it acts on is Share of the selected ones
// (rounded up, at least one when any is selected) or Count of them; with
// neither, all of them.
type SimChange struct {
	Action SimAction `json:"action"`
	Share  float64   `json:"share,omitempty"` // (0,1]
	Count  int       `json:"count,omitempty"`
	// latency: median and 99th percentile, milliseconds (0: answer at once).
	LatencyMS    int `json:"latency_ms,omitempty"`
	LatencyP99MS int `json:"latency_p99_ms,omitempty"`
	// failures: the rate commands fail at, in [0,1] (nil: required).
	Rate *float64 `json:"rate,omitempty"`
	// crash: the share of relaunches that fail (those processes go to
	// BACKOFF and are relaunched later), in [0,1].
	RestartFails float64 `json:"restart_fails,omitempty"`
	// flap: how many times the agent goes offline and back, and how long
	// each half lasts (ms); defaults DefaultFlapTimes, DefaultFlapEvery.
	Times   int `json:"times,omitempty"`
	EveryMS int `json:"every_ms,omitempty"`
	// Note is the presenter's words, carried into the event (a scenario
	// step's note).
	Note string `json:"note,omitempty"`
}

// Validate checks c, naming each bad field under prefix, and fills the
// flap defaults.
func (c *SimChange) Validate(v *Validator, prefix string) {
	if !c.Action.Valid() {
		names := make([]string, len(SimActions))
		for i, a := range SimActions {
			names[i] = string(a)
		}
		v.Addf(prefix+"action", "%q is not one of %s", c.Action, strings.Join(names, ", "))
	}
	if c.Share < 0 || c.Share > 1 || math.IsNaN(c.Share) {
		v.Addf(prefix+"share", "%v is not in (0,1]", c.Share)
	}
	if c.Count < 0 {
		v.Addf(prefix+"count", "%d must be >= 0", c.Count)
	}
	if c.Share > 0 && c.Count > 0 {
		v.Add(prefix+"count", "give share or count, not both")
	}
	if c.LatencyMS < 0 || c.LatencyMS > MaxSimLatencyMS {
		v.Addf(prefix+"latency_ms", "%d is not in [0,%d]", c.LatencyMS, MaxSimLatencyMS)
	}
	if c.LatencyP99MS < 0 || c.LatencyP99MS > MaxSimLatencyMS {
		v.Addf(prefix+"latency_p99_ms", "%d is not in [0,%d]", c.LatencyP99MS, MaxSimLatencyMS)
	} else if c.LatencyP99MS != 0 && c.LatencyP99MS < c.LatencyMS {
		v.Addf(prefix+"latency_p99_ms", "%d must be >= latency_ms (%d)", c.LatencyP99MS, c.LatencyMS)
	}
	if c.Rate != nil && (*c.Rate < 0 || *c.Rate > 1 || math.IsNaN(*c.Rate)) {
		v.Addf(prefix+"rate", "%v is not in [0,1]", *c.Rate)
	}
	if c.Action == SimFailures && c.Rate == nil {
		v.Add(prefix+"rate", "required for failures: the rate commands fail at, in [0,1]")
	}
	if c.RestartFails < 0 || c.RestartFails > 1 || math.IsNaN(c.RestartFails) {
		v.Addf(prefix+"restart_fails", "%v is not in [0,1]", c.RestartFails)
	}
	if c.Times < 0 || c.Times > MaxSimFlapTimes {
		v.Addf(prefix+"times", "%d is not in [0,%d]", c.Times, MaxSimFlapTimes)
	}
	if c.EveryMS != 0 && (c.EveryMS < MinSimFlapEvery || c.EveryMS > MaxSimFlapEvery) {
		v.Addf(prefix+"every_ms", "%d is not in [%d,%d]", c.EveryMS, MinSimFlapEvery, MaxSimFlapEvery)
	}
	if len(c.Note) > 200 {
		v.Addf(prefix+"note", "%d bytes is longer than 200", len(c.Note))
	} else if strings.ContainsFunc(c.Note, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		v.Add(prefix+"note", "must not contain control characters")
	}
	if c.Action == SimFlap {
		if c.Times == 0 {
			c.Times = DefaultFlapTimes
		}
		if c.EveryMS == 0 {
			c.EveryMS = DefaultFlapEvery
		}
	}
}

// PickCount is how many of n selected hosts a change acts on: Count (at
// most n), else Share of n rounded up (at least 1 when n > 0), else n.
func (c SimChange) PickCount(n int) int {
	switch {
	case n <= 0:
		return 0
	case c.Count > 0:
		return min(c.Count, n)
	case c.Share > 0:
		k := int(math.Ceil(c.Share*float64(n) - 1e-9))
		return min(max(k, 1), n)
	}
	return n
}

// ParseShare reads a share of hosts: "3%", "0.03" or "1" (all). It is in (0,1].
func ParseShare(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	t = strings.TrimSuffix(t, "%")
	x, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, fmt.Errorf("%q is not a share: write 3%% or 0.03", s)
	}
	if pct {
		x /= 100
	}
	if x <= 0 || x > 1 {
		return 0, fmt.Errorf("%q is not in (0%%,100%%]", s)
	}
	return x, nil
}

// SimOutcome is what a control did.
type SimOutcome struct {
	Action SimAction `json:"action"`
	// Selected is how many hosts (process-level: hosts of the process) the
	// selector matched among the simulated ones; Picked are those the
	// change acted on (sorted), Changed how many of them it changed (a
	// host already offline is picked but not changed).
	Selected int      `json:"selected"`
	Picked   []Target `json:"picked"`
	Changed  int      `json:"changed"`
	// Skipped counts selected hosts that are not simulated (real agents of
	// a mixed fleet), left alone.
	Skipped int    `json:"skipped,omitempty"`
	Message string `json:"message"`
}

// EventSimControl is the event of a simulator control: what the presenter
// made happen, so the audience sees cause before effect.
const EventSimControl EventKind = "sim_control"
