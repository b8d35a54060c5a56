package transport

import (
	"bytes"
	"time"

	"gseproc/model"
)

// fastRequest decodes the usual request of an op to a simulated host
// without reflection: task_id, op_id, op_type, process, deadline and
// cancel_op, each once, in exact case, strings without \u escapes, and a
// process whose encoding the cache holds (decoded before, so valid JSON).
// It reports false for anything else (another key, a key twice, a null,
// an escape, a process not seen yet, invalid JSON), which decodeInto leaves
// to encoding/json: the two never differ (FuzzFleetDecode). A simulated
// fleet decodes a request per host of every op (10,000 for an op over
// 10,000 hosts) on the same machine as the server: json.Unmarshal of the
// request was a third of the fleet's CPU for an op, taken from the server.
// It decodes into *req, which must be the zero request; on false, *req
// is partly set. c.mu is held.
func (c *procCache) fastRequest(data []byte, req *model.AgentRequest) bool {
	s := jscan{b: data}
	var seen uint8
	ok := s.object(func(k []byte) (ok bool) {
		var bit uint8
		switch string(k) {
		case "task_id":
			bit = 1 << 0
			req.TaskID, ok = c.taskID(&s)
		case "op_id":
			bit = 1 << 1
			req.OpID, ok = s.str()
		case "op_type":
			bit = 1 << 2
			var op int
			op, ok = s.int()
			req.Op = model.OpType(op)
		case "process":
			bit = 1 << 3
			ok = c.cachedProcess(&s, &req.Process)
		case "deadline":
			bit = 1 << 4
			ok = c.deadline(&s, &req.Deadline)
		case "cancel_op":
			bit = 1 << 5
			req.CancelOp, ok = s.bool()
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
	return ok && s.end()
}

// taskID reads a string as s.str does, the task id read last when it is
// the same (the requests of an op all name its task: a string made for
// each was a tenth of what a simulated fleet allocated per request).
func (c *procCache) taskID(s *jscan) (string, bool) {
	at := s.i
	if tok, esc, ok := s.token(); ok && !esc {
		if string(tok[1:len(tok)-1]) == c.lastTask {
			return c.lastTask, true
		}
	}
	s.i = at
	id, ok := s.str()
	if ok {
		c.lastTask = id
	}
	return id, ok
}

// deadline reads a time as s.time does. The engine gives each request
// its own deadline (its own nanosecond), but those of an op share their
// first seconds and their zone: the text up to the seconds and the zone
// is parsed once (time.Time.UnmarshalJSON, a sixth of decoding a
// request), and a request's fraction of a second added to that time.
func (c *procCache) deadline(s *jscan, t *time.Time) bool {
	tok, ok := s.raw()
	if !ok {
		return false
	}
	dc := &c.dl
	if head, nsec, zone, ok := splitDeadline(tok); ok && dc.head != "" && string(head) == dc.head && string(zone) == dc.zone {
		*t = dc.base.Add(time.Duration(nsec))
		return true
	}
	if t.UnmarshalJSON(tok) != nil {
		return false
	}
	// Kept only when the split reads the fraction as the parse did.
	if head, nsec, zone, ok := splitDeadline(tok); ok && nsec == t.Nanosecond() {
		c.dl = deadlineCache{head: string(head), zone: string(zone), base: t.Add(-time.Duration(nsec))}
	}
	return true
}

// deadlineCache is the deadline procCache.deadline parsed last: its text
// up to the seconds (head, with the opening quote) and after the
// fraction (zone, with the closing quote), and its time without the
// fraction.
type deadlineCache struct {
	head, zone string
	base       time.Time
}

// splitDeadline splits a quoted RFC 3339 time into the text up to its
// seconds (`"2006-01-02T15:04:05`), its fraction of a second in
// nanoseconds (a '.' and 1 to 9 digits, or none) and the rest (its zone
// and closing quote); false when tok is not of that shape (too short, or
// a fraction of another form). It checks nothing else: a head and zone
// are used only once UnmarshalJSON has read them.
func splitDeadline(tok []byte) (head []byte, nsec int, zone []byte, ok bool) {
	const headLen = len(`"2006-01-02T15:04:05`)
	if len(tok) < headLen+2 {
		return nil, 0, nil, false
	}
	head, rest := tok[:headLen], tok[headLen:]
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			nsec = nsec*10 + int(rest[n]-'0')
			n++
		}
		digits := n - 1
		if digits < 1 || digits > 9 {
			return nil, 0, nil, false
		}
		for range 9 - digits {
			nsec *= 10
		}
		rest = rest[n:]
	}
	return head, nsec, rest, len(rest) > 0
}

// cachedProcess reads the object at s into p when the cache holds its
// encoding, byte for byte (it was decoded from those bytes before). When
// the bytes at s begin with the encoding found last, that is the object:
// an object's end depends only on its own bytes, and that encoding is a
// whole one.
func (c *procCache) cachedProcess(s *jscan, p *model.Process) bool {
	s.ws()
	rest := s.b[s.i:]
	if n := len(c.last); n > 0 && len(rest) >= n && string(rest[:n]) == c.last {
		*p, s.i = c.lastP, s.i+n
		return true
	}
	end, ok := objectEnd(s.b, s.i)
	if !ok {
		return false
	}
	key := s.b[s.i:end]
	v, hit := c.m[string(key)]
	if hit {
		c.last, c.lastP = string(key), v
	}
	if !hit {
		return false
	}
	*p, s.i = v, end
	return true
}

// objectEnd is the index just past the object that begins at b[i] (its
// braces matched outside strings); false when none begins or ends there.
// It does not check what is between: a caller takes the object only
// when it equals one known to be valid. A string is crossed to its
// closing quote by bytes.IndexByte, not byte by byte: a request's process
// is mostly strings, and scanning them a byte at a time was 7% of a
// simulated fleet's CPU.
func objectEnd(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	depth := 0
	for ; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			end, ok := stringEnd(b, i)
			if !ok {
				return 0, false
			}
			i = end
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, c == '}'
			}
		}
	}
	return 0, false
}

// stringEnd is the index of the quote that closes the string whose
// opening quote is b[i]: the next '"' not taken by a backslash (which
// takes the byte after it, whatever it is).
func stringEnd(b []byte, i int) (int, bool) {
	for {
		q := bytes.IndexByte(b[i+1:], '"')
		if q < 0 {
			return 0, false
		}
		q += i + 1
		e := bytes.IndexByte(b[i+1:q], '\\')
		if e < 0 {
			return q, true
		}
		i = i + 1 + e + 1 // the escaped byte: the search goes on past it
		if i >= len(b) {
			return 0, false
		}
	}
}
