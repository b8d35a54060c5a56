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
// strings of ASCII without escapes, plain numbers) is read by a small
// reader; anything else (an escape, other bytes, white space, a null, an
// unknown, missing or repeated key, a number in another form, invalid
// JSON) is left to json.Unmarshal, which then decides, so the two
// never differ (FuzzDecodeResultJSON).
func DecodeResultJSON(data []byte) (Result, error) {
	if r, _, ok := readResult(data, nil); ok {
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
	// seconds are the times in a zone other than "Z" read last, to the
	// second, by their text: an op's results start and finish within a
	// few seconds, and parsing their three times was a sixth of a
	// result's decoding. (A time in "Z" is read from its fields.)
	seconds [3]parsedSecond
	next    int // the entry replaced next
}

// parsedSecond is a time parsed from its RFC 3339 text, without its
// fraction: the date and clock (YYYY-MM-DDTHH:MM:SS) and the zone (Z or
// ±hh:mm) it was read from.
type parsedSecond struct {
	set bool
	// exact: t.AppendText writes the clock and zone as they were read.
	exact bool
	clock [19]byte
	zone  [6]byte
	nzone int
	t     time.Time
}

// rfc3339Parts splits text (a time without its quotes) into its date
// and clock, its fraction's nanoseconds and its zone, when it is of the
// form the decoder keeps: 19 bytes, then '.' and 1 to 9 digits or
// nothing, then the zone of 1 or 6 bytes. The text is not checked
// further: only a clock and zone that parsed before are used. fracExact
// says the fraction is as AppendText writes it: none, or its digits
// without a trailing '0'.
func rfc3339Parts(text []byte) (clock, zone []byte, ns int, fracExact, ok bool) {
	const n = len("2006-01-02T15:04:05")
	if len(text) <= n {
		return nil, nil, 0, false, false
	}
	clock, rest := text[:n], text[n:]
	fracExact = true
	if rest[0] == '.' {
		j := 1
		for j < len(rest) && j <= 9 && rest[j] >= '0' && rest[j] <= '9' {
			ns = ns*10 + int(rest[j]-'0')
			j++
		}
		if j == 1 || (j < len(rest) && rest[j] >= '0' && rest[j] <= '9') {
			return nil, nil, 0, false, false
		}
		fracExact = rest[j-1] != '0'
		for k := j; k <= 9; k++ {
			ns *= 10
		}
		rest = rest[j:]
	}
	if len(rest) != 1 && len(rest) != 6 {
		return nil, nil, 0, false, false
	}
	return clock, rest, ns, fracExact, true
}

// utcTime is the time of text (a time without its quotes) in "Z" as
// time.Parse reads it in RFC 3339 (its first way, parseRFC3339's, which
// is time.Date of the fields in UTC): false unless clock (its date and
// clock, rfc3339Parts's) is digits where digits go, '-', 'T' and ':'
// where they go, a year of 4 digits, a month 1-12, a day of that month,
// hour 0-23, minute and second 0-59. A process's start time is a second
// of its own on every host: kept as a second parsed, it missed each time.
func utcTime(clock []byte, ns int) (time.Time, bool) {
	if clock[4] != '-' || clock[7] != '-' || clock[10] != 'T' || clock[13] != ':' || clock[16] != ':' {
		return time.Time{}, false
	}
	ok := true
	two := func(i int) int {
		a, b := clock[i]-'0', clock[i+1]-'0'
		if a > 9 || b > 9 {
			ok = false
		}
		return int(a)*10 + int(b)
	}
	year := two(0)*100 + two(2)
	month, day := two(5), two(8)
	h, m, sec := two(11), two(14), two(17)
	if !ok || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) || h > 23 || m > 59 || sec > 59 {
		return time.Time{}, false
	}
	return time.Date(year, time.Month(month), day, h, m, sec, ns, time.UTC), true
}

// daysIn is the number of days of month in year (proleptic Gregorian).
func daysIn(month, year int) int {
	if month == 2 && year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		return 29
	}
	return int("\x1f\x1c\x1f\x1e\x1f\x1e\x1f\x1f\x1e\x1f\x1e\x1f"[month-1])
}

