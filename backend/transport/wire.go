package transport

import (
	"time"

	"gseproc/model"
)

// Heartbeat is what an agent publishes on its hb subject.
type Heartbeat struct {
	Info     model.HostInfo `json:"info"`
	Time     time.Time      `json:"time"`
	Interval time.Duration  `json:"interval"` // the agent's heartbeat interval
	// Hints is set by an agent that takes the interval a server tells it
	// (BeatSubject): one from before the hints, or serving on its op,
	// cancel and evack subjects only, is never told.
	Hints    bool               `json:"hints,omitempty"`
	Statuses []model.ProcStatus `json:"statuses,omitempty"` // hosted/known processes
	// Full is set on the first heartbeat after (re)connecting or a hello.
	Full bool `json:"full,omitempty"`
	// Reconnected counts events the agent published late because the server
	// was unreachable; Dropped counts those it had to drop (buffer full).
	Reconnected int `json:"reconnected,omitempty"`
	Dropped     int `json:"dropped,omitempty"`
	// Leaving is set by an agent that stops cleanly: the server marks the
	// host offline at once.
	Leaving bool `json:"leaving,omitempty"`
	// left counts the statuses past model.MaxHostProcs a server's
	// decodeHeartbeat left out (not on the wire).
	left int
}
