package model

import (
	"encoding/json"
	"strconv"
	"time"
)

// DecodeResultJSON decodes a result exactly as json.Unmarshal into a zero
// Result does. A client streaming an op over 100,000 hosts decodes
// 100,000 of them, and encoding/json's reflection was most of its CPU.
// What AppendResultJSON writes (its keys in its order, no white space,
// strings of printable ASCII without escapes, plain numbers) is read by a
// small reader; anything else (an escape, other bytes, white space, a
// null, an unknown, missing or repeated key, a number in another form,
// invalid JSON) is left to json.Unmarshal, which then decides, so the two
// never differ (FuzzDecodeResultJSON).
func DecodeResultJSON(data []byte) (Result, error) {
	if r, ok := readResult(data, nil); ok {
		return r, nil
	}
	var r Result
	err := json.Unmarshal(data, &r)
	return r, err
}

// ResultDecoder decodes results one after another as DecodeResultJSON
// does, and shares the strings that repeat from one to the next (a task's
// id, its process's key and name, the message, the state, the version):
// a client reading an op's results over 100,000 hosts made a dozen strings
// per result, most of them the previous result's again. The n-th string a
// result holds is compared with the previous result's n-th. Not for
// concurrent use; the zero value is ready.
type ResultDecoder struct {
	strs [32]string
	// seconds are the times read last, to the second, by their text: an
	// op's results start and finish within a few seconds, and parsing
	// their three times was a sixth of a result's decoding.
	seconds [3]parsedSecond
	next    int // the entry replaced next
}

// parsedSecond is a time parsed from its RFC 3339 text, without its
// fraction: the date and clock (YYYY-MM-DDTHH:MM:SS) and the zone (Z or
// ±hh:mm) it was read from.
type parsedSecond struct {
	set   bool
	clock [19]byte
	zone  [6]byte
	nzone int
	t     time.Time
}

// rfc3339Parts splits text (a time without its quotes) into its date
// and clock, its fraction's nanoseconds and its zone, when it is of the
// form the decoder keeps: 19 bytes, then '.' and 1 to 9 digits or
// nothing, then the zone of 1 or 6 bytes. The text is not checked
// further: only a clock and zone that parsed before are used.
func rfc3339Parts(text []byte) (clock, zone []byte, ns int, ok bool) {
	const n = len("2006-01-02T15:04:05")
	if len(text) <= n {
		return nil, nil, 0, false
	}
	clock, rest := text[:n], text[n:]
	if rest[0] == '.' {
		j := 1
		for j < len(rest) && j <= 9 && rest[j] >= '0' && rest[j] <= '9' {
			ns = ns*10 + int(rest[j]-'0')
			j++
		}
		if j == 1 || (j < len(rest) && rest[j] >= '0' && rest[j] <= '9') {
			return nil, nil, 0, false
		}
		for k := j; k <= 9; k++ {
			ns *= 10
		}
		rest = rest[j:]
	}
	if len(rest) != 1 && len(rest) != 6 {
		return nil, nil, 0, false
	}
	return clock, rest, ns, true
}

// time is the time of text (a time's JSON string, its quotes included)
// as time.Time's UnmarshalJSON reads it: from a second read before when
// the text has its clock and zone.
func (d *ResultDecoder) time(text []byte) (time.Time, bool) {
	clock, zone, ns, ok := rfc3339Parts(text[1 : len(text)-1])
	if ok {
		for i := range d.seconds {
			if s := &d.seconds[i]; s.set && string(s.clock[:]) == string(clock) && string(s.zone[:s.nzone]) == string(zone) {
				return s.t.Add(time.Duration(ns)), true
			}
		}
	}
	var t time.Time
	if err := t.UnmarshalJSON(text); err != nil {
		return time.Time{}, false
	}
	if ok && t.Nanosecond() == ns {
		s := &d.seconds[d.next]
		d.next = (d.next + 1) % len(d.seconds)
		*s = parsedSecond{set: true, t: t.Add(-time.Duration(ns))}
		copy(s.clock[:], clock)
		s.nzone = copy(s.zone[:], zone)
	}
	return t, true
}

// Decode is DecodeResultJSON(data) (TestResultDecoder,
// FuzzDecodeResultJSON).
func (d *ResultDecoder) Decode(data []byte) (Result, error) {
	if r, ok := readResult(data, d); ok {
		return r, nil
	}
	var r Result
	err := json.Unmarshal(data, &r)
	return r, err
}

