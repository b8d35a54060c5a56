package transport

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// The heartbeat interval of a fleet is the server's to decide: 100,000
// agents beating every 5 s send 20,000 heartbeats a second, about a fifth
// of a core of the server's (NATS's parse and match of each subject, the
// dispatcher's record of it) and of the simulator's, between ops, on a
// machine an op over those hosts needs whole. The server bounds the
// rate it receives ([nats] max_heartbeats_per_second): a fleet of n
// online hosts gets an interval of at least n / rate, never less than
// [nats] heartbeat_interval. It tells an agent on the agent's own inbox
// (BeatSubject, a BeatHint), answering a heartbeat of a host whose
// interval is off: one an agent already subscribes to, that no
// credential serving hosts may publish on (another host can still have
// JetStream acknowledge a publish of its own there, as its reply
// subject: such a message is no BeatHint in bounds, refused and logged
// rarely by the agent). Each
// heartbeat says the interval the agent keeps, and the server gives each
// host three of those of silence before it is offline (and, while a new
// interval is on its way, three of the longer one).
//
// The rule has three pure parts, tested by tables: the interval of a
// fleet (beatRule.want, FleetBeatInterval), whether a host is told
// (beatRule.hint), and what an agent takes (takeHint). An agent that
// takes no hints (from before them, or serving on its three subjects
// only) says so (Heartbeat.Hints unset) and is never told: it beats at
// its own interval, as before. An agent against a server from before the
// hints is told nothing and keeps its configured interval.

const (
	// maxBeatInterval bounds the interval a server hands out and an
	// agent takes: past it, the rate bound yields (at 5,000 a second, past
	// 18 million hosts).
	maxBeatInterval = time.Hour
	// minBeatHint is the shortest interval an agent takes from a server
	// (its own configured one if that is shorter): a server may not make
	// an agent beat faster.
	minBeatHint = time.Second
	// beatSteps are the intervals handed out per doubling: a fleet's is
	// heartbeat_interval·2^(k/beatSteps), steps of about 19%, so that a
	// few hosts more or less change nothing; a host is told again only
	// when the fleet grew past its step.
	beatSteps = 4
	// beatDownSteps: a host is told a shorter interval only when its own
	// is more than this many steps above the fleet's (about 1.7 times it,
	// the fleet shrunk to 60%): a fleet hovering at a step's edge does not
	// make every host change twice.
	beatDownSteps = 2
	// beatUptimes: a server tells a host a shorter interval only after it
	// has run this many of the host's own intervals: a restarted server,
	// hearing the fleet one host at a time, would otherwise tell the
	// first ones the interval of a small fleet.
	beatUptimes = 3
	// graceBeats is the silence, in the host's own intervals, after which
	// a host is offline (at least [nats] offline_after).
	graceBeats = 3
)

// BeatHint is what a server tells an agent on BeatSubject: the interval
// to heartbeat at. An agent takes it only within bounds (takeHint).
type BeatHint struct {
	Interval time.Duration `json:"interval"`
}

// decodeBeatHint reads a BeatHint (a message of at most 1 KB).
func decodeBeatHint(data []byte) (BeatHint, error) {
	var h BeatHint
	if len(data) > 1024 {
		return h, fmt.Errorf("beat hint of %d bytes", len(data))
	}
	if err := json.Unmarshal(data, &h); err != nil {
		return h, fmt.Errorf("beat hint: %w", err)
	}
	return h, nil
}

// beatRule is a server's heartbeat rule: the shortest interval it hands
// out (min, [nats] heartbeat_interval) and the heartbeats per second the
// whole fleet may send it (rate, [nats] max_heartbeats_per_second; 0:
// no bound, every host is told min). A zero min tells no host anything.
type beatRule struct {
	min  time.Duration
	rate int
}

// FleetBeatInterval is the heartbeat interval a server with the shortest
// interval min and the rate bound rate hands each agent of a fleet of n
// online hosts.
func FleetBeatInterval(n int, min time.Duration, rate int) time.Duration {
	r := beatRule{min: min, rate: rate}
	return r.interval(r.want(n))
}

