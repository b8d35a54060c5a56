package transport

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"gseproc/model"
)

// decodeReply decodes an agent's reply exactly as json.Unmarshal into a
// model.AgentReply does. A server reads one reply per target of every op
// (100,000 for an op over 100,000 hosts); encoding/json's reflection and
// its deep stack (each dispatch's goroutine grows its stack to decode)
// were a tenth of the server's CPU for an op. The usual reply (the
// fields of AgentReply and ProcStatus, strings without escapes, plain
// numbers) is read here by a small scanner; anything else (an escape, a
// null, a field it does not know, a key in another case, a number that is
// not an integer where one is wanted, a tail chunk, invalid JSON) is left
// to json.Unmarshal, which then decides, so the two never differ
// (FuzzDecodeReply).
func decodeReply(data []byte) (model.AgentReply, error) { return decodeReplyIn(data, nil) }

// decodeReplyIn is decodeReply keeping the reply's short texts (process
// key and name, state, version, command line, messages) as the copies
// words holds (nil: none), not one new copy per reply.
func decodeReplyIn(data []byte, words *wordTable) (model.AgentReply, error) {
	if rep, ok := fastReply(data, words); ok {
		return rep, nil
	}
	var rep model.AgentReply
	err := json.Unmarshal(data, &rep)
	return rep, err
}

// jscan reads JSON from b at i; each method reports false on anything it
// does not take (the caller then leaves the whole input to encoding/json).
type jscan struct {
	b     []byte
	i     int
	words *wordTable // where word keeps its texts (nil: none)
}