// intern is the string of b, a result's n-th: the previous result's n-th
// when it is the same.
func (d *ResultDecoder) intern(n int, b []byte) string {
	if n >= len(d.strs) {
		return string(b)
	}
	if s := d.strs[n]; s == string(b) {
		return s
	}
	s := string(b)
	d.strs[n] = s
	return s
}

// jr reads the JSON AppendResultJSON writes from b at i; ok turns false
// at the first thing it does not take. Its strings are d's when d is set.
type jr struct {
	b  []byte
	i  int
	ok bool
	d  *ResultDecoder
	n  int // strings read
}

// lit2 consumes a then b when they come next (lit(a + b), without the
// string made).
func (r *jr) lit2(a, b string) bool {
	n := len(a) + len(b)
	if !r.ok || len(r.b)-r.i < n || string(r.b[r.i:r.i+len(a)]) != a || string(r.b[r.i+len(a):r.i+n]) != b {
		return false
	}
	r.i += n
	return true
}

// lit consumes s when it comes next.
func (r *jr) lit(s string) bool {
	if !r.ok || len(r.b)-r.i < len(s) || string(r.b[r.i:r.i+len(s)]) != s {
		return false
	}
	r.i += len(s)
	return true
}

// must consumes s, or fails.
func (r *jr) must(s string) {
	if !r.lit(s) {
		r.ok = false
	}
}

// str reads a string of printable ASCII without '"' or '\\' (what
// encoding/json returns byte for byte).
func (r *jr) str() string {
	if r.d != nil {
		r.n++
		return r.d.intern(r.n-1, r.strText())
	}
	return string(r.strText())
}

// strText reads such a string, returning its text without the quotes
// (r.b's own bytes).
func (r *jr) strText() []byte {
	if !r.lit(`"`) {
		r.ok = false
		return nil
	}
	for j := r.i; j < len(r.b); j++ {
		c := r.b[j]
		switch {
		case c == '"':
			s := r.b[r.i:j]
			r.i = j + 1
			return s
		case c < 0x20 || c >= 0x7f || c == '\\':
			r.ok = false
			return nil
		}
	}
	r.ok = false
	return nil
}

// digits is the end of the digits of b from j.
func digits(b []byte, j int) int {
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	return j
}

// num returns the number literal at i: -?(0|[1-9][0-9]*), with a
// fraction (\.[0-9]+) when frac; nothing else (an exponent, or a fraction
// when not frac, is left to encoding/json).
func (r *jr) num(frac bool) []byte {
	if !r.ok {
		return nil
	}
	j := r.i
	if j < len(r.b) && r.b[j] == '-' {
		j++
	}
	start := j
	j = digits(r.b, j)
	if j == start || (r.b[start] == '0' && j-start > 1) {
		r.ok = false
		return nil
	}
	if frac && j < len(r.b) && r.b[j] == '.' {
		k := digits(r.b, j+1)
		if k == j+1 {
			r.ok = false
			return nil
		}
		j = k
	}
	if j < len(r.b) && (r.b[j] == '.' || r.b[j] == 'e' || r.b[j] == 'E') {
		r.ok = false
		return nil
	}
	lit := r.b[r.i:j]
	r.i = j
	return lit
}

// int reads an integer of bits bits (out of range: left to encoding/json).
func (r *jr) int(bits int) int64 {
	lit := r.num(false)
	if !r.ok {
		return 0
	}
	if bits == 64 && len(lit) <= 18 { // -?digits that fit: read here
		var n int64
		neg := lit[0] == '-'
		if neg {
			lit = lit[1:]
		}
		for _, c := range lit {
			n = n*10 + int64(c-'0')
		}
		if neg {
			n = -n
		}
		return n
	}
	n, err := strconv.ParseInt(string(lit), 10, bits)
	if err != nil {
		r.ok = false
	}
	return n
}

// uint reads an unsigned integer.
func (r *jr) uint() uint64 {
	lit := r.num(false)
	if !r.ok || lit[0] == '-' {
		r.ok = false
		return 0
	}
	n, err := strconv.ParseUint(string(lit), 10, 64)
	if err != nil {
		r.ok = false
	}
	return n
}

// float reads -?(0|[1-9][0-9]*)(\.[0-9]+)? as encoding/json does.
func (r *jr) float() float64 {
	lit := r.num(true)
	if !r.ok {
		return 0
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		r.ok = false
	}
	return f
}

