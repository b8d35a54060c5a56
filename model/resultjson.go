package model

import (
	"encoding/json"
	"strconv"
	"time"
)

// AppendResultJSON appends r encoded as json.Marshal encodes it, byte for
// byte. A result is encoded once to be stored and once more for every
// client that streams it: an op over 100,000 hosts encodes 200,000 of
// them, and encoding/json's reflection was most of that cost. Strings are
// quoted by AppendJSONString; a result with a float that json writes in exponent form (or refuses) by
// json.Marshal of the whole result: the two never differ (FuzzResultJSON).
func AppendResultJSON(b []byte, r *Result) ([]byte, error) {
	return appendResultJSON(b, r, nil)
}

func appendResultJSON(b []byte, r *Result, e *ResultEncoder) ([]byte, error) {
	out, ok := appendResult(b, r, e)
	if ok {
		return out, nil
	}
	// A copy to encode: r itself does not escape (callers encode a result
	// on their stack, 100,000 times an op, without allocating it).
	rc := *r
	data, err := json.Marshal(&rc)
	if err != nil {
		return b, err
	}
	return append(b, data...), nil
}

// ResultEncoder appends results as AppendResultJSON does, byte for byte,
// keeping what the results of one op share: the text of the last seconds
// their start and end times fell in (they are started and finished within
// a few seconds: formatting the two times was about half of a result's
// encoding), and the quoted text of their strings (quoted). Its zero
// value is ready; it is not safe for concurrent use.
type ResultEncoder struct {
	// quoted holds the quoted text of strings seen before, by their
	// length and three of their bytes (word): a result's texts are
	// mostly those of every result of its task and process (task id,
	// process key, name, setup path, command line), and quoting them
	// again byte by byte was about a fifth of a result's encoding.
	quoted [quotedSlots]quotedText
	ops    secondCache // the results' start and end times
	// starts are the status's process start times, apart: a fleet's
	// processes were mostly started in a few seconds (its start, a
	// restart of all), not those of the op, and formatting each was
	// about a tenth of a status result's encoding.
	starts secondCache
}

// quotedText is a string s and its JSON text (AppendJSONString).
type quotedText struct {
	s string
	q []byte
}

// quotedSlots is the number of strings a ResultEncoder keeps quoted;
// quotedMin and quotedMax bound their length: a shorter one costs less
// to quote than to look up, a longer one is not kept.
const (
	quotedSlots = 64
	quotedMin   = 8
	quotedMax   = 256
)

// appendQuoted appends s as AppendJSONString does, from e.quoted when
// it holds s (kept there now when it did not).
func (e *ResultEncoder) appendQuoted(b []byte, s string) []byte {
	if len(s) < quotedMin || len(s) > quotedMax {
		return AppendJSONString(b, s)
	}
	k := &e.quoted[(uint(len(s))*31+uint(s[0])*7+uint(s[len(s)-1])+uint(s[len(s)/2])*131)%quotedSlots]
	if k.s == s { // an empty slot holds "", never s (quotedMin)
		return append(b, k.q...)
	}
	n := len(b)
	b = AppendJSONString(b, s)
	k.s, k.q = s, append(k.q[:0], b[n:]...)
	return b
}

// secondCache keeps the text of the last seconds times fell in.
type secondCache struct {
	seconds [2]secondText
	next    int // the entry replaced next
}

// secondText is the RFC 3339 text of one second in one zone offset: the
// date and clock (YYYY-MM-DDTHH:MM:SS) and the zone (Z or ±hh:mm); a
// time within it is that date and clock, its fraction, that zone.
type secondText struct {
	set   bool
	unix  int64
	off   int
	clock [19]byte
	zone  [6]byte
	nzone int
}

// Append appends r's JSON (AppendResultJSON).
func (e *ResultEncoder) Append(b []byte, r *Result) ([]byte, error) {
	return appendResultJSON(b, r, e)
}

