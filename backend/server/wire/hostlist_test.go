package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"gseproc/model"
)

// listHost is a host as the list form carries it, its labels and
// processes resolved: what a test compares.
type listHost struct {
	Host     model.Host
	State    model.AgentState
	Version  string
	AgentID  string
	LastSeen int64
	Labels   map[string]string
	Procs    []listProc
}

type listProc struct {
	Key    string
	Labels map[string]string
	State  model.ProcState
	PID    int
	Hosted bool
}

func writeList(hosts []listHost) []byte {
	var w HostListWriter
	for _, h := range hosts {
		w.Host(&model.HostInfo{Host: h.Host, Labels: h.Labels, State: h.State, LastSeen: h.LastSeen, Version: h.Version, AgentID: h.AgentID})
		for _, p := range h.Procs {
			w.Proc(p.Key, p.Labels, p.State, p.PID, p.Hosted)
		}
	}
	return w.AppendTo(nil)
}

func readList(data []byte) ([]listHost, error) {
	var out []listHost
	n, err := ReadHostList(data, func(hl *HostList, h *ListHost) {
		lh := listHost{Host: h.Host, State: h.State, Version: h.Version, AgentID: h.AgentID, LastSeen: h.LastSeen}
		for _, id := range h.Labels {
			if lh.Labels == nil {
				lh.Labels = map[string]string{}
			}
			lh.Labels[hl.Labels[id].Key] = hl.Labels[id].Value
		}
		for _, p := range h.Procs {
			d := hl.Procs[p.Proc]
			lh.Procs = append(lh.Procs, listProc{Key: d.Key, Labels: d.Labels, State: p.State, PID: p.PID, Hosted: p.Hosted})
		}
		out = append(out, lh)
	})
	if err == nil && n != len(data) {
		return out, fmt.Errorf("read %d bytes of %d", n, len(data))
	}
	return out, err
}

func sampleList() []listHost {
	web := map[string]string{"app": "nginx", "tier": "frontend"}
	return []listHost{
		{Host: model.Host{IP: "10.0.0.7"}, State: model.AgentOnline, Version: "2.1.6", AgentID: "027f01101f5a436cb2ad4c04f54b67d9e2", LastSeen: 1795505560,
			Labels: map[string]string{"zone": "ap-shanghai-1", "os": "tlinux", "rack": "r001"},
			Procs: []listProc{
				{Key: "web:nginx", Labels: web, State: model.ProcRunning, PID: 1234, Hosted: true},
				{Key: "web:php-fpm", State: model.ProcStopped, PID: -1},
			}},
		// Another host with the same sets (held once in the tables), a
		// process of the same key with other labels.
		{Host: model.Host{IP: "10.0.0.11"}, State: model.AgentOnline, Version: "2.1.6",
			Labels: map[string]string{"zone": "ap-shanghai-1", "os": "tlinux"},
			Procs: []listProc{
				{Key: "web:nginx", Labels: maps.Clone(web), State: model.ProcRunning, PID: 99},
				{Key: "web:nginx-2", Labels: map[string]string{"app": "nginx", "tier": "canary"}, State: model.ProcUnknown, PID: -1},
			}},
		// No labels, no processes, an address outside IPv4, escapes and
		// text outside ASCII.
		{Host: model.Host{IP: "fd00::1", CloudID: 3}, State: model.AgentOffline},
		{Host: model.Host{IP: "10.1.0.1", CloudID: 2}, State: "odd \"state\"", Version: "v\u00e9rsion\n<&>",
			Labels: map[string]string{"note": "a\\b\"c\u2028d\x01", "\u4e2d": "\u6587"},
			Procs:  []listProc{{Key: "db:my\"sql", Labels: map[string]string{"k": "\t"}, State: "weird\u00ff", PID: 0}}},
	}
}