// bool reads true or false.
func (r *jr) bool() bool {
	switch {
	case r.lit("true"):
		return true
	case r.lit("false"):
		return false
	}
	r.ok = false
	return false
}

// time reads a time as time.Time's UnmarshalJSON does (it is called,
// on the string with its quotes).
func (r *jr) time() time.Time {
	start := r.i
	if r.strText(); !r.ok {
		return time.Time{}
	}
	if r.d != nil {
		t, ok := r.d.time(r.b[start:r.i])
		r.ok = ok
		return t
	}
	var t time.Time
	if err := t.UnmarshalJSON(r.b[start:r.i]); err != nil {
		r.ok = false
	}
	return t
}

func readResult(b []byte, d *ResultDecoder) (Result, bool) {
	r := &jr{b: b, ok: true, d: d}
	var res Result
	r.must(`{"task_id":`)
	res.TaskID = r.str()
	r.must(`,"seq":`)
	res.Seq = r.int(64)
	r.must(`,"host":{"ip":`)
	res.Host.IP = r.str()
	r.must(`,"bk_cloud_id":`)
	res.Host.CloudID = int(r.int(strconv.IntSize))
	r.must(`},"proc":`)
	res.ProcKey = r.str()
	if r.lit(`,"value_key":`) {
		res.ValueKey = r.str()
	}
	if r.lit(`,"agent_id":`) {
		res.AgentID = r.str()
	}
	r.must(`,"op_type":`)
	res.Op = OpType(r.int(strconv.IntSize))
	r.must(`,"state":`)
	res.State = ResultState(r.str())
	r.must(`,"error_code":`)
	res.Code = int(r.int(strconv.IntSize))
	r.must(`,"error_msg":`)
	res.Message = r.str()
	if r.lit(`,"proc_identity":{`) {
		sep := ""
		for _, f := range [...]struct {
			k string
			v *string
		}{
			{`"proc_name":`, &res.Proc.ProcName}, {`"setup_path":`, &res.Proc.SetupPath},
			{`"func_id":`, &res.Proc.FuncID}, {`"instance_id":`, &res.Proc.InstanceID},
		} {
			if r.lit2(sep, f.k) {
				*f.v = r.str()
				sep = ","
			}
		}
		r.must(`}`)
	}
	if r.lit(`,"hosted":`) {
		res.Hosted = r.bool()
	}
	if r.lit(`,"status":`) {
		res.Status = r.status()
	}
	if r.lit(`,"started":`) {
		res.Started = r.time()
	}
	if r.lit(`,"finished":`) {
		res.Finished = r.time()
	}
	r.must(`}`)
	return res, r.ok && r.i == len(b)
}

func (r *jr) status() *ProcStatus {
	var s ProcStatus
	r.must(`{"proc":`)
	s.ProcKey = r.str()
	r.must(`,"proc_name":`)
	s.ProcName = r.str()
	r.must(`,"state":`)
	s.State = ProcState(r.str())
	r.must(`,"pid":`)
	s.PID = int(r.int(strconv.IntSize))
	r.must(`,"is_auto":`)
	s.Hosted = r.bool()
	if r.lit(`,"start_time":`) {
		s.StartTime = r.time()
	}
	if r.lit(`,"register_time":`) {
		s.RegisterTime = r.int(64)
	}
	if r.lit(`,"last_start_time":`) {
		s.LastStartTime = r.int(64)
	}
	if r.lit(`,"report_time":`) {
		s.ReportTime = r.int(64)
	}
	r.must(`,"cpu_usage":`)
	s.CPU = r.float()
	r.must(`,"mem_usage":`)
	s.Mem = r.float()
	if r.lit(`,"mem_rss":`) {
		s.MemRSS = r.uint()
	}
	if r.lit(`,"restarts":`) {
		s.Restarts = int(r.int(strconv.IntSize))
	}
	if r.lit(`,"exit_status":`) {
		s.ExitStatus = int(r.int(strconv.IntSize))
	}
	if r.lit(`,"version":`) {
		s.Version = r.str()
	}
	if r.lit(`,"cmdline":`) {
		s.Cmdline = r.str()
	}
	if r.lit(`,"threads":`) {
		s.Threads = int(r.int(strconv.IntSize))
	}
	if r.lit(`,"message":`) {
		s.Message = r.str()
	}
	r.must(`}`)
	return &s
}
