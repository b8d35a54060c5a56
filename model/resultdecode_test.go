package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// checkDecode: DecodeResultJSON(data) is json.Unmarshal's result and error-ness.
func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	var want Result
	werr := json.Unmarshal(data, &want)
	got, gerr := DecodeResultJSON(data)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%s: DecodeResultJSON error %v, json.Unmarshal %v", data, gerr, werr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: DecodeResultJSON differs from json.Unmarshal:\n got %+v\nwant %+v", data, got, want)
	}
	// A ResultDecoder, new or holding another result's strings and this
	// one's, decodes it alike.
	sample := sampleResult()
	other, err := AppendResultJSON(nil, &sample)
	if err != nil {
		t.Fatal(err)
	}
	var d ResultDecoder
	for i, in := range [][]byte{data, other, data, data} {
		got, exact, gerr := d.DecodeExact(in)
		checkExact(t, in, got, exact, gerr)
		if i == 1 {
			continue
		}
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%s: ResultDecoder.Decode #%d error %v, json.Unmarshal %v", data, i, gerr, werr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: ResultDecoder.Decode #%d differs from json.Unmarshal:\n got %+v\nwant %+v", data, i, got, want)
		}
	}
}

// checkExact: a result DecodeExact calls exact is what AppendResultJSON
// writes of it, byte for byte.
func checkExact(t *testing.T, data []byte, got Result, exact bool, err error) {
	t.Helper()
	if !exact {
		return
	}
	if err != nil {
		t.Fatalf("%s: exact, and error %v", data, err)
	}
	again, err := AppendResultJSON(nil, &got)
	if err != nil || !bytes.Equal(again, data) {
		t.Fatalf("DecodeExact says exact, but AppendResultJSON writes otherwise (%v):\n got %s\nread %s", err, again, data)
	}
}

// TestDecodeExact: the results a server writes (AppendResultJSON) are
// exact, through a new decoder and one that read them before; the same
// results written otherwise are read alike and are not.
func TestDecodeExact(t *testing.T) {
	base := sampleResult()
	base.AgentID = ""
	var results []Result
	for i := range 50 {
		r := base
		r.Seq = int64(i + 1)
		r.Host.IP = fmt.Sprintf("10.0.0.%d", i)
		r.Started = base.Started.Add(time.Duration(i) * 37 * time.Millisecond)
		r.Finished = r.Started.Add(time.Duration(i%5) * time.Millisecond)
		st := *base.Status
		st.StartTime = base.Started.Add(-time.Duration(i) * 7919 * time.Second)
		switch i % 4 {
		case 1:
			st.StartTime = st.StartTime.In(time.FixedZone("", 8*3600))
		case 2:
			st.StartTime = st.StartTime.Truncate(time.Second)
		}
		st.CPU, st.Mem = float64(i)/8, float64(i)*1.25
		r.Status = &st
		results = append(results, r)
	}
	results = append(results, Result{}, Result{TaskID: "t", Status: &ProcStatus{}}, Result{Proc: ResultProc{FuncID: "f"}, Hosted: true},
		Result{TaskID: "t", Message: "a DEL \x7f, written as itself"})
	var d ResultDecoder
	for pass := range 2 {
		for i := range results {
			data, err := AppendResultJSON(nil, &results[i])
			if err != nil {
				t.Fatal(err)
			}
			got, exact, err := d.DecodeExact(data)
			checkExact(t, data, got, exact, err)
			if !exact {
				t.Fatalf("pass %d, result %d: not exact: %s", pass, i, data)
			}
		}
	}
	data, err := AppendResultJSON(nil, &base)
	if err != nil {
		t.Fatal(err)
	}
	if _, exact, _ := d.DecodeExact(data); !exact {
		t.Fatalf("not exact: %s", data)
	}
	// The same result written otherwise: read, not exact.
	for _, c := range [][2]string{
		{`"task_id":"GSETASK`, `"task_id":"<GSETASK`},
		{`"bk_cloud_id":2`, `"bk_cloud_id":-0`},
		{`,"op_type":2`, `,"value_key":"","op_type":2`},
		{`,"op_type":2`, `,"agent_id":"","op_type":2`},
		{`"proc_name":"bkmonitorbeat",`, `"proc_name":"",`},
		{`,"hosted":true`, `,"hosted":false`},
		{`"cpu_usage":12.34`, `"cpu_usage":12.340`},
		{`"cpu_usage":12.34`, `"cpu_usage":12.3399999999999999`},
		{`"cpu_usage":12.34`, `"cpu_usage":0.0000001`},
		{`"cpu_usage":12.34`, `"cpu_usage":0.0`},
		{`"mem_usage":0.5`, `"mem_usage":0.50`},
		{`"register_time":1`, `"register_time":0`},
		{`"mem_rss":128974848`, `"mem_rss":0`},
		{`"restarts":2`, `"restarts":0`},
		{`"restarts":2`, `"restarts":2,"exit_status":0`},
		{`"version":"3.2.1"`, `"version":""`},
		{`"threads":17`, `"threads":17,"message":""`},
		{`"started":"2026-11-23T18:20:00.123456789Z"`, `"started":"2026-11-23T18:20:00.123456789+00:00"`},
		{`"started":"2026-11-23T18:20:00.123456789Z"`, `"started":"2026-11-23T18:20:00.1234567890Z"`},
		{`"started":"2026-11-23T18:20:00.123456789Z"`, `"started":"2026-11-23T18:20:00.000Z"`},
		{`"started":"2026-11-23T18:20:00.123456789Z"`, `"started":"0001-01-01T00:00:00Z"`},
		{`"start_time":"2026-11-24T02:20:00.123456789+08:00"`, `"start_time":"2026-11-24T02:20:00.12345678900+08:00"`},
		{`"start_time":"2026-11-24T02:20:00.123456789+08:00"`, `"start_time":"2026-11-24T02:20:00.120+08:00"`},
	} {
		if !bytes.Contains(data, []byte(c[0])) {
			t.Fatalf("%s not in %s", c[0], data)
		}
		other := bytes.Replace(data, []byte(c[0]), []byte(c[1]), 1)
		for range 2 { // new to the decoder, then read before
			_, exact, err := d.DecodeExact(other)
			if err != nil {
				t.Fatalf("%s: %v", other, err)
			}
			if exact {
				t.Fatalf("%s -> %s: exact", c[0], c[1])
			}
			checkDecode(t, other)
		}
	}
}