// maxStep is the last step: its interval at most maxBeatInterval, and
// its code (beatCode) a byte.
func (r beatRule) maxStep() int {
	if r.min <= 0 || r.min >= maxBeatInterval {
		return 0
	}
	return min(int(math.Floor(beatSteps*math.Log2(float64(maxBeatInterval)/float64(r.min)))), math.MaxUint8-2)
}

// want is the step of a fleet of n online hosts: the first whose
// interval keeps n hosts at or under the rate.
func (r beatRule) want(n int) int {
	if r.rate <= 0 || r.min <= 0 {
		return 0
	}
	need := float64(n) / float64(r.rate) * float64(time.Second)
	if need <= float64(r.min) {
		return 0
	}
	k := int(math.Ceil(beatSteps*math.Log2(need/float64(r.min)) - 1e-9))
	return min(k, r.maxStep())
}

// interval is step k's: min·2^(k/beatSteps), to the millisecond from
// a second up.
func (r beatRule) interval(k int) time.Duration {
	f := float64(r.min) * math.Exp2(float64(k)/beatSteps)
	top := max(maxBeatInterval, r.min)
	if f >= float64(top) {
		return top // and no float past int64 made a Duration (a host's code up to 255 steps)
	}
	d := time.Duration(f)
	if d >= time.Second {
		d = d.Round(time.Millisecond) // up past a top of a fraction of a millisecond: min below
	}
	return min(d, top)
}

// beatCode is what a server keeps of the interval d a host beats at
// (hostEntry.beat, a byte): 0 when the host takes no hints (hints
// false), 1 below the shortest interval, else 2 + its step (rounded
// down; a step's own interval is its step).
func (r beatRule) beatCode(d time.Duration, hints bool) uint8 {
	if !hints || r.min <= 0 || d <= 0 {
		return 0
	}
	if float64(d) < float64(r.min)*(1-1e-3) {
		return 1
	}
	k := int(math.Floor(beatSteps*math.Log2(float64(d)/float64(r.min)) + 0.01))
	return uint8(2 + min(max(k, 0), math.MaxUint8-2))
}

// hint decides whether a host whose interval has code c (beatCode) is
// told another, in a fleet of n online hosts, the server having run for
// uptime: a host faster than the fleet's interval is told it at once
// (the rate bound), one slower by more than beatDownSteps only once the
// server has run beatUptimes of its interval. It returns the step to
// tell.
func (r beatRule) hint(c uint8, n int, uptime time.Duration) (int, bool) {
	if c == 0 || r.min <= 0 {
		return 0, false
	}
	want := r.want(n)
	if c == 1 {
		return want, true
	}
	has := int(c) - 2
	switch {
	case has < want:
		return want, true
	case has > want+beatDownSteps && uptime >= beatUptimes*r.interval(has):
		return want, true
	}
	return 0, false
}

// beatGrace is the silence after which a host is offline: offlineAfter,
// or graceBeats of its interval when longer; told a new one (told > 0)
// and not yet heard at it, graceBeats of the longer of the two: the
// agent's next beat after it takes a new interval comes within the old
// one plus the new one (takeHint's phase).
func beatGrace(offlineAfter, interval, told time.Duration) time.Duration {
	return max(offlineAfter, graceBeats*interval, graceBeats*told)
}

// takeHint is the interval an agent configured with configured beats at
// when a server tells it d: d, unless it is out of bounds (under a
// second, or under the configured interval when that is shorter; over
// maxBeatInterval, or over the configured one when that is longer):
// then ok is false and the agent keeps its interval.
func takeHint(configured, d time.Duration) (time.Duration, bool) {
	if d < min(configured, minBeatHint) || d > max(configured, maxBeatInterval) {
		return 0, false
	}
	return d, true
}

// beatPhase is how long after taking interval d an agent beats first:
// a fraction u (in [0, 1)) of it, at least a millisecond. A fleet told
// at once would otherwise beat at once, every interval; drawn at random,
// the beats spread over the interval. The gap from the beat before is
// at most the old interval plus d (what beatGrace allows).
func beatPhase(d time.Duration, u float64) time.Duration {
	return max(time.Duration((1-u)*float64(d)), time.Millisecond)
}
