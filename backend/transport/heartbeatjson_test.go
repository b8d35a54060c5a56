package transport

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"gseproc/model"
)

// heartbeatSamples are full heartbeats as agents and the simulator send them.
func heartbeatSamples(t testing.TB) [][]byte {
	at := time.Date(2026, 11, 24, 4, 30, 0, 123456789, time.UTC)
	start := at.Add(-time.Hour)
	running := model.ProcStatus{ProcKey: "gse:bkmonitorbeat", ProcName: "bkmonitorbeat", State: model.ProcRunning, PID: 4242,
		Hosted: true, StartTime: start, RegisterTime: 1_763_900_000, LastStartTime: 1_763_900_100, ReportTime: 1_763_900_200,
		CPU: 1.25, Mem: 0.5, MemRSS: 64 << 20, Restarts: 1, Version: "3.2.1", Cmdline: "/usr/local/gse/bin/bkmonitorbeat -c etc/x.conf", Threads: 9}
	stopped := model.ProcStatus{ProcKey: "web:nginx", ProcName: "nginx", State: model.ProcStopped, PID: -1, ExitStatus: 1, Message: "exited — 1"}
	info := model.HostInfo{Host: model.Host{IP: "10.0.3.7", CloudID: 2}, Labels: map[string]string{"zone": "sh-a", "os": "linux", "rack": "r007"},
		State: model.AgentOnline, LastSeen: at.Unix(), Version: "2.1.0", AgentID: "020000000052540012345616958806573215"}
	var out [][]byte
	for _, hb := range []Heartbeat{
		{Info: info, Time: at, Interval: 5 * time.Second, Statuses: []model.ProcStatus{running, stopped}, Full: true},
		{Info: info, Time: at.In(time.FixedZone("CST", 8*3600)), Interval: time.Second, Statuses: []model.ProcStatus{}, Reconnected: 3, Dropped: 1},
		{Info: model.HostInfo{Host: model.Host{IP: "::1"}, Labels: map[string]string{}}, Time: at, Leaving: true},
		{},
	} {
		b, err := json.Marshal(hb)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// The heartbeats agents send are decoded by the scanner (not by the
// fallback), to what encoding/json makes of them.
func TestDecodeHeartbeatFast(t *testing.T) {
	for _, b := range heartbeatSamples(t) {
		got, ok := fastHeartbeat(b)
		if !ok {
			t.Fatalf("the scanner did not take a usual heartbeat: %s", b)
		}
		var want Heartbeat
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\nscanner %+v\njson    %+v", b, got, want)
		}
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, b, " ", "\t"); err != nil {
			t.Fatal(err)
		}
		if got2, ok := fastHeartbeat(pretty.Bytes()); !ok || !reflect.DeepEqual(got2, want) {
			t.Fatalf("indented %s: ok %v, %+v", pretty.String(), ok, got2)
		}
	}
}

// What the scanner does not take is left to encoding/json: its answer
// (value or error) is decodeHeartbeat's.
func TestDecodeHeartbeatFallback(t *testing.T) {
	for _, s := range []string{
		`{"info":{"host":{"ip":"10.0.0.1"},"labels":{"a":"x"},"labels":{"b":"y"}}}`, // repeated object: merged
		`{"info":{"host":{"ip":"10.0.0.1"}},"info":{"agent_version":"2"}}`,          // repeated object: merged
		`{"statuses":[{"pid":1}],"statuses":[{"proc":"a:b"}]}`,                      // repeated array: elements reused
		`{"info":{"labels":{"a":"x","a":"y"}}}`,                                     // repeated label: the last
		`{"info":{"labels":{"a":"\u0041"}}}`,                                        // escape
		`{"INFO":{}}`, `{"info":{"Host":{"IP":"10.0.0.1"}}}`,                        // case-insensitive keys
		`{"info":{"labels":null}}`, `{"statuses":null}`, `{"statuses":[null]}`, // nulls
		`{"statuses":[{"pid":1,"pid":2}]}`,     // repeated in a status: the last
		`{"interval":1.5}`, `{"interval":1e3}`, // not an integer
		`{"time":"not a time"}`, `{"time":12}`, // errors
		`{"unknown":1}`, `{"info":{"unknown":1}}`, // unknown fields
		`{"full":true}{}`, `[]`, `null`, ``, `{`, `{"statuses":[}`, `{"statuses":[{},]}`, ` {"leaving":true} `,
		`{"info":{"labels":{"a":1}}}`, `{"statuses":[1]}`, `{"info":{"host":{"bk_cloud_id":99999999999999999999}}}`,
	} {
		want, werr := func() (Heartbeat, error) {
			var hb Heartbeat
			err := json.Unmarshal([]byte(s), &hb)
			return hb, err
		}()
		got, gerr := decodeHeartbeat([]byte(s))
		if (gerr == nil) != (werr == nil) || (werr == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("%s: decodeHeartbeat %+v, %v; json %+v, %v", s, got, gerr, want, werr)
		}
	}
}

// FuzzDecodeHeartbeat: whenever the scanner takes an input, encoding/json
// takes it too and decodes it to the same heartbeat.
func FuzzDecodeHeartbeat(f *testing.F) {
	for _, b := range heartbeatSamples(f) {
		f.Add(b)
	}
	f.Add([]byte(`{"statuses":[{"pid":1},{"proc":"a:b","pid":-0}],"info":{"labels":{},"host":{"ip":"x"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) { agreesWithJSON(t, data, fastHeartbeat) })
}

func BenchmarkDecodeHeartbeat(b *testing.B) {
	data := heartbeatSamples(b)[0]
	benchDecode(b, data, decodeHeartbeat)
}