// time is the time of text (a time's JSON string, its quotes included)
// as time.Time's UnmarshalJSON reads it: a time in "Z" from its fields
// (utcTime), another from a second read before when the text has its
// clock and zone. exact says t.AppendText writes text (without its
// quotes) byte for byte.
func (d *ResultDecoder) time(text []byte) (t time.Time, exact, ok bool) {
	inner := text[1 : len(text)-1]
	clock, zone, ns, fracExact, parts := rfc3339Parts(inner)
	utc := parts && len(zone) == 1 && zone[0] == 'Z'
	if utc {
		if t, ok := utcTime(clock, ns); ok {
			return t, fracExact, true // the fields as AppendText writes them
		}
	}
	if parts && !utc {
		for i := range d.seconds {
			if s := &d.seconds[i]; s.set && string(s.clock[:]) == string(clock) && string(s.zone[:s.nzone]) == string(zone) {
				return s.t.Add(time.Duration(ns)), s.exact && fracExact, true
			}
		}
	}
	if err := t.UnmarshalJSON(text); err != nil {
		return time.Time{}, false, false
	}
	var buf [64]byte
	exact = string(appendText(buf[:0], t)) == string(inner)
	switch {
	case !parts || utc || t.Nanosecond() != ns:
	default:
		sec := t.Add(-time.Duration(ns))
		txt := appendText(buf[:0], sec)
		s := &d.seconds[d.next]
		d.next = (d.next + 1) % len(d.seconds)
		*s = parsedSecond{set: true, t: sec,
			exact: len(txt) == len(clock)+len(zone) && string(txt[:len(clock)]) == string(clock) && string(txt[len(clock):]) == string(zone)}
		copy(s.clock[:], clock)
		s.nzone = copy(s.zone[:], zone)
	}
	return t, exact, true
}

// appendText appends t.AppendText's text, nothing where it fails.
func appendText(b []byte, t time.Time) []byte {
	out, err := t.AppendText(b)
	if err != nil {
		return b
	}
	return out
}

// Decode is DecodeResultJSON(data) (TestResultDecoder,
// FuzzDecodeResultJSON).
func (d *ResultDecoder) Decode(data []byte) (Result, error) {
	r, _, err := d.DecodeExact(data)
	return r, err
}