// TestFloatExact: a float's text is exact when strconv.AppendFloat writes
// it so.
func TestFloatExact(t *testing.T) {
	for _, s := range []string{"0", "-0", "1", "-1", "0.5", "12.34", "100", "1e2", "0.1", "0.30000000000000004", "123456789012345",
		"1234567890123456", "0.000001", "0.0000001", "1.0", "0.00", "100000000000000000000", "1000000000000000000000",
		"999999999999999.9", "12345678901234.5", "0.000123456789012345", "0.0001234567890123456", "-0.0", "9007199254740993"} {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		r := jr{b: []byte(s + ","), ok: true}
		lit := r.num(true)
		if !r.ok {
			continue // not a number the reader takes
		}
		abs := math.Abs(f)
		want := !(abs != 0 && (abs < 1e-6 || abs >= 1e21)) && strconv.FormatFloat(f, 'f', -1, 64) == s
		got := floatExact(lit, f)
		if got && !want {
			t.Fatalf("%s: exact, but written %s", s, strconv.FormatFloat(f, 'f', -1, 64))
		}
		// Only a text of more than 15 significant digits may be exact
		// and not said so.
		sig := strings.Trim(strings.ReplaceAll(strings.TrimPrefix(s, "-"), ".", ""), "0")
		if !got && want && len(sig) <= 15 {
			t.Fatalf("%s: not exact, but written so", s)
		}
	}
}

