package transport

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"gseproc/model"
)

// checkFleetDecode: the fleet's decoding of data is json.Unmarshal's,
// the first time and from its cache.
func checkFleetDecode(t *testing.T, c *procCache, data []byte) {
	t.Helper()
	var want model.AgentRequest
	werr := json.Unmarshal(data, &want)
	for range 2 {
		got, gerr := c.decode(data)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%s: decode error %v, json.Unmarshal %v", data, gerr, werr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: decoded\n%+v\nwant\n%+v", data, got, want)
		}
	}
}

func TestFleetDecode(t *testing.T) {
	var c procCache
	req := model.AgentRequest{TaskID: "GSETASK:20260101000000:7", OpID: "op", Op: model.OpRestart,
		Deadline: time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC),
		Process: model.Process{Meta: model.Meta{Namespace: "web", Name: "nginx", Labels: model.Labels{"app": "nginx"}},
			Spec: model.Spec{Identity: model.Identity{ProcName: "nginx", SetupPath: "/usr/sbin"}}}}
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	checkFleetDecode(t, &c, data)
	if len(c.m) != 1 {
		t.Fatalf("%d processes cached, want 1", len(c.m))
	}
	req.OpID, req.Process.Meta.Name = "op2", "other"
	data, _ = json.Marshal(req)
	checkFleetDecode(t, &c, data)
	group := model.AgentRequest{Group: &model.ProcessGroup{Namespace: "web"}}
	data, _ = json.Marshal(group)
	checkFleetDecode(t, &c, data)
	for _, s := range []string{`{}`, `{"process":null}`, `{"process":5}`, `{"task_id":1}`, `{"Process":{"meta":{"name":"x"}}}`, `[`, `null`} {
		checkFleetDecode(t, &c, []byte(s))
	}
}

// FuzzFleetDecode: the fleet decodes what json.Unmarshal decodes.
func FuzzFleetDecode(f *testing.F) {
	f.Add(`{"task_id":"t","op_type":2,"process":{"meta":{"namespace":"a","name":"b","labels":{"x":"y"}},"spec":{"identity":{"proc_name":"b"}}},"deadline":"2026-01-01T00:00:00Z"}`)
	f.Add(`{"process_group":{"namespace":"a"},"cancel_op":true}`)
	f.Fuzz(func(t *testing.T, s string) {
		if processKeys(s) > 1 {
			t.Skip("a process named twice: the fleet takes the last, whole (decode's doc)")
		}
		var c procCache
		checkFleetDecode(t, &c, []byte(s))
	})
}

// processKeys counts the keys of the JSON object s that name the process
// (json matches them case-insensitively).
func processKeys(s string) int {
	dec := json.NewDecoder(strings.NewReader(s))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0
	}
	n := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		if k, ok := tok.(string); ok && strings.EqualFold(k, "process") {
			n++
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return n
		}
	}
	return n
}

// TestFleetDecodeFast: a usual request whose process the cache holds is
// read by the scanner (fastRequest), as json.Unmarshal reads it; one it
// does not take (a key twice, an escape, another key, a process not
// seen) is left to encoding/json, which decides.
func TestFleetDecodeFast(t *testing.T) {
	var c procCache
	req := model.AgentRequest{TaskID: "GSETASK:20260101000000:7", OpID: "GSETASK:20260101000000:7/0:10.0.0.1/web:nginx", Op: model.OpStatus,
		Deadline: time.Date(2026, 1, 1, 0, 0, 30, 5, time.UTC), CancelOp: true,
		Process: model.Process{Meta: model.Meta{Namespace: "web", Name: "nginx", Labels: model.Labels{"app": "ng{inx}\""}},
			Spec: model.Spec{Identity: model.Identity{ProcName: "nginx", SetupPath: "/usr/sbin"}}}}
	data, err := model.AppendRequestJSON(nil, &req)
	if err != nil {
		t.Fatal(err)
	}
	if ok := c.fastRequest(data, new(model.AgentRequest)); ok {
		t.Fatal("fastRequest took a process the cache does not hold")
	}
	checkFleetDecode(t, &c, data) // cached now
	if ok := c.fastRequest(data, new(model.AgentRequest)); !ok {
		t.Fatalf("fastRequest did not take the usual request %s", data)
	}
	checkFleetDecode(t, &c, data)
	// Another process, then the first again: each is read as itself, not
	// as the one found last.
	other := req
	other.Process.Meta.Labels = model.Labels{"app": "ng{inx}\"", "tier": "edge"}
	odata, err := model.AppendRequestJSON(nil, &other)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range [][]byte{odata, odata, data, odata, data} {
		checkFleetDecode(t, &c, d)
	}
	p := string(data[strings.Index(string(data), `{"meta"`):strings.Index(string(data), `,"deadline"`)])
	for _, s := range []string{
		`{"task_id":"a","task_id":"b","process":` + p + `}`,
		`{"task_id":"a\u0062","process":` + p + `}`,
		`{"task_id":"a\nb","op_type":3,"process":` + p + `}`,
		`{"Task_ID":"a","process":` + p + `}`,
		`{"task_id":"a","process":` + p + `,"x":1}`,
		`{"task_id":"a","process":` + p + `,"deadline":"2026-01-01"}`,
		`{"task_id":"a","process":` + p + `,"deadline":null}`,
		`{"task_id":"a","process":` + p + `,"op_type":2.5}`,
		`{"task_id":"a","process":` + p + `,"cancel_op":tru}`,
		`{"task_id":"a","process":` + p + `} x`,
		`{"task_id":"a","process":` + p[:len(p)-1] + `}`,
		`{"process":` + p + `,"process":` + p + `}`,
	} {
		checkFleetDecode(t, &c, []byte(s))
	}
}

