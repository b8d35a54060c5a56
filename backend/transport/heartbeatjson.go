package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"time"

	"gseproc/model"
)

// decodeHeartbeat decodes a full heartbeat exactly as json.Unmarshal into
// a Heartbeat does. A server reads a full heartbeat from every host at
// least once a minute (1,700 a second at 100,000 hosts) and encoding/json
// cost about 4 KB of garbage and a third of the heartbeat path's CPU for
// each. The usual heartbeat (the fields of Heartbeat, HostInfo and
// ProcStatus, each once, strings without escapes, plain numbers) is read
// by the reply's scanner (jscan); anything else (an escape, a null, a
// field it does not know, a key repeated or in another case, invalid
// JSON) is left to json.Unmarshal, which then decides, so the two never
// differ (FuzzDecodeHeartbeat).
//
// One difference, a bound: of more than model.MaxHostProcs statuses only
// the first are decoded; the others are counted (Heartbeat.left), not
// made (millions of "{}" fit in a payload).
func decodeHeartbeat(data []byte) (Heartbeat, error) {
	if hb, ok := fastHeartbeat(data); ok {
		return hb, nil
	}
	var in heartbeatIn
	err := json.Unmarshal(data, &in)
	hb := in.Heartbeat
	hb.Statuses, hb.left = in.Statuses.sts, in.Statuses.left
	return hb, err
}

// heartbeatIn is a Heartbeat as the fallback decodes it: its statuses
// bounded (the field shadows the embedded one).
type heartbeatIn struct {
	Heartbeat
	Statuses boundedStatuses `json:"statuses,omitempty"`
}

// boundedStatuses decodes a JSON array of statuses as encoding/json
// decodes it into a slice (null: left as it is; a repeated array decodes
// into the elements already there), but only its first
// model.MaxHostProcs elements: the others are checked and counted.
type boundedStatuses struct {
	sts  []model.ProcStatus
	left int
}

func (b *boundedStatuses) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // '[' (an object or a string: refused below)
		return err
	}
	if data[0] != '[' {
		return &json.UnmarshalTypeError{Value: "non-array", Type: reflect.TypeFor[[]model.ProcStatus](), Field: "statuses"}
	}
	out, left := b.sts[:0], 0
	var first error
	for dec.More() {
		if len(out) == model.MaxHostProcs {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
			left++
			continue
		}
		if len(out) < cap(out) {
			out = out[:len(out)+1]
		} else {
			out = append(out, model.ProcStatus{})
		}
		if err := dec.Decode(&out[len(out)-1]); err != nil {
			var te *json.UnmarshalTypeError
			if !errors.As(err, &te) {
				return err
			}
			if first == nil {
				first = err
			}
		}
	}
	b.sts, b.left = out, left
	return first
}

// once reports whether bit was not in *seen yet, and adds it: a key
// repeated is left to encoding/json (which merges a repeated object into
// the first).
func once(seen *uint16, bit uint16) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// fastHeartbeat is decodeHeartbeat's scanner (ok false: it does not take data).
func fastHeartbeat(data []byte) (hb Heartbeat, ok bool) {
	s := jscan{b: data}
	var seen uint16
	ok = s.object(func(k []byte) (ok bool) {
		switch string(k) {
		case "info":
			ok = once(&seen, 1<<0) && s.hostInfo(&hb.Info)
		case "time":
			var tok []byte
			tok, ok = s.raw()
			ok = ok && once(&seen, 1<<1) && hb.Time.UnmarshalJSON(tok) == nil
		case "interval":
			var d int64
			d, ok = s.int64()
			ok = ok && once(&seen, 1<<2)
			hb.Interval = time.Duration(d)
		case "statuses":
			ok = once(&seen, 1<<3) && s.statuses(&hb.Statuses)
		case "full":
			hb.Full, ok = s.bool()
			ok = ok && once(&seen, 1<<4)
		case "reconnected":
			hb.Reconnected, ok = s.int()
			ok = ok && once(&seen, 1<<5)
		case "dropped":
			hb.Dropped, ok = s.int()
			ok = ok && once(&seen, 1<<6)
		case "leaving":
			hb.Leaving, ok = s.bool()
			ok = ok && once(&seen, 1<<7)
		case "hints":
			hb.Hints, ok = s.bool()
			ok = ok && once(&seen, 1<<8)
		}
		return ok
	})
	return hb, ok && s.end()
}

// hostInfo reads a HostInfo object into hi.
func (s *jscan) hostInfo(hi *model.HostInfo) bool {
	var seen uint16
	return s.object(func(k []byte) (ok bool) {
		switch string(k) {
		case "host":
			ok = once(&seen, 1<<0) && s.host(&hi.Host)
		case "labels":
			ok = once(&seen, 1<<1) && s.labels(&hi.Labels)
		case "agent_state":
			var v string
			v, ok = s.str()
			ok = ok && once(&seen, 1<<2)
			hi.State = model.AgentState(v)
		case "last_seen":
			hi.LastSeen, ok = s.int64()
			ok = ok && once(&seen, 1<<3)
		case "agent_version":
			hi.Version, ok = s.str()
			ok = ok && once(&seen, 1<<4)
		case "bk_agent_id":
			hi.AgentID, ok = s.str()
			ok = ok && once(&seen, 1<<5)
		}
		return ok
	})
}

// host reads a Host object into h.
func (s *jscan) host(h *model.Host) bool {
	var seen uint16
	return s.object(func(k []byte) (ok bool) {
		switch string(k) {
		case "ip":
			h.IP, ok = s.str()
			ok = ok && once(&seen, 1<<0)
		case "bk_cloud_id":
			h.CloudID, ok = s.int()
			ok = ok && once(&seen, 1<<1)
		}
		return ok
	})
}

// labels reads an object of strings into a new map at *m (an empty
// object: an empty map, as encoding/json makes). A key repeated is left
// to encoding/json.
func (s *jscan) labels(m *map[string]string) bool {
	out := make(map[string]string, 8)
	ok := s.object(func(k []byte) (ok bool) {
		key := string(k)
		if _, dup := out[key]; dup {
			return false
		}
		out[key], ok = s.str()
		return ok
	})
	if ok {
		*m = out
	}
	return ok
}

// statuses reads an array of ProcStatus objects into a new slice at *sts
// (an empty array: an empty slice, as encoding/json makes).
func (s *jscan) statuses(sts *[]model.ProcStatus) bool {
	if !s.is('[') {
		return false
	}
	out := []model.ProcStatus{}
	if s.is(']') {
		*sts = out
		return true
	}
	for {
		if len(out) == model.MaxHostProcs { // more: left to the bounded fallback
			return false
		}
		// A key repeated in a status is taken as encoding/json takes
		// it (the last), as in a reply's status.
		var st model.ProcStatus
		if !s.status(&st) {
			return false
		}
		out = append(out, st)
		if s.is(']') {
			*sts = out
			return true
		}
		if !s.is(',') {
			return false
		}
	}
}