// TestResultDecoder: one decoder over many results, alike and not,
// gives what DecodeResultJSON gives each, and shares the strings that
// repeat.
func TestResultDecoder(t *testing.T) {
	var d ResultDecoder
	base := sampleResult()
	var prev Result
	for i := range 300 {
		r := base
		r.Seq = int64(i)
		r.Host.IP = fmt.Sprintf("10.0.%d.%d", i/250, i%250)
		if i%7 == 0 {
			r.Message = fmt.Sprintf("failed %d", i)
		}
		if i%11 == 0 {
			r.TaskID = "GSETASK:other"
		}
		// Times within a few seconds, in zones of their own now and then
		// (the decoder keeps the seconds it parsed).
		r.Started = base.Started.Add(time.Duration(i) * 7 * time.Millisecond)
		r.Finished = r.Started.Add(time.Duration(i%5) * time.Microsecond)
		switch {
		case i%13 == 0:
			r.Started = r.Started.In(time.FixedZone("", 8*3600))
		case i%17 == 0:
			r.Finished = r.Finished.Local()
		case i%19 == 0:
			r.Finished = r.Finished.Truncate(time.Second)
		}
		data, err := AppendResultJSON(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		want, err := DecodeResultJSON(data)
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.Decode(data)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("result %d: %+v, %v; want %+v", i, got, err, want)
		}
		if i > 0 && i%11 != 0 && (i-1)%11 != 0 && unsafe.StringData(got.TaskID) != unsafe.StringData(prev.TaskID) {
			t.Fatalf("result %d: the task id was made again", i)
		}
		prev = got
	}
}