// TestHostListRoundTrip: what HostListWriter writes is JSON of the
// documented shape, and ReadHostList reads every host back as written;
// repeated label pairs and (process, labels) pairs are sent once.
func TestHostListRoundTrip(t *testing.T) {
	in := sampleList()
	data := writeList(in)
	if !json.Valid(data) {
		t.Fatalf("not JSON: %s", data)
	}
	var shape struct {
		Labels [][2]string `json:"labels"`
		Procs  []struct {
			Proc   string            `json:"proc"`
			Labels map[string]string `json:"labels"`
		} `json:"procs"`
		Hosts [][]json.RawMessage `json:"hosts"`
	}
	if err := json.Unmarshal(data, &shape); err != nil {
		t.Fatal(err)
	}
	// 3+2 host pairs, of which 2 repeat; web:nginx twice with one set.
	if len(shape.Labels) != 5 || len(shape.Procs) != 4 || len(shape.Hosts) != 4 {
		t.Fatalf("%d label pairs, %d procs, %d hosts; want 5, 4, 4:\n%s", len(shape.Labels), len(shape.Procs), len(shape.Hosts), data)
	}
	if got := string(shape.Hosts[0][0]) + " " + string(shape.Hosts[2][0]); got != `"0:10.0.0.7" "3:fd00::1"` {
		t.Fatalf("hosts as %s, want cloud:ip texts", got)
	}
	out, err := readList(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("read back:\n%+v\nwant:\n%+v", out, in)
	}
	// Indented (as a proxy might), the same.
	var ind []byte
	if ind, err = json.MarshalIndent(json.RawMessage(data), "", "  "); err != nil {
		t.Fatal(err)
	}
	if out, err = readList(ind); err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("indented: %v\n%+v", err, out)
	}
	// The hosts before the tables (not as the server writes them): the
	// same hosts.
	moved := `{"hosts":` + string(rawField(t, data, "hosts")) + `,"labels":` + string(rawField(t, data, "labels")) + `,"procs":` + string(rawField(t, data, "procs")) + `}`
	if out, err = readList([]byte(moved)); err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("hosts first: %v\n%+v", err, out)
	}
	// What follows the listing is not read: its length is returned.
	tail := append(append([]byte(" \n"), data...), `,"request_id":"x"}`...)
	if n, err := ReadHostList(tail, func(*HostList, *ListHost) {}); err != nil || n != len(data)+2 {
		t.Fatalf("a listing of %d bytes (2 blanks before) then more: read %d, %v", len(data), n, err)
	}
	// The same listing writes the same bytes, whatever the maps' order.
	if again := writeList(sampleList()); string(again) != string(data) {
		t.Fatalf("written twice, two texts:\n%s\n%s", data, again)
	}
	empty := writeList(nil)
	if string(empty) != `{"labels":[],"procs":[],"hosts":[]}` {
		t.Fatalf("no host: %s", empty)
	}
	if out, err := readList(empty); err != nil || len(out) != 0 {
		t.Fatalf("no host read: %v, %v", out, err)
	}
}

