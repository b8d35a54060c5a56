package bench

import (
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"gseproc/backend/server/wire"
	"gseproc/model"
)

// opLineCases are lines as the op client prints them and lines it does
// not print, each read by readOpLine and json.Unmarshal alike.
func opLineCases(t testing.TB) []string {
	start := time.Date(2026, 11, 24, 5, 0, 0, 123456789, time.UTC)
	r := model.Result{TaskID: "GSETASK:20261124050000:1", Seq: 7, Host: model.Host{IP: "10.0.0.7"}, ProcKey: "gse:beat",
		Op: model.OpStatus, State: model.StateSuccess, Message: "success", Proc: model.ResultProc{ProcName: "beat"},
		Status:  &model.ProcStatus{ProcKey: "gse:beat", ProcName: "beat", State: model.ProcRunning, PID: 4007, StartTime: start},
		Started: start, Finished: start.Add(5 * time.Millisecond)}
	res, err := model.AppendResultJSON(nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	// The op client's line: the result, then its own members (content is
	// JSON in a string: its quotes escaped).
	line := string(res[:len(res)-1]) + `,"content":"{\"state\":\"failed\",\"task_id\":\"x\",\"started\":\"y\"}","agent_id":"0:10.0.0.7","op":"status","duration_ms":5}`
	return []string{
		line,
		string(res),
		`{"task_id":"t","state":"failed","started":"2026-01-02T03:04:05Z","finished":"2026-01-02T03:04:06.5+08:00"}`,
		`{"finished":"2026-01-02T03:04:06Z","host":{"task_id":"nested","state":"nested"},"state":"timeout","list":[{"state":"x"},"state"]}`,
		`{"state":"a\"b","task_id":"t"}`,                    // an escape in a value read
		`{"State":"failed","task_id":"t"}`,                  // a name matched regardless of case
		`{"ſtate":"failed"}`,                                // and by Unicode folding
		`{"sta\u0074e":"failed"}`,                           // an escape in a name
		`{"state":"failed","state":"success"}`,              // repeated: the last wins
		`{"state":null,"task_id":"t"}`,                      // not a string
		`{"state" : "failed", "task_id" : "t"}`,             // white space
		` {"task_id":"t"} `,                                 // around the object
		`{"started":"not a time"}`,                          // a bad time: an error
		`{"started":"2026-01-02T03:04:05Z","state":"a\\b"}`, // a backslash
		`{}`,
		`[]`,
		`"state"`,
		`{"a":"}","state":"ok"}`,
		`{"a":"\\","state":"ok"}`,
		`{"a":{"b":["}"]},"state":"ok","task_id":"\u00e9"}`,
	}
}

// TestReadOpLine: the harness's reader of op lines gives what
// json.Unmarshal gives, error or not.
func TestReadOpLine(t *testing.T) {
	fast := 0
	for _, c := range opLineCases(t) {
		checkOpLine(t, []byte(c))
		var l opLine
		if readOpLineFast([]byte(c), &l) {
			fast++
		}
	}
	if fast < 5 {
		t.Fatalf("the fast reader took %d lines; want the op client's and the plain ones", fast)
	}
}

func checkOpLine(t *testing.T, line []byte) {
	t.Helper()
	var want opLine
	werr := json.Unmarshal(line, &want)
	var got opLine
	gerr := readOpLine(line, &got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%s: error %v, json.Unmarshal's %v", line, gerr, werr)
	}
	if werr == nil && (got.TaskID != want.TaskID || got.State != want.State || !got.Started.Equal(want.Started) || !got.Finished.Equal(want.Finished) ||
		got.Started.Location().String() != want.Started.Location().String()) {
		t.Fatalf("%s: read %+v, json.Unmarshal %+v", line, got, want)
	}
}

// FuzzReadOpLine: on any valid JSON, readOpLine and json.Unmarshal agree.
func FuzzReadOpLine(f *testing.F) {
	for _, c := range opLineCases(f) {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		checkOpLine(t, []byte(s))
	})
}

// BenchmarkReadOpLine: the harness's read of one op client line of a
// status result, its content as the client writes it (JSON in a string,
// a quote escaped every few bytes).
func BenchmarkReadOpLine(b *testing.B) {
	start := time.Date(2026, 11, 24, 5, 0, 0, 123456789, time.UTC)
	r := model.Result{TaskID: "GSETASK:20261124050000:1", Seq: 7, Host: model.Host{IP: "10.0.0.7"}, ProcKey: "gse:bkmonitorbeat",
		Op: model.OpStatus, State: model.StateSuccess, Message: "success", Proc: model.ResultProc{ProcName: "bkmonitorbeat", SetupPath: "/usr/local/gse/plugins/bin"},
		Status: &model.ProcStatus{ProcKey: "gse:bkmonitorbeat", ProcName: "bkmonitorbeat", State: model.ProcRunning, PID: 4007, Hosted: true,
			StartTime: start, ReportTime: start.Unix(), CPU: 1.25, Mem: 0.5, MemRSS: 12 << 20, Version: "3.2.1", Threads: 7},
		Started: start, Finished: start.Add(5 * time.Millisecond)}
	res, err := model.AppendResultJSON(nil, &r)
	if err != nil {
		b.Fatal(err)
	}
	line := append(res[:len(res)-1], `,"content":`...)
	line = wire.AppendContentString(line, &r)
	line = append(line, `,"agent_id":"0:10.0.0.7","op":"status","duration_ms":5}`...)
	var l opLine
	if !readOpLineFast(line, &l) {
		b.Fatalf("the fast reader left the line: %s", line)
	}
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if err := readOpLine(line, &l); err != nil {
			b.Fatal(err)
		}
	}
}

// chunks is a reader that returns its parts one read each.
type chunks struct{ parts []string }

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	if c.parts[0] = c.parts[0][n:]; c.parts[0] == "" {
		c.parts = c.parts[1:]
	}
	return n, nil
}

// TestOpOutput: the lines read back are the lines written, whatever the
// reads split, each timed by the read that brought its end; and a second
// run's lines are only its own.
func TestOpOutput(t *testing.T) {
	type line struct {
		text string
		at   time.Duration
	}
	read := func(o *opOutput, parts ...string) []line {
		t.Helper()
		var n time.Duration
		if err := o.readFrom(&chunks{parts: parts}, func() time.Duration { n++; return n }); err != nil {
			t.Fatal(err)
		}
		var got []line
		o.lines(func(b []byte, at time.Duration) { got = append(got, line{string(b), at}) })
		return got
	}
	var o opOutput
	got := read(&o, `{"a":1}`+"\n"+`{"b"`, `:2}`+"\r\n\n", `{"c":3}`)
	want := []line{{`{"a":1}`, 1}, {`{"b":2}`, 2}, {``, 2}, {`{"c":3}`, 3}}
	if !slices.Equal(got, want) {
		t.Fatalf("lines %+v, want %+v", got, want)
	}
	// Longer than a read's room, across reads.
	long := strings.Repeat("x", 3*opReadMin)
	got = read(&o, long[:10], long[10:]+"\n", "end\n")
	want = []line{{long, 2}, {"end", 3}}
	if !slices.Equal(got, want) {
		t.Fatalf("second run: %d lines (first %d bytes), want %d", len(got), len(got[0].text), len(want))
	}
	if got := read(&o); len(got) != 0 {
		t.Fatalf("no output read as %+v", got)
	}
}