// appendTime appends t as t.AppendText does; false where AppendText
// fails (nothing appended).
func (e *secondCache) appendTime(b []byte, t time.Time) ([]byte, bool) {
	_, off := t.Zone()
	unix := t.Unix()
	var st *secondText
	for i := range e.seconds {
		if s := &e.seconds[i]; s.set && s.unix == unix && s.off == off {
			st = s
			break
		}
	}
	if st == nil {
		var scratch [64]byte
		txt, err := t.AppendText(scratch[:0])
		if err != nil {
			return b, false
		}
		// The date and clock, then the fraction (from '.') if any, then
		// the zone.
		z := len("2006-01-02T15:04:05")
		if txt[z] == '.' {
			for z++; txt[z] >= '0' && txt[z] <= '9'; z++ {
			}
		}
		st = &e.seconds[e.next]
		e.next = (e.next + 1) % len(e.seconds)
		*st = secondText{set: true, unix: unix, off: off}
		copy(st.clock[:], txt)
		st.nzone = copy(st.zone[:], txt[z:])
	}
	b = append(b, st.clock[:]...)
	if ns := t.Nanosecond(); ns != 0 { // as AppendText: nine digits, the trailing zeros cut
		var f [10]byte
		f[0] = '.'
		for i := 9; i > 0; i-- {
			f[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := len(f)
		for f[n-1] == '0' {
			n--
		}
		b = append(b, f[:n]...)
	}
	return append(b, st.zone[:st.nzone]...), true
}

// jw appends JSON; ok turns false at the first value it leaves to
// encoding/json.
type jw struct {
	b  []byte
	ok bool
	// enc, when not nil, keeps what results share: the quoted text of
	// their strings and the text of the seconds their times fell in.
	enc *ResultEncoder
}

// host appends h as json.Marshal writes a Host.
func (w *jw) host(h Host) {
	w.key(`{"ip":`)
	w.str(h.IP)
	w.key(`,"bk_cloud_id":`)
	w.int(int64(h.CloudID))
	w.b = append(w.b, '}')
}

// str appends s quoted as json.Marshal quotes it (AppendJSONString).
func (w *jw) str(s string) { w.b = AppendJSONString(w.b, s) }

// word appends s as str does: through w.enc when there is one, for a
// text results share.
func (w *jw) word(s string) {
	if w.enc == nil {
		w.str(s)
		return
	}
	w.b = w.enc.appendQuoted(w.b, s)
}

func (w *jw) key(k string) { w.b = append(w.b, k...) } // k is `"name":` or `,"name":`

func (w *jw) int(n int64) { w.b = strconv.AppendInt(w.b, n, 10) }

func (w *jw) uint(n uint64) { w.b = strconv.AppendUint(w.b, n, 10) }

func (w *jw) bool(v bool) { w.b = strconv.AppendBool(w.b, v) }

// float appends f as json.Marshal does when it writes no exponent
// (AppendJSONFloat: a usage figure of a few decimals from its digits).
func (w *jw) float(f float64) {
	b, ok := AppendJSONFloat(w.b, f)
	if !ok {
		w.ok = false
		return
	}
	w.b = b
}

// time appends t as t.MarshalJSON writes it (the same RFC 3339 text as
// AppendText, quoted), without allocating.
func (w *jw) time(t time.Time) {
	b, err := t.AppendText(append(w.b, '"'))
	if err != nil {
		w.ok = false
		return
	}
	w.b = append(b, '"')
}

// opTime appends a time of the op (its start or end on the host):
// through w.enc when there is one.
func (w *jw) opTime(t time.Time) {
	if w.enc == nil {
		w.time(t)
		return
	}
	w.cachedTime(&w.enc.ops, t)
}

// startTime appends a status's process start time: through w.enc when
// there is one.
func (w *jw) startTime(t time.Time) {
	if w.enc == nil {
		w.time(t)
		return
	}
	w.cachedTime(&w.enc.starts, t)
}

// cachedTime appends t as time does, its second's text from c.
func (w *jw) cachedTime(c *secondCache, t time.Time) {
	b, ok := c.appendTime(append(w.b, '"'), t)
	if !ok {
		w.ok = false
		return
	}
	w.b = append(b, '"')
}

func appendResult(b []byte, r *Result, e *ResultEncoder) ([]byte, bool) {
	w := jw{b: b, ok: true, enc: e}
	w.key(`{"task_id":`)
	w.word(r.TaskID)
	w.key(`,"seq":`)
	w.int(r.Seq)
	w.key(`,"host":`)
	w.host(r.Host)
	w.key(`,"proc":`)
	w.word(r.ProcKey)
	if r.ValueKey != "" {
		w.key(`,"value_key":`)
		w.word(r.ValueKey)
	}
	if r.AgentID != "" {
		w.key(`,"agent_id":`)
		w.str(r.AgentID)
	}
	w.key(`,"op_type":`)
	w.int(int64(r.Op))
	w.key(`,"state":`)
	w.str(string(r.State))
	w.key(`,"error_code":`)
	w.int(int64(r.Code))
	w.key(`,"error_msg":`)
	w.word(r.Message)
	if r.Proc != (ResultProc{}) {
		w.key(`,"proc_identity":{`)
		first := true
		for _, f := range [...]struct{ k, v string }{
			{`"proc_name":`, r.Proc.ProcName}, {`"setup_path":`, r.Proc.SetupPath},
			{`"func_id":`, r.Proc.FuncID}, {`"instance_id":`, r.Proc.InstanceID},
		} {
			if f.v == "" {
				continue
			}
			if !first {
				w.b = append(w.b, ',')
			}
			first = false
			w.key(f.k)
			w.word(f.v)
		}
		w.b = append(w.b, '}')
	}
	if r.Hosted {
		w.key(`,"hosted":true`)
	}
	if r.Status != nil {
		w.key(`,"status":`)
		w.status(r.Status)
	}
	if !r.Started.IsZero() {
		w.key(`,"started":`)
		w.opTime(r.Started)
	}
	if !r.Finished.IsZero() {
		w.key(`,"finished":`)
		w.opTime(r.Finished)
	}
	w.b = append(w.b, '}')
	return w.b, w.ok
}

func (w *jw) status(s *ProcStatus) {
	w.key(`{"proc":`)
	w.word(s.ProcKey)
	w.key(`,"proc_name":`)
	w.word(s.ProcName)
	w.key(`,"state":`)
	w.str(string(s.State))
	w.key(`,"pid":`)
	w.int(int64(s.PID))
	w.key(`,"is_auto":`)
	w.bool(s.Hosted)
	if !s.StartTime.IsZero() {
		w.key(`,"start_time":`)
		w.startTime(s.StartTime)
	}
	for _, f := range [...]struct {
		k string
		v int64
	}{{`,"register_time":`, s.RegisterTime}, {`,"last_start_time":`, s.LastStartTime}, {`,"report_time":`, s.ReportTime}} {
		if f.v != 0 {
			w.key(f.k)
			w.int(f.v)
		}
	}
	w.key(`,"cpu_usage":`)
	w.float(s.CPU)
	w.key(`,"mem_usage":`)
	w.float(s.Mem)
	if s.MemRSS != 0 {
		w.key(`,"mem_rss":`)
		w.uint(s.MemRSS)
	}
	if s.Restarts != 0 {
		w.key(`,"restarts":`)
		w.int(int64(s.Restarts))
	}
	if s.ExitStatus != 0 {
		w.key(`,"exit_status":`)
		w.int(int64(s.ExitStatus))
	}
	if s.Version != "" {
		w.key(`,"version":`)
		w.word(s.Version)
	}
	if s.Cmdline != "" {
		w.key(`,"cmdline":`)
		w.word(s.Cmdline)
	}
	if s.Threads != 0 {
		w.key(`,"threads":`)
		w.int(int64(s.Threads))
	}
	if s.Message != "" {
		w.key(`,"message":`)
		w.word(s.Message)
	}
	w.b = append(w.b, '}')
}

// AppendHostStatusJSON appends {"host": h, "status": st} encoded as
// json.Marshal encodes a struct of those two fields (Host and ProcStatus,
// tagged "host" and "status"), byte for byte: the record of a last known
// status in a store. The first op over 100,000 hosts stores about 84,000
// of them, and encoding/json's reflection was ~0.2 s of the server's CPU
// and ~36 MB of its allocations. A status with a float that json writes
// in exponent form (or refuses) is encoded by json.Marshal.
func AppendHostStatusJSON(b []byte, h Host, st *ProcStatus) ([]byte, error) {
	w := jw{b: b, ok: true}
	w.key(`{"host":`)
	w.host(h)
	w.key(`,"status":`)
	w.status(st)
	w.b = append(w.b, '}')
	if w.ok {
		return w.b, nil
	}
	data, err := json.Marshal(struct {
		Host   Host       `json:"host"`
		Status ProcStatus `json:"status"`
	}{h, *st})
	if err != nil {
		return b, err
	}
	return append(b, data...), nil
}

// AppendReplyJSON appends rep encoded as json.Marshal encodes it, byte
// for byte: an agent answers every op with one (a simulated fleet of
// 100,000 hosts, 100,000 per op). A reply with a tail chunk, or with a
// value the appender leaves to encoding/json, is encoded by json.Marshal
// (FuzzReplyJSON).
func AppendReplyJSON(b []byte, rep *AgentReply) ([]byte, error) {
	if rep.Tail == nil {
		w := jw{b: b, ok: true}
		w.key(`{"error_code":`)
		w.int(int64(rep.Code))
		w.key(`,"error_msg":`)
		w.str(rep.Message)
		if rep.Output != "" {
			w.key(`,"output":`)
			w.str(rep.Output)
		}
		if rep.Status != nil {
			w.key(`,"status":`)
			w.status(rep.Status)
		}
		if rep.Cancelled {
			w.key(`,"cancelled":true`)
		}
		w.b = append(w.b, '}')
		if w.ok {
			return w.b, nil
		}
	}
	rc := *rep // a copy: rep itself does not escape (a reply per request)
	data, err := json.Marshal(&rc)
	if err != nil {
		return b, err
	}
	return append(b, data...), nil
}