// TestReadHostListRefuses: a listing that is not the list form is an
// error naming where it is wrong, and no host after it is handed over.
func TestReadHostListRefuses(t *testing.T) {
	const tabs = `"labels":[["a","b"]],"procs":[{"proc":"web:x"}]`
	for _, c := range []struct{ data, want string }{
		{`[]`, "want an object"},
		{`{` + tabs + `}`, "want labels, procs and hosts"},
		{`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[1],[]]]}`, "hosts[0][5]: index 1 outside the table of 1"},
		{`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[0],[[1,"running",1,true]]]]}`, "hosts[0][6][0][0]"},
		{`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[0],[[-1,"running",1,true]]]]}`, "outside the table"},
		{`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[0],[[0,"running",1.5,true]]]]}`, "hosts[0][6][0]"},
		{`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[0],[[0,"running",-2,true]]]]}`, "pid -2"},
		{`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[0],[[0,"running",1]]]]}`, "3 fields, want 4"},
		{`{` + tabs + `,"hosts":[["10.0.0.1","online","","",0,[],[]]]}`, "hosts[0][0]: \"10.0.0.1\": want cloud:ip"},
		{`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[],[]],["0:10.0.0.999","online","","",0,[],[]]]}`, "hosts[1][0]"},
		{`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[],[],7]]}`, "more than 7 fields"},
		{`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[]]]}`, "6 fields, want 7"},
		{`{` + tabs + `,"hosts":[["0:10.0.0.1","on` + "\x01" + `line","","",0,[],[]]]}`, "hosts[0][1]: offset 75: control character"},
		{`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",01,[],[]]]}`, "hosts[0][4]: offset 87: want an integer"},
		{`{"labels":[["a"]],"procs":[],"hosts":[]}`, "labels"},
		{`{"labels":[],"procs":[{"labels":{}}],"hosts":[]}`, "procs[0].proc: empty"},
		{`{"labels":[],"procs":[],"hosts":[`, "unexpected end"},
		{`{"labels":[],"labels":[["a","b"]],"procs":[],"hosts":[]}`, "labels given twice"},
		{`{` + tabs + `,"hosts":[],"procs":[],"hosts":[]}`, "procs given twice"},
		{`{` + tabs + `,"hosts":[],"hosts":[["0:10.0.0.1","online","","",0,[0],[]]]}`, "hosts given twice"},
		{`{"hosts":[],"hosts":[["0:10.0.0.1","online","","",0,[0],[]]],` + tabs + `}`, "hosts given twice"},
		// The hosts before the tables: read after them.
		{`{"hosts":[["0:10.0.0.1","online","","",0,[1],[]]],` + tabs + `}`, "hosts[0][5]: index 1 outside the table of 1"},
	} {
		n := 0
		_, err := ReadHostList([]byte(c.data), func(*HostList, *ListHost) { n++ })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.data, err, c.want)
		}
		if strings.Contains(c.want, "hosts[1]") && n != 1 || !strings.Contains(c.want, "hosts[1]") && n != 0 {
			t.Errorf("%s: %d hosts handed over before the error", c.data, n)
		}
	}
}