// The usual results (as AppendResultJSON writes them) are read by the
// reader itself, as json.Unmarshal reads them; anything else is left to it.
func TestDecodeResultJSON(t *testing.T) {
	r := sampleResult()
	data, err := AppendResultJSON(nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := readResult(data, nil); !ok {
		t.Fatalf("the reader left a usual result to encoding/json: %s", data)
	}
	checkDecode(t, data)
	for _, r := range []Result{{}, {TaskID: "t", State: StatePending, Status: &ProcStatus{}}, {Proc: ResultProc{FuncID: "f"}, Hosted: true}} {
		data, err := AppendResultJSON(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, ok := readResult(data, nil); !ok {
			t.Fatalf("the reader left %s to encoding/json", data)
		}
		checkDecode(t, data)
	}
	for _, s := range []string{
		`{"task_id":"a","seq":1,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m"}`,
		`{"task_id":"a","seq":1,"seq":2,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m"}`,
		`{"task_id":"a\n","seq":1,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m"}`,
		`{"task_id":"a","seq":01,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m"}`,
		`{"task_id":"a","seq":1.5,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m"}`,
		`{"task_id":"a","seq":1e2,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m"}`,
		`{"task_id":"a","seq":99999999999999999999,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m"}`,
		`{"task_id":"a","seq":1,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m","status":null}`,
		`{"task_id":"a","seq":1,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m","started":"bad"}`,
		`{"task_id":"a","seq":1,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m"} `,
		`{"task_id":"a","seq":1,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m"}x`,
		`{"TASK_ID":"a","seq":1,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m"}`,
		`{"task_id":"a","seq":1,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m","status":{"proc":"p","proc_name":"n","state":"running","pid":-1,"is_auto":false,"cpu_usage":-0,"mem_usage":1.,"mem_rss":-1}}`,
		`{"task_id":"a","seq":1,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m","status":{"proc":"p","proc_name":"n","state":"running","pid":-1,"is_auto":false,"cpu_usage":-0,"mem_usage":0.25,"mem_rss":18446744073709551615}}`,
		`{"task_id":"a","seq":1,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m","proc_identity":{}}`,
		`{"task_id":"a","seq":1,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m","hosted":false}`,
		`{}`, `null`, ``, `{"task_id":"a"`,
	} {
		checkDecode(t, []byte(s))
	}
	// Times in the forms RFC 3339 allows, one after another through one
	// decoder (it keeps the seconds it parsed, by their text).
	var d ResultDecoder
	for _, tm := range []string{"2026-11-24T05:00:00Z", "2026-11-24T05:00:00.5Z", "2026-11-24T05:00:00.123456789Z",
		"2026-11-24T05:00:00.1234567891Z", "2026-11-24T05:00:00.000Z", "2026-11-24T05:00:00+08:00", "2026-11-24T05:00:00.25+08:00",
		"2026-11-24T05:00:00.25-08:00", "2026-11-24T05:00:00.25+00:00", "2026-11-24T05:00:00,25Z", "2026-11-24T05:00:00.Z",
		"2026-11-24T05:00:00.25z", "2026-11-24T05:00:60.25Z", "2026-11-24T05:00:00.25+08:00", "2026-11-24T05:00:00.25Z",
		// Dates and clocks in "Z", read from their fields: as time.Parse
		// takes or refuses them.
		"2024-02-29T00:00:00Z", "2023-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2000-02-29T12:00:00Z", "0000-01-01T00:00:00Z",
		"0000-02-29T00:00:00Z", "9999-12-31T23:59:59.999999999Z", "2026-04-31T00:00:00Z", "2026-04-30T24:00:00Z",
		"2026-04-30T23:60:00Z", "2026-00-10T00:00:00Z", "2026-13-10T00:00:00Z", "2026-01-00T00:00:00Z", "2026-01-32T00:00:00Z",
		"2026-1-010T00:00:00Z", "2026-01-01t00:00:00Z", "2026-01-01T00-00:00Z", "-026-01-01T00:00:00Z", "2026-01-01T0a:00:00Z",
		"2026-12-31T23:59:59.1Z", "2026-12-31T23:59:59.100Z", "2026-06-15T07:08:09.000000001Z"} {
		data := []byte(`{"task_id":"a","seq":1,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m","started":"` + tm + `","finished":"` + tm + `"}`)
		checkDecode(t, data)
		var want Result
		werr := json.Unmarshal(data, &want)
		got, gerr := d.Decode(data)
		if (werr == nil) != (gerr == nil) || (werr == nil && !reflect.DeepEqual(got, want)) {
			t.Fatalf("%s: %+v (%v), json.Unmarshal %+v (%v)", tm, got, gerr, want, werr)
		}
	}
}

// FuzzDecodeResultJSON: DecodeResultJSON reads what json.Unmarshal reads,
// of what AppendResultJSON writes and of any input.
func FuzzDecodeResultJSON(f *testing.F) {
	f.Add([]byte(`{"task_id":"a","seq":1,"host":{"ip":"x","bk_cloud_id":0},"proc":"p","op_type":1,"state":"s","error_code":0,"error_msg":"m"}`),
		"GSETASK:1", "10.0.0.1", "web:nginx", "ok", int64(7), int64(1_700_000_000), 12.5, true)
	f.Add([]byte(`{"seq":-0}`), "", "", "", "<&>\u2028\xff", int64(-1), int64(0), 1e-9, false)
	// A result as the server writes it (exact), to be changed a little.
	sample := sampleResult()
	sample.AgentID = ""
	data, err := AppendResultJSON(nil, &sample)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, "", "", "", "", int64(0), int64(0), 0.0, false)
	f.Fuzz(func(t *testing.T, raw []byte, task, ip, proc, msg string, n, unix int64, cpu float64, withStatus bool) {
		checkDecode(t, raw)
		r := Result{TaskID: task, Seq: n, Host: Host{IP: ip, CloudID: int(n % 1000)}, ProcKey: proc, ValueKey: msg, AgentID: msg,
			Op: OpType(n % 13), State: ResultState(msg), Code: int(n), Message: msg, Proc: ResultProc{ProcName: proc, InstanceID: msg},
			Hosted: n%2 == 0}
		if unix%3 != 0 {
			r.Started = time.Unix(unix%(1<<35), n%1e9).In(time.FixedZone("z", int(n%50000)))
			r.Finished = time.Unix(unix%(1<<35), 0).UTC()
		}
		if withStatus {
			r.Status = &ProcStatus{ProcKey: proc, ProcName: task, State: ProcState(msg), PID: int(n), Hosted: n%2 == 1,
				StartTime: r.Started, RegisterTime: unix, LastStartTime: n, ReportTime: unix, CPU: cpu, Mem: -cpu, MemRSS: uint64(unix),
				Restarts: int(n), ExitStatus: int(-n), Version: msg, Cmdline: task, Threads: int(n), Message: msg}
		}
		if data, err := AppendResultJSON(nil, &r); err == nil {
			checkDecode(t, data)
		}
	})
}

func BenchmarkDecodeResultJSON(b *testing.B) {
	r := sampleResult()
	data, err := AppendResultJSON(nil, &r)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("reader", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeResultJSON(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r Result
			if err := json.Unmarshal(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
