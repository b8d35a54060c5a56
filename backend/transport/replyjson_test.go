package transport

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"gseproc/model"
)

// replySamples are replies as the agent and the simulator send them.
func replySamples(t testing.TB) [][]byte {
	start := time.Date(2026, 11, 23, 18, 20, 0, 123456789, time.UTC)
	full := model.ProcStatus{ProcKey: "gse:bkmonitorbeat", ProcName: "bkmonitorbeat", State: model.ProcRunning, PID: 4242,
		Hosted: true, StartTime: start, RegisterTime: 1_763_900_000, LastStartTime: 1_763_900_100, ReportTime: 1_763_900_200,
		CPU: 12.34, Mem: 0.57, MemRSS: 123 << 20, Restarts: 2, ExitStatus: -1, Version: "3.2.1", Cmdline: "/usr/local/gse/bin/bkmonitorbeat -c etc/x.conf",
		Threads: 17, Message: "running — ok"}
	local := full
	local.StartTime = start.In(time.FixedZone("CST", 8*3600))
	stopped := model.ProcStatus{ProcKey: "web:nginx", ProcName: "nginx", State: model.ProcStopped, PID: -1}
	var out [][]byte
	for _, r := range []model.AgentReply{
		{Code: 0, Message: "success", Status: &full},
		{Code: 0, Message: "", Output: "started\nok", Status: &local},
		{Code: 102, Message: "process is not running", Status: &stopped},
		{Code: 115, Message: "cancelled", Cancelled: true},
		{},
	} {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// The replies agents send are decoded by the scanner (not by the
// fallback), to what encoding/json makes of them.
func TestDecodeReplyFast(t *testing.T) {
	for _, b := range replySamples(t) {
		got, ok := fastReply(b, nil)
		if !ok {
			t.Fatalf("the scanner did not take a usual reply: %s", b)
		}
		var want model.AgentReply
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\nscanner %+v\njson    %+v", b, got, want)
		}
		// Pretty-printed too.
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, b, " ", "\t"); err != nil {
			t.Fatal(err)
		}
		if got2, ok := fastReply(pretty.Bytes(), nil); !ok || !reflect.DeepEqual(got2, want) {
			t.Fatalf("indented %s: ok %v, %+v", pretty.String(), ok, got2)
		}
	}
}

// TestDecodeReplyKeepsWords: with a word table, a reply decodes to what
// encoding/json makes of it, its short texts shared with the replies
// decoded before (the same copy, not a new one each), and the strings of
// a usual status reply are not made again.
func TestDecodeReplyKeepsWords(t *testing.T) {
	var words wordTable
	for _, b := range replySamples(t) {
		var want model.AgentReply
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		first, ok := fastReply(b, &words)
		second, ok2 := fastReply(b, &words)
		if !ok || !ok2 || !reflect.DeepEqual(first, want) || !reflect.DeepEqual(second, want) {
			t.Fatalf("%s:\nwith words %+v, %+v\njson       %+v", b, first, second, want)
		}
		if want.Status == nil {
			continue
		}
		for name, pair := range map[string][2]string{
			"proc": {first.Status.ProcKey, second.Status.ProcKey}, "cmdline": {first.Status.Cmdline, second.Status.Cmdline},
			"version": {first.Status.Version, second.Status.Version}, "state": {string(first.Status.State), string(second.Status.State)},
		} {
			if pair[0] != "" && unsafe.StringData(pair[0]) != unsafe.StringData(pair[1]) {
				t.Errorf("%s: %s decoded twice is two copies", b, name)
			}
		}
	}
	b := replySamples(t)[0]
	with := testing.AllocsPerRun(100, func() { _, _ = fastReply(b, &words) })
	without := testing.AllocsPerRun(100, func() { _, _ = fastReply(b, nil) })
	if with >= without {
		t.Fatalf("with words %v allocations a reply, without %v", with, without)
	}
}

// What the scanner does not take is left to encoding/json: its answer
// (value or error) is decodeReply's.
func TestDecodeReplyFallback(t *testing.T) {
	for _, s := range []string{
		`{"error_code":1,"error_msg":"a \"quoted\" word"}`, // escape
		`{"error_code":1,"ERROR_MSG":"other case"}`,        // case-insensitive key
		`{"error_code":1,"unknown":[1,2,{"x":null}]}`,      // unknown field
		`{"error_code":1,"status":null}`,                   // null
		`{"error_code":1,"tail":{"data":"x"}}`,             // a tail chunk
		`{"error_code":1.5}`,                               // not an integer: an error
		`{"error_code":1}{}`,                               // trailing data: an error
		`{"error_code":1,"error_msg":"\xff"}`,              // invalid UTF-8 (U+FFFD)
		`{"error_code":99999999999999999999}`,              // overflow: an error
		`{"status":{"pid":1},"status":{"proc":"a:b"}}`,     // repeated: merged
		`{"status":{"start_time":"not a time"}}`,           // an error
		`{"status":{"cpu_usage":1e400}}`,                   // out of range: an error
		`[]`, `null`, ``, `{`, `{"error_code":}`, ` {"output":"x"} `,
		// Integers at the edges of the scanner's own parsing (18 digits)
		// and of strconv's.
		`{"status":{"mem_rss":-0}}`, `{"status":{"mem_rss":-1}}`, `{"status":{"mem_rss":0}}`,
		`{"status":{"mem_rss":999999999999999999,"report_time":-999999999999999999,"pid":-0}}`,
		`{"status":{"mem_rss":1000000000000000000,"report_time":-1000000000000000000}}`,
		`{"status":{"report_time":9223372036854775807,"register_time":-9223372036854775808}}`,
		`{"status":{"report_time":9223372036854775808}}`, `{"status":{"mem_rss":18446744073709551616}}`,
		`{"status":{"pid":01}}`, `{"status":{"pid":-}}`, `{"status":{"pid":1e3}}`, `{"status":{"threads":2.0}}`,
	} {
		want, werr := func() (model.AgentReply, error) {
			var r model.AgentReply
			err := json.Unmarshal([]byte(s), &r)
			return r, err
		}()
		got, gerr := decodeReply([]byte(s))
		if (gerr == nil) != (werr == nil) || (werr == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("%s: decodeReply %+v, %v; json %+v, %v", s, got, gerr, want, werr)
		}
	}
}

// FuzzDecodeReply: whenever the scanner takes an input, encoding/json
// takes it too and decodes it to the same reply.
func FuzzDecodeReply(f *testing.F) {
	for _, b := range replySamples(f) {
		f.Add(b)
	}
	f.Add([]byte(`{"status":{"pid":1},"status":{"proc":"a:b"}}`))
	f.Add([]byte(`{"error_code":-0,"cancelled":true,"status":{"cpu_usage":-0.0e-3,"mem_rss":18446744073709551615}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		agreesWithJSON(t, data, func(b []byte) (model.AgentReply, bool) { return fastReply(b, nil) })
		var words wordTable
		agreesWithJSON(t, data, func(b []byte) (model.AgentReply, bool) { return fastReply(b, &words) })
	})
}

func BenchmarkDecodeReply(b *testing.B) {
	data := replySamples(b)[0]
	benchDecode(b, data, decodeReply)
}

// BenchmarkDecodeReplyWords decodes a status reply as the dispatcher
// does: its short texts kept by a word table (decodeReplyIn).
func BenchmarkDecodeReplyWords(b *testing.B) {
	data := replySamples(b)[0]
	var words wordTable
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeReplyIn(data, &words); err != nil {
			b.Fatal(err)
		}
	}
}
