package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func sampleResult() Result {
	start := time.Date(2026, 11, 23, 18, 20, 0, 123456789, time.UTC)
	return Result{TaskID: "GSETASK:20261123182000:7", Seq: 42, Host: Host{IP: "10.0.3.7", CloudID: 2}, ProcKey: "gse:bkmonitorbeat",
		ValueKey: "gse_bkmonitorbeat", AgentID: "0:10.0.3.7", Op: OpStatus, State: StateSuccess, Code: 0, Message: "success",
		Proc: ResultProc{ProcName: "bkmonitorbeat", SetupPath: "/usr/local/gse/plugins/bin"}, Hosted: true,
		Status: &ProcStatus{ProcKey: "gse:bkmonitorbeat", ProcName: "bkmonitorbeat", State: ProcRunning, PID: 4242, Hosted: true,
			StartTime: start.In(time.FixedZone("CST", 8*3600)), RegisterTime: 1, ReportTime: 1_763_900_200, CPU: 12.34, Mem: 0.5,
			MemRSS: 123 << 20, Restarts: 2, Version: "3.2.1", Threads: 17},
		Started: start, Finished: start.Add(5 * time.Millisecond)}
}

func checkResultJSON(t *testing.T, r Result) {
	t.Helper()
	want, werr := json.Marshal(r)
	got, gerr := AppendResultJSON([]byte("prefix"), &r)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%+v: AppendResultJSON error %v, json.Marshal %v", r, gerr, werr)
	}
	if werr != nil {
		return
	}
	if !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("AppendResultJSON differs from json.Marshal:\n got %s\nwant prefix%s", got, want)
	}
	// A ResultEncoder writes the same, its seconds made (first) and
	// kept (second).
	var e ResultEncoder
	for range 2 {
		if got, err := e.Append([]byte("prefix"), &r); err != nil || !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("ResultEncoder differs from json.Marshal (%v):\n got %s\nwant prefix%s", err, got, want)
		}
	}
}

// A ResultEncoder writes each time as AppendText does, one second after
// another, back and forth, in every zone, with and without a fraction;
// a time AppendText refuses is refused.
func TestResultEncoderTimes(t *testing.T) {
	var e secondCache
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("CST", 8*3600), time.FixedZone("NST", -(3*3600 + 1800)),
		time.FixedZone("odd", 5*3600+7), time.FixedZone("zero", 0)}
	base := time.Date(2026, 11, 29, 23, 59, 58, 0, time.UTC)
	var ts []time.Time
	for i := range 400 {
		at := base.Add(time.Duration(i) * 7919 * time.Microsecond) // across seconds, the day and the year
		if i%3 == 0 {
			at = at.Truncate(time.Second)
		}
		if i%5 == 0 {
			at = at.Add(100 * time.Millisecond)
		}
		ts = append(ts, at.In(zones[i%len(zones)]), at.In(zones[(i/7)%len(zones)]))
	}
	ts = append(ts, time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 5, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 24*3600)), time.Unix(0, 1), time.Time{})
	for _, at := range ts {
		want, werr := at.AppendText(nil)
		got, ok := e.appendTime([]byte("x"), at)
		if ok != (werr == nil) {
			t.Fatalf("%v: appendTime ok %v, AppendText error %v", at, ok, werr)
		}
		if ok && string(got) != "x"+string(want) {
			t.Fatalf("%v: appendTime %q, AppendText %q", at, got, want)
		}
	}
}