// FuzzReadHostList: whatever the bytes, ReadHostList does not panic; what
// it reads is JSON, and every index a host holds is inside its table.
func FuzzReadHostList(f *testing.F) {
	f.Add(writeList(sampleList()))
	f.Add([]byte(`{"labels":[],"procs":[],"hosts":[]}`))
	f.Add([]byte(`{"labels":[["a","b"]],"procs":[{"proc":"a:b","labels":{"x":"y"}}],"hosts":[["0:10.0.0.1","online","v","id",1,[0],[[0,"running",1,true]]]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := ReadHostList(data, func(hl *HostList, h *ListHost) {
			for _, id := range h.Labels {
				if int(id) >= len(hl.Labels) {
					t.Fatalf("label index %d of %d", id, len(hl.Labels))
				}
			}
			for _, p := range h.Procs {
				if int(p.Proc) >= len(hl.Procs) {
					t.Fatalf("proc index %d of %d", p.Proc, len(hl.Procs))
				}
			}
			if _, err := h.Host.Canonical(); err != nil {
				t.Fatalf("host %v: %v", h.Host, err)
			}
		})
		if err == nil && (n <= 0 || n > len(data) || !json.Valid(data[:n])) {
			t.Fatalf("read a listing that is not JSON: %d bytes of %q", n, data)
		}
		// Read as it arrives, in pieces: the same.
		var whole, got readings
		if _, err := ReadHostList(data, record(&whole)); err != nil {
			whole.err = err.Error()
		}
		if _, err := ReadHostListFrom(chunked{bytes.NewReader(data), 5}, record(&got)); err != nil {
			got.err = err.Error()
		}
		if fmt.Sprint(got) != fmt.Sprint(whole) {
			t.Fatalf("%q read as it arrives:\n%q\nwhole:\n%q", data, got, whole)
		}
	})
}

// rawField is the value of key in the JSON object data.
func rawField(t *testing.T, data []byte, key string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m[key]
}

// TestHostListManyParts: a listing longer than several of the writer's
// parts (hostChunk) reads back whole, every host in order, and is one
// JSON value.
func TestHostListManyParts(t *testing.T) {
	base := sampleList()
	var in []listHost
	for i := 0; len(in) < 40000; i++ {
		for _, h := range base {
			h.Host.IP = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
			h.LastSeen += int64(i)
			in = append(in, h)
		}
	}
	data := writeList(in)
	if len(data) < 3*hostChunk {
		t.Fatalf("%d bytes: not several parts of %d", len(data), hostChunk)
	}
	if !json.Valid(data) {
		t.Fatal("not JSON")
	}
	out, err := readList(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("read back %d hosts, want %d (or a host differs)", len(out), len(in))
	}
}

// TestReadHostListDeepNesting: a value nested past maxNesting, wherever
// ReadHostList reads past it (a key it does not know, a table, the hosts
// before the tables), is an error naming it, on a small stack; one nested
// as deep as maxNesting is read past. The stack is bounded at 64 MiB
// here so that an unbounded recursion fails the test at 1<<20 levels
// (it would need ~5 MB of "[" at Go's 1 GB default) rather than take
// seconds and a gigabyte first.
func TestReadHostListDeepNesting(t *testing.T) {
	defer debug.SetMaxStack(debug.SetMaxStack(64 << 20))
	tooDeep, deepOK := deepListings()
	for _, data := range tooDeep {
		n := 0
		_, err := ReadHostList([]byte(data), func(*HostList, *ListHost) { n++ })
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("nested deeper than %d", maxNesting)) || n != 0 {
			t.Errorf("%.40s...: %d hosts, %v; want an error naming the nesting", data, n, err)
		}
	}
	n := 0
	if _, err := ReadHostList([]byte(deepOK), func(*HostList, *ListHost) { n++ }); err != nil || n != 1 {
		t.Fatalf("nested %d deep: %d hosts, %v; want the host", maxNesting, n, err)
	}
}

// deepListings are listings with a value nested past maxNesting where
// ReadHostList reads past it (a key it does not know, a table, the hosts
// before the tables), and one with a value nested as deep as maxNesting
// and one host.
func deepListings() (tooDeep []string, ok string) {
	const tabs = `"labels":[],"procs":[]`
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	return []string{
		`{"x":` + deep(1<<20) + `,` + tabs + `,"hosts":[]}`,
		`{"x":` + strings.Repeat(`{"a":`, 1<<20) + `}`,
		`{"labels":` + deep(1<<20) + `,"procs":[],"hosts":[]}`,
		`{"labels":[],"procs":[{"proc":"a:b","labels":` + strings.Repeat(`{"a":`, 1<<20) + `}]` + `,"hosts":[]}`,
		`{"hosts":` + deep(1<<20) + `,` + tabs + `}`,
		`{` + tabs + `,"hosts":[],"x":` + deep(maxNesting+1) + `}`,
	}, `{"x":` + deep(maxNesting) + `,` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[],[]]]}`
}

// TestHostListWritesNoPIDItRefuses: a pid no process has (an agent's
// status is untrusted: the server keeps what it reported) is written -1,
// so one agent cannot make every console refuse the host list; a
// listing that carries one is still refused.
func TestHostListWritesNoPIDItRefuses(t *testing.T) {
	in := []listHost{{Host: model.Host{IP: "10.0.0.1"}, State: model.AgentOnline, Procs: []listProc{
		{Key: "a:big", State: model.ProcRunning, PID: 1 << 40},
		{Key: "a:neg", State: model.ProcRunning, PID: -5},
		{Key: "a:max", State: model.ProcRunning, PID: math.MaxInt32},
		{Key: "a:over", State: model.ProcRunning, PID: math.MaxInt32 + 1},
		{Key: "a:none", State: model.ProcStopped, PID: -1},
	}}}
	out, err := readList(writeList(in))
	if err != nil || len(out) != 1 {
		t.Fatalf("read back: %d hosts, %v", len(out), err)
	}
	var got []int
	for _, p := range out[0].Procs {
		got = append(got, p.PID)
	}
	if want := []int{-1, -1, math.MaxInt32, -1, -1}; !slices.Equal(got, want) {
		t.Fatalf("pids %v, want %v", got, want)
	}
	const list = `{"labels":[],"procs":[{"proc":"a:b"}],"hosts":[["0:10.0.0.1","online","","",0,[],[[0,"running",2147483648,true]]]]}`
	if _, err := ReadHostList([]byte(list), func(*HostList, *ListHost) {}); err == nil || !strings.Contains(err.Error(), "pid 2147483648 out of range") {
		t.Fatalf("a pid past 32 bits read: %v", err)
	}
}

// TestHostListParts: the parts a server writes (Parts) are, end to end,
// the listing AppendTo appends, for no host, a few and several of the
// writer's parts (hostChunk); AppendTo keeps what b held.
func TestHostListParts(t *testing.T) {
	base := sampleList()
	var many []listHost
	for i := 0; len(many) < 40000; i++ {
		for _, h := range base {
			h.Host.IP = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
			many = append(many, h)
		}
	}
	for _, tt := range []struct {
		name  string
		hosts []listHost
	}{{"none", nil}, {"sample", base}, {"many parts", many}} {
		t.Run(tt.name, func(t *testing.T) {
			var w HostListWriter
			for _, h := range tt.hosts {
				w.Host(&model.HostInfo{Host: h.Host, Labels: h.Labels, State: h.State, LastSeen: h.LastSeen, Version: h.Version, AgentID: h.AgentID})
				for _, p := range h.Procs {
					w.Proc(p.Key, p.Labels, p.State, p.PID, p.Hosted)
				}
			}
			parts := w.Parts()
			whole := w.AppendTo([]byte("kept"))
			if !bytes.HasPrefix(whole, []byte("kept")) {
				t.Fatalf("AppendTo lost b: %.20q", whole)
			}
			if got := bytes.Join(parts, nil); !bytes.Equal(got, whole[len("kept"):]) {
				t.Fatalf("parts joined: %d bytes, AppendTo %d (or bytes differ)", len(got), len(whole)-len("kept"))
			}
			out, err := readList(whole[len("kept"):])
			if err != nil || len(out) != len(tt.hosts) {
				t.Fatalf("read back %d hosts of %d: %v", len(out), len(tt.hosts), err)
			}
		})
	}
}

// TestHostListLabelsOfHostsInTurn: hosts in turn sharing some of their
// label pairs, at the same place in key order or not (the writer reuses
// the host before's indexes), read back with their own labels, each
// distinct pair once in the table.
func TestHostListLabelsOfHostsInTurn(t *testing.T) {
	sets := []map[string]string{
		{"a": "1", "b": "2"},
		{"a": "1", "b": "3"},
		{"b": "2"},
		{"a": "1", "b": "2", "c": "4"},
		nil,
		{"a": "1", "b": "2"},
		{"a": "2", "b": "1"},
		{"b": "2", "c": "4"},
	}
	var in []listHost
	for i, l := range sets {
		in = append(in, listHost{Host: model.Host{IP: fmt.Sprintf("10.0.0.%d", i+1)}, State: model.AgentOnline, Labels: l})
	}
	data := writeList(in)
	out, err := readList(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("read back %+v\nwant %+v", out, in)
	}
	var tabs struct{ Labels [][2]string }
	if err := json.Unmarshal(data, &tabs); err != nil {
		t.Fatal(err)
	}
	if want := [][2]string{{"a", "1"}, {"b", "2"}, {"b", "3"}, {"c", "4"}, {"a", "2"}, {"b", "1"}}; !reflect.DeepEqual(tabs.Labels, want) {
		t.Fatalf("labels table %v, want %v", tabs.Labels, want)
	}
}

// TestHostListLabelSets: a listing whose hosts' labels are given as sets
// (HostLabels: one set shared by several hosts, a set repeated by the
// next host, an empty one, a host given a map between two of the same
// set) is byte for byte the listing Host writes from maps of the same
// labels, and reads back as them.
func TestHostListLabelSets(t *testing.T) {
	maps := []map[string]string{
		{"b": "2", "a": "1"},
		{"a": "1", "b": "3"},
		{"a": "1", "b": "2"}, // the first set again, as another set
		nil,
		{"b": "2"},
		{"zone": "z", "os": "tlinux", "rack": "r1"},
	}
	sets := make([]model.LabelSet, len(maps))
	for i, m := range maps {
		sets[i] = model.MakeLabelSet(m)
	}
	// Host k's labels: sets[order[k]]; byMap says whether it is given
	// as a map (Host) in the listing under test.
	order := []int{0, 0, 1, 0, 2, 2, 3, 4, 0, 5, 1, 5, 1}
	byMap := map[int]bool{5: true, 10: true}
	var want, got HostListWriter
	var in []listHost
	for k, i := range order {
		hi := model.HostInfo{Host: model.Host{IP: fmt.Sprintf("10.0.0.%d", k+1)}, State: model.AgentOnline, Version: "2.1.6", AgentID: fmt.Sprintf("id%d", k), LastSeen: int64(k)}
		in = append(in, listHost{Host: hi.Host, State: hi.State, Version: hi.Version, AgentID: hi.AgentID, LastSeen: hi.LastSeen, Labels: maps[i],
			Procs: []listProc{{Key: "web:nginx", State: model.ProcRunning, PID: k}}})
		withMap := hi
		withMap.Labels = maps[i]
		want.Host(&withMap)
		if byMap[k] {
			got.Host(&withMap)
		} else {
			got.HostLabels(&hi, sets[i])
		}
		want.Proc("web:nginx", nil, model.ProcRunning, k, false)
		got.Proc("web:nginx", nil, model.ProcRunning, k, false)
	}
	data := got.AppendTo(nil)
	if w := want.AppendTo(nil); !bytes.Equal(data, w) {
		t.Fatalf("with sets:\n%s\nwith maps:\n%s", data, w)
	}
	out, err := readList(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if !reflect.DeepEqual(out[i].Labels, in[i].Labels) {
			t.Fatalf("host %d: labels %v, want %v", i, out[i].Labels, in[i].Labels)
		}
	}
}

// TestHostListStream: a listing streamed (tables made first by AddProc
// and AddLabels, then Stream, the hosts, Finish) is written in several
// writes, each host whole in one, and reads back as the same hosts
// written whole; a host naming a label pair or a process its tables lack
// stops it (Finish's error, the listing cut); so does a failed write.
func TestHostListStream(t *testing.T) {
	var in []listHost
	sets := []model.LabelSet{model.MakeLabelSet(map[string]string{"a": "1", "b": "2"}), nil, model.MakeLabelSet(map[string]string{"a": "2"})}
	procs := []listProc{{Key: "web:nginx", Labels: map[string]string{"app": "nginx"}}, {Key: "db:mysql"}}
	for i := range 5000 {
		p := procs[i%2]
		p.State, p.PID = model.ProcRunning, i
		in = append(in, listHost{Host: model.Host{IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)}, State: model.AgentOnline, Version: "2.1.6",
			AgentID: fmt.Sprintf("agent-%05d", i), LastSeen: int64(i), Labels: sets[i%3].Map(), Procs: []listProc{p}})
	}
	stream := func(w *HostListWriter, extra func(w *HostListWriter), fail error) ([][]byte, error) {
		for _, p := range procs {
			w.AddProc(p.Key, p.Labels)
		}
		for i := range in {
			w.AddLabels(sets[i%3])
		}
		var writes [][]byte
		err := w.Stream(func(b []byte) error {
			if fail != nil && len(writes) == 3 {
				return fail
			}
			writes = append(writes, slices.Clone(b))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, h := range in {
			w.HostLabels(&model.HostInfo{Host: h.Host, State: h.State, Version: h.Version, AgentID: h.AgentID, LastSeen: h.LastSeen}, sets[i%3])
			for _, p := range h.Procs {
				w.Proc(p.Key, p.Labels, p.State, p.PID, p.Hosted)
			}
			if i == len(in)/2 && extra != nil {
				extra(w)
			}
		}
		return writes, w.Finish()
	}
	var w HostListWriter
	writes, err := stream(&w, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(writes) < 4 {
		t.Fatalf("%d writes: want the head, hosts a chunk at a time, the end", len(writes))
	}
	for i, b := range writes[1 : len(writes)-1] {
		// Each write after the head is hosts, each whole: "[" or ",[" ... "]]".
		if !(bytes.HasPrefix(b, []byte(`["`)) || bytes.HasPrefix(b, []byte(`,["`))) || !bytes.HasSuffix(b, []byte("]]")) {
			t.Fatalf("write %d: %.40q ... %q: not whole hosts", i+1, b, b[max(0, len(b)-10):])
		}
	}
	out, err := readList(bytes.Join(writes, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("read back %d hosts, first %+v; want %d, first %+v", len(out), out[0], len(in), in[0])
	}
	for name, extra := range map[string]func(w *HostListWriter){
		"label": func(w *HostListWriter) {
			w.HostLabels(&model.HostInfo{Host: model.Host{IP: "10.9.9.9"}}, model.MakeLabelSet(map[string]string{"new": "pair"}))
		},
		"process": func(w *HostListWriter) {
			w.Host(&model.HostInfo{Host: model.Host{IP: "10.9.9.9"}})
			w.Proc("web:new", nil, model.ProcRunning, 1, false)
		},
	} {
		var w HostListWriter
		writes, err := stream(&w, extra, nil)
		if err == nil || !strings.Contains(err.Error(), "not in the tables") {
			t.Fatalf("%s: a host naming what the tables lack: %v", name, err)
		}
		if json.Valid(bytes.Join(writes, nil)) {
			t.Fatalf("%s: the listing cut reads whole", name)
		}
	}
	failed := fmt.Errorf("gone")
	var wf HostListWriter
	writes, err = stream(&wf, nil, failed)
	if err != failed || len(writes) != 3 {
		t.Fatalf("a failed write: %v after %d writes; want it after 3", err, len(writes))
	}
}

// TestHostFastAsHostAny: whatever a host's bytes (the server's, then
// each changed at random: a byte replaced, a byte taken out, the text cut
// short), the fast reader (hostFast) reads it as the reader of any
// listing (hostAny) does, or leaves it to it: never another host, never
// a host hostAny refuses.
func TestHostFastAsHostAny(t *testing.T) {
	in := sampleList()
	in = append(in, listHost{Host: model.Host{IP: "255.255.255.255", CloudID: model.MaxCloudID}, State: model.AgentOnline},
		listHost{Host: model.Host{IP: "0.0.0.0"}, State: model.AgentOnline, LastSeen: math.MaxInt64})
	in = append(in, listHost{Host: model.Host{IP: "10.0.0.9", CloudID: 12}, State: model.AgentOnline, Version: "2.1.6", AgentID: "x", LastSeen: -5,
		Labels: map[string]string{"a": "b"}, Procs: []listProc{{Key: "web:nginx", State: model.ProcRunning, PID: math.MaxInt32, Hosted: true}}})
	data := writeList(in)
	var hl HostList
	var hosts [][]byte // each host's bytes
	{
		var p listParts
		l := lexer{b: data}
		if err := l.object(func(key string) error {
			start := l.i
			if err := l.skip(); err != nil {
				return err
			}
			raw := data[start:l.i]
			if key == "hosts" {
				hl2 := lexer{b: raw}
				return hl2.array(func() error {
					hl2.ws()
					s := hl2.i
					err := hl2.skip()
					hosts = append(hosts, raw[s:hl2.i])
					return err
				})
			}
			return p.take(&hl, key, raw, 0)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(hosts) != len(in) {
		t.Fatalf("%d hosts split, want %d", len(hosts), len(in))
	}
	alphabet := []byte(`[]{},:."\ -0123456789truefalsx` + "\x01\xc3")
	rnd := uint64(1)
	next := func(n int) int { rnd = rnd*6364136223846793005 + 1442695040888963407; return int(rnd>>33) % n }
	fast, checked := 0, 0
	for k := range 40000 {
		h := slices.Clone(hosts[k%len(hosts)])
		switch k % 4 {
		case 0: // as written
		case 1:
			h[next(len(h))] = alphabet[next(len(alphabet))]
		case 2:
			i := next(len(h))
			h = append(h[:i], h[i+1:]...)
		case 3:
			h = h[:next(len(h))]
		}
		h = append(h, ",..."...) // what follows a host in a listing
		a := hostReader{hl: &hl, l: lexer{b: h}}
		b := hostReader{hl: &hl, l: lexer{b: h}}
		if !a.hostFast() {
			if plain := !bytes.ContainsAny(h, "\\\x01\x80\xc3\xbf"); k%4 == 0 && plain {
				t.Fatalf("host %d as written: left to hostAny: %s", k%len(hosts), h)
			}
			continue
		}
		fast++
		if err := b.hostAny(); err != nil {
			t.Fatalf("%q: hostFast read %+v, hostAny refuses it: %v", h, a.h, err)
		}
		if a.l.i != b.l.i || !reflect.DeepEqual(a.h, b.h) {
			t.Fatalf("%q: hostFast read %+v (to %d), hostAny %+v (to %d)", h, a.h, a.l.i, b.h, b.l.i)
		}
		checked++
	}
	if fast < 10000 || checked != fast {
		t.Fatalf("%d of 40,000 read by hostFast, %d checked", fast, checked)
	}
}

// TestHostListLabelRuns: with the sets of the hosts to come given first
// (AddLabels), hosts that come in that order, skip some, repeat one or
// come out of it write the listing Host writes from maps after the same
// AddLabels. (A table of the runs of sets AddLabels was given, found again
// by HostLabels in turn, was tried: no less CPU, 24 MB more allocated a
// 100,000-host listing.)
func TestHostListLabelRuns(t *testing.T) {
	mk := func(kv ...string) model.LabelSet {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return model.MakeLabelSet(m)
	}
	a, b, c, d := mk("x", "1", "y", "2"), mk("x", "2"), mk("y", "2", "z", "3"), mk("w", "0")
	given := []model.LabelSet{a, a, b, nil, a, c, c, b}
	for _, hosts := range [][]model.LabelSet{
		given,
		{b, c},       // some skipped
		{a, b, b, a}, // repeated
		{c, a, b, a}, // out of order: after c, a and b are found no more
		{a, d, b},    // a set not given (its pairs are new)
		{nil, c, nil, c},
	} {
		var runs, maps HostListWriter
		for _, l := range given {
			runs.AddLabels(l)
			maps.AddLabels(l)
		}
		for i, l := range hosts {
			hi := model.HostInfo{Host: model.Host{IP: fmt.Sprintf("10.0.0.%d", i+1)}, State: model.AgentOnline}
			runs.HostLabels(&hi, l)
			hi.Labels = l.Map()
			maps.Host(&hi)
		}
		if got, want := runs.AppendTo(nil), maps.AppendTo(nil); !bytes.Equal(got, want) {
			t.Fatalf("hosts %v:\n%s\nwant\n%s", hosts, got, want)
		}
	}
}

// TestHostTextV4: hostTextV4 reads "cloud:ip" as ParseHostText does, or
// leaves it to it.
func TestHostTextV4(t *testing.T) {
	for _, s := range []string{"0:10.0.0.1", "0:0.0.0.0", "2147483647:255.255.255.255", "2147483648:1.1.1.1", "4294967296:1.1.1.1",
		"01:1.2.3.4", "00:1.2.3.4", "+1:1.2.3.4", "-1:1.2.3.4", ":1.2.3.4", "1:", "1:1.2.3", "1:1.2.3.4.5", "1:1.2.3.04", "1:1.2.3.00",
		"1:1.2.3.256", "1:1.2.3.255", "1:1..3.4", "1:.1.2.3", "1:1.2.3.", "1:::1", "1:::ffff:1.2.3.4", "1:fd00::1", "1:1.2.3.4%eth0",
		"12345678901:1.1.1.1", "1:100.200.10.0", "1: 1.2.3.4", "1:1.2.3.4 "} {
		want, werr := ParseHostText(s)
		got, ok := hostTextV4([]byte(s))
		if ok && (werr != nil || got != want) {
			t.Errorf("%q: hostTextV4 %+v, ParseHostText %+v %v", s, got, want, werr)
		}
		if _, ip, _ := strings.Cut(s, ":"); !ok && werr == nil && !strings.Contains(ip, ":") {
			t.Errorf("%q: an IPv4 host ParseHostText reads (%+v) left to it", s, want)
		}
	}
}
