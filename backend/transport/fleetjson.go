package transport

import (
	"time"

	"gseproc/model"
)

// fastRequest decodes the usual request of an op to a simulated host
// without reflection: task_id, op_id, op_type, process, deadline and
// cancel_op, each once, in exact case, strings without \u escapes, and a
// process whose encoding the cache holds (decoded before, so valid JSON).
// It reports false for anything else (another key, a key twice, a null,
// an escape, a process not seen yet, invalid JSON), which decode leaves
// to encoding/json: the two never differ (FuzzFleetDecode). A simulated
// fleet decodes a request per host of every op (10,000 for an op over
// 10,000 hosts) on the same machine as the server: json.Unmarshal of the
// request was a third of the fleet's CPU for an op, taken from the server.
func (c *procCache) fastRequest(data []byte) (req model.AgentRequest, ok bool) {
	s := jscan{b: data}
	var seen uint8
	ok = s.object(func(k []byte) (ok bool) {
		var bit uint8
		switch string(k) {
		case "task_id":
			bit = 1 << 0
			req.TaskID, ok = s.str()
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
			ok = s.time(&req.Deadline)
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
	return req, ok && s.end()
}

// time reads a time as encoding/json does (time.Time's UnmarshalJSON on
// the quoted string); false for an escape or no string.
func (s *jscan) time(t *time.Time) bool {
	tok, ok := s.raw()
	return ok && t.UnmarshalJSON(tok) == nil
}

// cachedProcess reads the object at s into p when the cache holds its
// encoding, byte for byte (it was decoded from those bytes before).
func (c *procCache) cachedProcess(s *jscan, p *model.Process) bool {
	s.ws()
	end, ok := objectEnd(s.b, s.i)
	if !ok {
		return false
	}
	c.mu.Lock()
	v, hit := c.m[string(s.b[s.i:end])]
	c.mu.Unlock()
	if !hit {
		return false
	}
	*p, s.i = v, end
	return true
}

// objectEnd is the index just past the object that begins at b[i] (its
// braces matched outside strings); false when none begins or ends there.
// It does not check what is between: a caller takes the object only
// when it equals one known to be valid.
func objectEnd(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	depth, str := 0, false
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case str && c == '\\':
			i++
		case str:
			str = c != '"'
		case c == '"':
			str = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				return i + 1, c == '}'
			}
		}
	}
	return 0, false
}