// The usual results are written by the appender itself, as json.Marshal
// writes them.
func TestResultJSON(t *testing.T) {
	r := sampleResult()
	if _, ok := appendResult(nil, &r, nil); !ok {
		t.Fatal("the appender left a usual result to encoding/json")
	}
	checkResultJSON(t, r)
	checkResultJSON(t, Result{})
	checkResultJSON(t, Result{TaskID: "t", State: StatePending, Status: &ProcStatus{}})
	for _, s := range []string{"a<b>&c", "line\nbreak\ttab", `quote " back \`, "\x00\x1f\x7f", "ünïcødé 中文", "\u2028\u2029", "bad \xff utf8"} {
		r := sampleResult()
		r.Message, r.Status.Message, r.Proc.FuncID = s, s, s
		checkResultJSON(t, r)
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1e-7, 1e-6, 123456789.125, 1e20, 1e21, -1e22, 5e-324, math.MaxFloat64} {
		r := sampleResult()
		r.Status.CPU, r.Status.Mem = f, -f
		checkResultJSON(t, r)
	}
	for _, f := range []float64{math.NaN(), math.Inf(1)} {
		r := sampleResult()
		r.Status.CPU = f
		checkResultJSON(t, r) // both refuse
	}
}

// FuzzResultJSON: AppendResultJSON writes what json.Marshal writes.
func FuzzResultJSON(f *testing.F) {
	f.Add("GSETASK:1", "10.0.0.1", "web:nginx", "success", "ok", "nginx", int64(7), int64(1_700_000_000), 12.5, 0.25, true, true)
	f.Add("", "", "", "", "<&>\u2028\xff", "", int64(-1), int64(0), 1e-9, 1e300, false, false)
	f.Fuzz(func(t *testing.T, task, ip, proc, state, msg, name string, n, unix int64, cpu, mem float64, hosted, withStatus bool) {
		r := Result{TaskID: task, Seq: n, Host: Host{IP: ip, CloudID: int(n % 1000)}, ProcKey: proc, ValueKey: name, AgentID: msg,
			Op: OpType(n % 13), State: ResultState(state), Code: int(n), Message: msg, Proc: ResultProc{ProcName: name, InstanceID: msg},
			Hosted: hosted}
		if unix%3 != 0 {
			r.Started = time.Unix(unix%(1<<35), n%1e9).In(time.FixedZone("z", int(n%50000)))
			r.Finished = time.Unix(unix%(1<<35), 0).UTC()
		}
		if withStatus {
			r.Status = &ProcStatus{ProcKey: proc, ProcName: name, State: ProcState(state), PID: int(n), Hosted: hosted,
				StartTime: r.Started, RegisterTime: unix, LastStartTime: n, ReportTime: unix, CPU: cpu, Mem: mem, MemRSS: uint64(unix),
				Restarts: int(n), ExitStatus: int(-n), Version: msg, Cmdline: task, Threads: int(n), Message: msg}
		}
		checkResultJSON(t, r)
	})
}

func BenchmarkResultJSON(b *testing.B) {
	r := sampleResult()
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = AppendResultJSON(buf[:0], &r)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(&r)
		}
	})
}

func checkReplyJSON(t *testing.T, rep AgentReply) {
	t.Helper()
	want, werr := json.Marshal(rep)
	got, gerr := AppendReplyJSON([]byte("prefix"), &rep)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%+v: AppendReplyJSON error %v, json.Marshal %v", rep, gerr, werr)
	}
	if werr == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("AppendReplyJSON differs from json.Marshal:\n got %s\nwant prefix%s", got, want)
	}
}

// An agent's reply is written as json.Marshal writes it.
func TestReplyJSON(t *testing.T) {
	r := sampleResult()
	for _, rep := range []AgentReply{{}, {Code: 115, Message: "running", Output: "out\n<&>", Status: r.Status, Cancelled: true},
		{Message: "\xff\u2028"}, {Status: &ProcStatus{CPU: math.NaN()}}, {Status: &ProcStatus{Mem: 1e30}},
		{Code: 0, Tail: &TailChunk{}}} {
		checkReplyJSON(t, rep)
	}
}

// FuzzReplyJSON: AppendReplyJSON writes what json.Marshal writes.
func FuzzReplyJSON(f *testing.F) {
	f.Add(0, "success", "", "running", int64(1_700_000_000), 1.5, true, false)
	f.Add(-1, "<&>\u2028\xff", "\x00", "", int64(-7), 1e-9, false, true)
	f.Fuzz(func(t *testing.T, code int, msg, out, state string, n int64, cpu float64, withStatus, cancelled bool) {
		rep := AgentReply{Code: code, Message: msg, Output: out, Cancelled: cancelled}
		if withStatus {
			rep.Status = &ProcStatus{ProcKey: msg, ProcName: out, State: ProcState(state), PID: int(n), Hosted: cancelled,
				StartTime: time.Unix(n%(1<<35), n%1e9), RegisterTime: n, ReportTime: -n, CPU: cpu, Mem: -cpu, MemRSS: uint64(n),
				Restarts: int(n), Version: state, Threads: code, Message: out}
		}
		checkReplyJSON(t, rep)
	})
}

// TestReplyJSONEveryField: a reply with every field of AgentReply and of
// its ProcStatus set (Tail aside: a tail reply goes to json.Marshal) is
// written as json.Marshal writes it, so a field added to either struct
// and not to the appender fails here instead of going missing from every
// agent's answer.
func TestReplyJSONEveryField(t *testing.T) {
	rep := AgentReply{Status: &ProcStatus{}}
	n := fillFields(t, reflect.ValueOf(&rep).Elem(), 1, "Tail")
	n += fillFields(t, reflect.ValueOf(rep.Status).Elem(), n+1)
	if rep.Tail != nil || n < 20 {
		t.Fatalf("filled %d fields, tail %v", n, rep.Tail)
	}
	checkReplyJSON(t, rep)
}

// fillFields sets every exported field of struct v but skip, other than
// pointers, to a value of its own (from seed on) that no omitempty leaves
// out, and says how many it set. A field of a kind it does not know
// fails t: the appender's test must learn it.
func fillFields(t *testing.T, v reflect.Value, seed int, skip ...string) int {
	t.Helper()
	n := 0
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		if !sf.IsExported() || slices.Contains(skip, sf.Name) || (f.Kind() == reflect.Pointer && !f.IsNil()) {
			continue
		}
		x := seed + n
		switch {
		case f.Type() == reflect.TypeFor[time.Time]():
			f.Set(reflect.ValueOf(time.Unix(int64(1_700_000_000+x), int64(x)).UTC()))
		case f.Kind() == reflect.String:
			f.SetString(fmt.Sprintf("%s-%d", sf.Name, x))
		case f.CanInt():
			f.SetInt(int64(x))
		case f.CanUint():
			f.SetUint(uint64(x))
		case f.CanFloat():
			f.SetFloat(float64(x) + 0.25)
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		default:
			t.Fatalf("%s.%s: a field of kind %s; teach fillFields and the appender", v.Type(), sf.Name, f.Kind())
		}
		n++
	}
	return n
}

// hostStatusRec is a stored status record as a store declares it.
type hostStatusRec struct {
	Host   Host       `json:"host"`
	Status ProcStatus `json:"status"`
}

func checkHostStatusJSON(t *testing.T, h Host, st ProcStatus) {
	t.Helper()
	want, werr := json.Marshal(hostStatusRec{h, st})
	got, gerr := AppendHostStatusJSON([]byte("prefix"), h, &st)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%+v: AppendHostStatusJSON error %v, json.Marshal %v", st, gerr, werr)
	}
	if werr == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("AppendHostStatusJSON differs from json.Marshal:\n got %s\nwant prefix%s", got, want)
	}
}

// A stored status record is written as json.Marshal writes it: every
// field of its status set, none, odd texts and the floats the appender
// leaves to encoding/json.
func TestHostStatusJSON(t *testing.T) {
	var full ProcStatus
	if n := fillFields(t, reflect.ValueOf(&full).Elem(), 1); n < 18 {
		t.Fatalf("filled %d fields", n)
	}
	h := Host{IP: "10.0.3.7", CloudID: 2}
	checkHostStatusJSON(t, h, full)
	checkHostStatusJSON(t, Host{}, ProcStatus{})
	checkHostStatusJSON(t, h, *sampleResult().Status)
	for _, s := range []string{"a<b>&c", "line\nbreak", "\x00\u2028", "bad \xff utf8"} {
		st := full
		st.Message, st.Cmdline = s, s
		checkHostStatusJSON(t, Host{IP: s, CloudID: -1}, st)
	}
	for _, f := range []float64{1e-7, 1e21, math.NaN(), math.Inf(-1)} {
		st := full
		st.CPU = f
		checkHostStatusJSON(t, h, st)
	}
}

// FuzzHostStatusJSON: AppendHostStatusJSON writes what json.Marshal writes.
func FuzzHostStatusJSON(f *testing.F) {
	f.Add("10.0.0.1", 3, "web:nginx", "running", "<&>\u2028\xff", int64(1_700_000_000), 12.5, true)
	f.Fuzz(func(t *testing.T, ip string, cloud int, proc, state, msg string, n int64, cpu float64, hosted bool) {
		st := ProcStatus{ProcKey: proc, ProcName: msg, State: ProcState(state), PID: int(n), Hosted: hosted,
			StartTime: time.Unix(n%(1<<35), n%1e9).In(time.FixedZone("z", int(n%50000))), RegisterTime: n, LastStartTime: -n,
			ReportTime: n, CPU: cpu, Mem: -cpu, MemRSS: uint64(n), Restarts: int(n), ExitStatus: int(-n), Version: state,
			Cmdline: msg, Threads: cloud, Message: msg}
		if n%3 == 0 {
			st.StartTime = time.Time{}
		}
		checkHostStatusJSON(t, Host{IP: ip, CloudID: cloud}, st)
	})
}

// BenchmarkResultEncoder encodes a status result as the store's packs and
// the task stream do (a ResultEncoder): its times in one second, its
// status as a simulated host reports it (UTC start time, usage with two
// decimals).
func BenchmarkResultEncoder(b *testing.B) {
	r := sampleResult()
	r.Started, r.Finished = r.Started.Local(), r.Finished.Local()
	st := *r.Status
	st.StartTime = time.Unix(1_763_900_000, 417_000_000).UTC()
	st.LastStartTime, st.Cmdline, st.CPU, st.Mem = 1_763_900_000, "/usr/local/gse/plugins/bin/bkmonitorbeat -c ../etc/bkmonitorbeat.conf", 1.37, 0.82
	r.Status = &st
	var e ResultEncoder
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = e.Append(buf[:0], &r)
	}
}

// Usage figures with two decimals or fewer (an agent's and the
// simulator's are rounded so) are written by AppendJSONFloat's own path,
// as strconv writes them.
func TestHundredths(t *testing.T) {
	for i := int64(-100_000); i <= 100_000; i++ {
		for _, f := range []float64{float64(i) / 100, math.Round(float64(i)*1.37) / 100} {
			if _, ok := appendFewPlaces(nil, f); !ok {
				t.Fatalf("%v not taken", f)
			}
			checkJSONFloat(t, f)
		}
	}
}

// One ResultEncoder writes a long run of results as json.Marshal writes
// each: texts that come back, texts that take the slot of another (of
// the same length and ends), texts to escape, texts too short or too
// long to be kept.
func TestResultEncoderTexts(t *testing.T) {
	var e ResultEncoder
	long := strings.Repeat("/usr/local/gse/plugins/bin ", 12)
	texts := []string{"gse:bkmonitorbeat", "gse:bkmonitorbeaT", "gse:bkmXnitorbeat", "web:<nginx>&\u2028", "success", "",
		"GSETASK:20261123182000:7", "GSETASK:20261123182000:8", "bad utf-8 \xff here", long, long + "x", "a\"b\\c\nd\te"}
	for i := range 2000 {
		r := sampleResult()
		pick := func(k int) string { return texts[(i*k+i/7)%len(texts)] }
		r.TaskID, r.ProcKey, r.ValueKey, r.Message = pick(1), pick(3), pick(5), pick(7)
		r.Proc = ResultProc{ProcName: pick(11), SetupPath: pick(13), FuncID: pick(17)}
		st := *r.Status
		st.ProcKey, st.ProcName, st.Version, st.Cmdline, st.Message = pick(19), pick(23), pick(29), pick(31), pick(37)
		r.Status = &st
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := e.Append(nil, &r); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("result %d (%v):\n got %s\nwant %s", i, err, got, want)
		}
	}
}