// BenchmarkFleetDecode: a simulated host's decoding of the usual request
// (its process cached).
func BenchmarkFleetDecode(b *testing.B) {
	var c procCache
	req := model.AgentRequest{TaskID: "GSETASK:20260101000000:7", OpID: "GSETASK:20260101000000:7/0:10.0.0.1/gse:bkmonitorbeat", Op: model.OpStatus,
		Deadline: time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC),
		Process: model.Process{Meta: model.Meta{Namespace: "gse", Name: "bkmonitorbeat", Labels: model.Labels{"app": "bkmonitorbeat"}},
			Spec: model.Spec{Identity: model.Identity{ProcName: "bkmonitorbeat", SetupPath: "/usr/local/gse/plugins/bin"}}}}
	data, err := model.AppendRequestJSON(nil, &req)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

// objectEndBytewise is objectEnd read one byte at a time (as it was): the
// reference TestObjectEnd and FuzzObjectEnd hold it to.
func objectEndBytewise(b []byte, i int) (int, bool) {
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

func checkObjectEnd(t *testing.T, s string, i int) {
	t.Helper()
	end, ok := objectEnd([]byte(s), i)
	wend, wok := objectEndBytewise([]byte(s), i)
	if end != wend || ok != wok {
		t.Fatalf("objectEnd(%q, %d) = %d, %v; byte by byte %d, %v", s, i, end, ok, wend, wok)
	}
}

// TestObjectEnd: objectEnd finds the end byte by byte reading finds, on
// objects, escapes (a quote, a backslash, a backslash last), unclosed
// strings and objects, arrays and what is not an object.
func TestObjectEnd(t *testing.T) {
	for _, c := range []struct {
		s    string
		i    int
		want int
		ok   bool
	}{
		{`{}`, 0, 2, true},
		{`x{"a":1}y`, 1, 8, true},
		{`{"a":"}"}`, 0, 9, true},
		{`{"a":"\"}"}`, 0, 11, true},
		{`{"a":"\\"}`, 0, 10, true},
		{`{"a":"\\\"}"}`, 0, 13, true},
		{`{"a":[{"b":"]"}],"c":{}}`, 0, 24, true},
		{`{"a":"x`, 0, 0, false},
		{`{"a":"x\`, 0, 0, false},
		{`{"a":"x\"`, 0, 0, false},
		{`{"a":1`, 0, 0, false},
		{`{"a":1]`, 0, 7, false},
		{`["a"]`, 0, 0, false},
		{``, 0, 0, false},
		{`{`, 3, 0, false},
	} {
		end, ok := objectEnd([]byte(c.s), c.i)
		if end != c.want || ok != c.ok {
			t.Errorf("objectEnd(%q, %d) = %d, %v; want %d, %v", c.s, c.i, end, ok, c.want, c.ok)
		}
		checkObjectEnd(t, c.s, c.i)
	}
}

// FuzzObjectEnd: objectEnd agrees with reading byte by byte.
func FuzzObjectEnd(f *testing.F) {
	f.Add(`{"a":"\"}\\","b":[{}]}`)
	f.Add(`{"a":"x\`)
	f.Fuzz(func(t *testing.T, s string) { checkObjectEnd(t, s, 0) })
}

// TestFleetDecodeDeadlines: requests of other deadlines (other zones,
// fractions, seconds, other texts of one instant) decoded one after
// another through one cache each get their own, as json.Unmarshal reads
// it.
func TestFleetDecodeDeadlines(t *testing.T) {
	var c procCache
	req := model.AgentRequest{TaskID: "t", Op: model.OpStatus,
		Process: model.Process{Meta: model.Meta{Namespace: "web", Name: "nginx"}}}
	base := time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)
	cst := time.FixedZone("CST", 8*3600)
	var all [][]byte
	for _, d := range []time.Time{base, base.Add(time.Second), base.In(cst), base.Add(time.Nanosecond), base,
		base.Add(123456789), base.Add(500 * time.Millisecond), base.Add(999999999), base.Add(time.Microsecond).In(cst),
		base.Add(7).In(cst), base.In(time.Local), base.Add(42).In(time.Local)} {
		req.Deadline = d
		data, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, data)
	}
	for range 2 {
		for _, data := range all {
			checkFleetDecode(t, &c, data)
		}
	}
	// Texts json.Marshal does not write, after one of the same seconds
	// and zone: as UnmarshalJSON reads them, or refused as it refuses.
	for _, text := range []string{`2026-01-01T00:00:30.5Z`, `2026-01-01T00:00:30.1234567891Z`, `2026-01-01T00:00:30.Z`,
		`2026-01-01T00:00:30,5Z`, `2026-01-01T00:00:30.000000000Z`, `2026-01-01T00:00:30.5+08:00`, `2026-01-01T00:00:30+08:00`,
		`2026-01-01T00:00:30.5x`, `2026-01-01T00:00:30.5`, `2026-01-01T00:00:30.5ZZ`, `2026-02-30T00:00:30.5Z`} {
		checkFleetDecode(t, &c, []byte(`{"op_type":1,"deadline":"2026-01-01T00:00:30.25Z"}`))
		checkFleetDecode(t, &c, []byte(`{"op_type":1,"deadline":"2026-01-01T00:00:30.25+08:00"}`))
		checkFleetDecode(t, &c, []byte(`{"op_type":1,"deadline":"`+text+`"}`))
	}
}

// FuzzDeadline: a deadline read after another (the cache holding the
// first's seconds and zone) is the one UnmarshalJSON reads, or refused as
// it refuses.
func FuzzDeadline(f *testing.F) {
	f.Add("2026-01-01T00:00:30.25Z", "2026-01-01T00:00:30.5Z")
	f.Add("2026-01-01T00:00:30+08:00", "2026-01-01T00:00:30.999999999+08:00")
	f.Add("2026-01-01T00:00:30.1Z", "2026-01-01T00:00:30.1234567890Z")
	f.Fuzz(func(t *testing.T, first, second string) {
		var c procCache
		for _, text := range []string{first, second, first} {
			tok := []byte(`"` + text + `"`)
			var want time.Time
			werr := want.UnmarshalJSON(tok)
			s := jscan{b: tok}
			var got time.Time
			ok := c.deadline(&s, &got)
			if _, esc, tokOK := (&jscan{b: tok}).token(); !tokOK || esc {
				continue // not a plain string: left to encoding/json
			}
			if ok != (werr == nil) {
				t.Fatalf("%q: deadline %v, UnmarshalJSON error %v", text, ok, werr)
			}
			if ok && !reflect.DeepEqual(got, want) {
				t.Fatalf("%q: %v, UnmarshalJSON reads %v", text, got, want)
			}
		}
	})
}

// BenchmarkFleetDecodeOp: a simulated fleet's decoding of the requests of
// one op, as the engine sends them: each its host's op id and its own
// deadline (the time it was sent plus the op's budget), one process.
func BenchmarkFleetDecodeOp(b *testing.B) {
	var c procCache
	p := model.Process{Meta: model.Meta{Namespace: "gse", Name: "bkmonitorbeat", Labels: model.Labels{"app": "bkmonitorbeat"}},
		Spec: model.Spec{Identity: model.Identity{ProcName: "bkmonitorbeat", SetupPath: "/usr/local/gse/plugins/bin"}}}
	start := time.Date(2026, 11, 29, 9, 9, 40, 123456789, time.UTC)
	reqs := make([][]byte, 4096)
	for i := range reqs {
		req := model.AgentRequest{TaskID: "GSETASK:20261129090940:7", OpID: fmt.Sprintf("GSETASK:20261129090940:7/0:10.0.%d.%d/gse:bkmonitorbeat", i>>8, i&255),
			Op: model.OpStatus, Deadline: start.Add(time.Duration(i) * 37 * time.Microsecond).Add(30 * time.Second), Process: p}
		data, err := model.AppendRequestJSON(nil, &req)
		if err != nil {
			b.Fatal(err)
		}
		reqs[i] = data
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := c.decode(reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// decode is decodeInto a request of its own.
func (c *procCache) decode(data []byte) (model.AgentRequest, error) {
	var req model.AgentRequest
	err := c.decodeInto(data, &req)
	return req, err
}

// TestFleetDecodeIntoUsed: a request decoded into one that held another
// (a tail, a group, a cancel) holds only what the new one says.
func TestFleetDecodeIntoUsed(t *testing.T) {
	var c procCache
	data := []byte(`{"task_id":"t","op_type":2,"process":{"meta":{"namespace":"web","name":"nginx"}}}`)
	var want model.AgentRequest
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the first decoding, and one from the cache
		req := model.AgentRequest{Tail: &model.TailRequest{}, Group: &model.ProcessGroup{}, CancelOp: true, OpID: "old"}
		if err := c.decodeInto(data, &req); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(req, want) {
			t.Fatalf("decoded into a used request:\n%+v\nwant\n%+v", req, want)
		}
	}
}