// DecodeExact is Decode, and says whether data is exactly what
// AppendResultJSON writes of the result, byte for byte (TestDecodeExact,
// FuzzDecodeResultJSON): then a client may keep the text it read rather
// than write it again (the op client's --json lines hold every result as
// that text). It is told by the reading, not by writing the result
// again: a string holding an HTML character (written escaped), a number
// in another form ("-0" for an integer, a float with a trailing zero or
// more digits than it needs), a time in another form, a field the
// writer leaves out when it is empty or zero, or anything left to
// encoding/json is not exact.
func (d *ResultDecoder) DecodeExact(data []byte) (Result, bool, error) {
	if r, exact, ok := readResult(data, d); ok {
		return r, exact, nil
	}
	var r Result
	err := json.Unmarshal(data, &r)
	return r, false, err
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
// at the first thing it does not take, exact at the first thing
// AppendResultJSON would write otherwise (ResultDecoder.DecodeExact).
// Its strings are d's when d is set.
type jr struct {
	b     []byte
	i     int
	ok    bool
	exact bool
	d     *ResultDecoder
	n     int // strings read
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

// str reads a string of ASCII from 0x20 up (DEL too) but '"' and '\\',
// which encoding/json returns byte for byte (strKind; the HTML
// characters, which the writer escapes, leave it not exact).
func (r *jr) str() string {
	if r.d != nil {
		r.n++
		return r.d.intern(r.n-1, r.strText())
	}
	return string(r.strText())
}

// strNE reads a string of a field the writer leaves out when it is ""
// (present and "", it is not exact).
func (r *jr) strNE() string {
	s := r.str()
	if s == "" {
		r.exact = false
	}
	return s
}

// Kinds of a byte in a string strText reads.
const (
	strPlain   = iota // itself, written as itself
	strEnd            // '"'
	strHTML           // itself, written escaped ('<', '>', '&')
	strRefused        // an escape, a control character or not ASCII: left to encoding/json
)

// strKind is, by byte, what the reader makes of it in a string: the
// writer's plain bytes (jsonPlain) are plain here too.
var strKind = func() (t [256]uint8) {
	for c := range t {
		switch {
		case jsonPlain[c]:
			t[c] = strPlain
		case c == '"':
			t[c] = strEnd
		case c == '<' || c == '>' || c == '&':
			t[c] = strHTML
		default:
			t[c] = strRefused
		}
	}
	return t
}()

// strText reads such a string, returning its text without the quotes
// (r.b's own bytes).
func (r *jr) strText() []byte {
	if !r.lit(`"`) {
		r.ok = false
		return nil
	}
	for j := r.i; j < len(r.b); j++ {
		switch strKind[r.b[j]] {
		case strPlain:
		case strEnd:
			s := r.b[r.i:j]
			r.i = j + 1
			return s
		case strHTML:
			r.exact = false
		default:
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
// "-0" is not exact (it is written "0").
func (r *jr) int(bits int) int64 {
	lit := r.num(false)
	if !r.ok {
		return 0
	}
	if len(lit) == 2 && lit[0] == '-' && lit[1] == '0' {
		r.exact = false
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

// intNZ reads an integer of a field the writer leaves out when it is 0.
func (r *jr) intNZ(bits int) int64 {
	n := r.int(bits)
	if n == 0 {
		r.exact = false
	}
	return n
}

// uint reads an unsigned integer (of a field the writer leaves out when
// it is 0).
func (r *jr) uint() uint64 {
	lit := r.num(false)
	if !r.ok || lit[0] == '-' {
		r.ok = false
		return 0
	}
	var n uint64
	if len(lit) <= 19 { // fits
		for _, c := range lit {
			n = n*10 + uint64(c-'0')
		}
	} else {
		var err error
		if n, err = strconv.ParseUint(string(lit), 10, 64); err != nil {
			r.ok = false
		}
	}
	if n == 0 {
		r.exact = false
	}
	return n
}

// float reads -?(0|[1-9][0-9]*)(\.[0-9]+)? as encoding/json does. It is
// exact when it is what the writer writes of its value (floatExact).
func (r *jr) float() float64 {
	lit := r.num(true)
	if !r.ok {
		return 0
	}
	if f, ok := shortFloat(lit); ok {
		if !floatExact(lit, f) {
			r.exact = false
		}
		return f
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		r.ok = false
		return 0
	}
	if !floatExact(lit, f) {
		r.exact = false
	}
	return f
}

// floatExact says lit (a number num read, f its value) is what the
// writer writes of f (AppendJSONFloat: json.Marshal's text without an
// exponent).
func floatExact(lit []byte, f float64) bool {
	var buf [48]byte
	b, ok := AppendJSONFloat(buf[:0], f)
	return ok && string(b) == string(lit)
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
// on the string with its quotes); a zero time is not exact (the writer
// leaves it out).
func (r *jr) time() time.Time {
	start := r.i
	if r.strText(); !r.ok {
		return time.Time{}
	}
	if r.d != nil {
		t, exact, ok := r.d.time(r.b[start:r.i])
		r.ok = ok
		if !exact || t.IsZero() {
			r.exact = false
		}
		return t
	}
	r.exact = false // told only by a decoder
	var t time.Time
	if err := t.UnmarshalJSON(r.b[start:r.i]); err != nil {
		r.ok = false
	}
	return t
}

// readResult reads b as AppendResultJSON writes it: ok false when it
// reads otherwise, exact false when AppendResultJSON would write the
// result otherwise.
func readResult(b []byte, d *ResultDecoder) (res Result, exact, ok bool) {
	r := &jr{b: b, ok: true, exact: true, d: d}
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
		res.ValueKey = r.strNE()
	}
	if r.lit(`,"agent_id":`) {
		res.AgentID = r.strNE()
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
				*f.v = r.strNE()
				sep = ","
			}
		}
		r.must(`}`)
		if sep == "" { // {}: the writer leaves out an identity of ""s
			r.exact = false
		}
	}
	if r.lit(`,"hosted":`) {
		if res.Hosted = r.bool(); !res.Hosted {
			r.exact = false
		}
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
	ok = r.ok && r.i == len(b)
	return res, ok && r.exact, ok
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
		s.RegisterTime = r.intNZ(64)
	}
	if r.lit(`,"last_start_time":`) {
		s.LastStartTime = r.intNZ(64)
	}
	if r.lit(`,"report_time":`) {
		s.ReportTime = r.intNZ(64)
	}
	r.must(`,"cpu_usage":`)
	s.CPU = r.float()
	r.must(`,"mem_usage":`)
	s.Mem = r.float()
	if r.lit(`,"mem_rss":`) {
		s.MemRSS = r.uint()
	}
	if r.lit(`,"restarts":`) {
		s.Restarts = int(r.intNZ(strconv.IntSize))
	}
	if r.lit(`,"exit_status":`) {
		s.ExitStatus = int(r.intNZ(strconv.IntSize))
	}
	if r.lit(`,"version":`) {
		s.Version = r.strNE()
	}
	if r.lit(`,"cmdline":`) {
		s.Cmdline = r.strNE()
	}
	if r.lit(`,"threads":`) {
		s.Threads = int(r.intNZ(strconv.IntSize))
	}
	if r.lit(`,"message":`) {
		s.Message = r.strNE()
	}
	r.must(`}`)
	return &s
}