func (s *jscan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// is consumes c (after white space).
func (s *jscan) is(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// raw returns a string token with its quotes when it has no escape, no
// control character and is valid UTF-8 (what encoding/json returns as is).
func (s *jscan) raw() ([]byte, bool) {
	tok, esc, ok := s.token()
	return tok, ok && !esc
}

// plainByte marks the bytes a string token goes on over without a
// second look: printable ASCII but the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// token returns a string token with its quotes, and whether it has
// escapes; false for a control character, invalid UTF-8 or no token.
func (s *jscan) token() (tok []byte, esc, ok bool) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false, false
	}
	start := s.i
	ascii := true
	for j := s.i + 1; j < len(s.b); j++ {
		c := s.b[j]
		if plainByte[c] { // most of a token's bytes: one look, not four
			continue
		}
		switch {
		case c == '"':
			s.i = j + 1
			tok := s.b[start:s.i]
			if !ascii && !utf8.Valid(tok) {
				return nil, false, false
			}
			return tok, esc, true
		case c == '\\':
			esc = true
			j++ // the escaped byte, checked by str
		case c < 0x20:
			return nil, false, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false, false
}

// str reads a string; of the escapes it takes the one-letter ones
// (\n, \t, \" ...), not \u (left to encoding/json).
func (s *jscan) str() (string, bool) {
	tok, esc, ok := s.token()
	if !ok {
		return "", false
	}
	tok = tok[1 : len(tok)-1]
	if !esc {
		return string(tok), true
	}
	out := make([]byte, 0, len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		switch tok[i] {
		case '"', '\\', '/':
			out = append(out, tok[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		default:
			return "", false
		}
	}
	return string(out), true
}

// word reads a string as str does, kept as s.words' copy when it is
// short and has no escape.
func (s *jscan) word() (string, bool) {
	if s.words == nil {
		return s.str()
	}
	at := s.i
	tok, esc, ok := s.token()
	if !ok || esc || len(tok)-2 > internWord {
		s.i = at
		return s.str()
	}
	return s.words.get(tok[1 : len(tok)-1]), true
}

// num returns a number token (JSON's grammar).
func (s *jscan) num() ([]byte, bool) {
	s.ws()
	b, i := s.b, s.i
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, false
		}
	}
	s.i = i
	return b[start:i], true
}

// int64 reads an integer that fits an int64.
func (s *jscan) int64() (int64, bool) { return s.intBits(64) }

// int reads an integer that fits an int.
func (s *jscan) int() (int, bool) {
	n, ok := s.intBits(strconv.IntSize)
	return int(n), ok
}

func (s *jscan) intBits(bits int) (int64, bool) {
	tok, ok := s.num()
	if !ok {
		return 0, false
	}
	if bits == 64 { // up to 18 digits fit, read without strconv
		if n, ok := smallInt(tok); ok {
			return n, true
		}
	}
	n, err := strconv.ParseInt(string(tok), 10, bits)
	return n, err == nil
}

func (s *jscan) uint() (uint64, bool) {
	tok, ok := s.num()
	if !ok {
		return 0, false
	}
	if n, ok := smallInt(tok); ok && tok[0] != '-' { // "-0" too is refused
		return uint64(n), true
	}
	n, err := strconv.ParseUint(string(tok), 10, 64)
	return n, err == nil
}

// smallInt is tok, a number token, when it is an integer of at most 18
// digits (a sign aside): what strconv.ParseInt makes of it, without its
// checks for the overflow such a number cannot reach. A status carries
// about ten integers; strconv's were a fifth of a reply's decoding.
func smallInt(tok []byte) (int64, bool) {
	neg := len(tok) > 0 && tok[0] == '-'
	if neg {
		tok = tok[1:]
	}
	if len(tok) == 0 || len(tok) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range tok {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

func (s *jscan) float() (float64, bool) {
	tok, ok := s.num()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	return f, err == nil
}

func (s *jscan) bool() (v, ok bool) {
	s.ws()
	switch rest := s.b[s.i:]; {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		s.i += 4
		return true, true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		s.i += 5
		return false, true
	}
	return false, false
}

// key reads the n-th key of an object whose '{' was read (n from 0) and
// its ':'; done at the object's end. ok false: not an object's key.
func (s *jscan) key(n int) (key []byte, done, ok bool) {
	if s.is('}') {
		return nil, true, true
	}
	if n > 0 && !s.is(',') {
		return nil, false, false
	}
	k, ok := s.raw()
	if !ok || !s.is(':') {
		return nil, false, false
	}
	return k[1 : len(k)-1], false, true
}

// object reads an object: its '{', then each key (and its ':') handed to
// field, which reads the value (false: the data is not taken), to its
// '}'. field does not outlive the call.
func (s *jscan) object(field func(key []byte) bool) bool {
	if !s.is('{') {
		return false
	}
	for n := 0; ; n++ {
		k, done, ok := s.key(n)
		if !ok {
			return false
		}
		if done {
			return true
		}
		if !field(k) {
			return false
		}
	}
}

// end reports whether only white space is left after what was read.
func (s *jscan) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// fastReply is decodeReply's scanner (ok false: it does not take data).
func fastReply(data []byte, words *wordTable) (rep model.AgentReply, ok bool) {
	s := jscan{b: data, words: words}
	ok = s.object(func(k []byte) (ok bool) {
		switch string(k) {
		case "error_code":
			rep.Code, ok = s.int()
		case "error_msg":
			rep.Message, ok = s.word()
		case "output":
			rep.Output, ok = s.str()
		case "cancelled":
			rep.Cancelled, ok = s.bool()
		case "status":
			if rep.Status == nil { // a repeated key fills the same status, as encoding/json does
				rep.Status = new(model.ProcStatus)
			}
			ok = s.status(rep.Status)
		}
		return ok
	})
	return rep, ok && s.end()
}

// status reads a ProcStatus object into st.
func (s *jscan) status(st *model.ProcStatus) bool {
	return s.object(func(k []byte) (ok bool) {
		switch string(k) {
		case "proc":
			st.ProcKey, ok = s.word()
		case "proc_name":
			st.ProcName, ok = s.word()
		case "state":
			var v string
			v, ok = s.word()
			st.State = model.ProcState(v)
		case "pid":
			st.PID, ok = s.int()
		case "is_auto":
			st.Hosted, ok = s.bool()
		case "start_time":
			var tok []byte
			if tok, ok = s.raw(); ok {
				ok = st.StartTime.UnmarshalJSON(tok) == nil
			}
		case "register_time":
			st.RegisterTime, ok = s.int64()
		case "last_start_time":
			st.LastStartTime, ok = s.int64()
		case "report_time":
			st.ReportTime, ok = s.int64()
		case "cpu_usage":
			st.CPU, ok = s.float()
		case "mem_usage":
			st.Mem, ok = s.float()
		case "mem_rss":
			st.MemRSS, ok = s.uint()
		case "restarts":
			st.Restarts, ok = s.int()
		case "exit_status":
			st.ExitStatus, ok = s.int()
		case "version":
			st.Version, ok = s.word()
		case "cmdline":
			st.Cmdline, ok = s.word()
		case "threads":
			st.Threads, ok = s.int()
		case "message":
			st.Message, ok = s.word()
		}
		return ok
	})
}
