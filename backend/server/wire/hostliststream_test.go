package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"testing"
	"testing/iotest"
)

// readings are the hosts a read handed over, each as text, and its error.
type readings struct {
	hosts []string
	err   string
}

func record(out *readings) func(*HostList, *ListHost) {
	return func(hl *HostList, h *ListHost) {
		s := fmt.Sprintf("%v %q %q %q %d", h.Host, h.State, h.Version, h.AgentID, h.LastSeen)
		for _, id := range h.Labels {
			s += fmt.Sprintf(" %q=%q", hl.Labels[id].Key, hl.Labels[id].Value)
		}
		for _, p := range h.Procs {
			d := hl.Procs[p.Proc]
			s += fmt.Sprintf(" [%q %v %q %d %v]", d.Key, d.Labels, p.State, p.PID, p.Hosted)
		}
		out.hosts = append(out.hosts, s)
	}
}

// chunked reads n bytes at a time.
type chunked struct {
	r io.Reader
	n int
}

func (c chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// sameAsWhole checks that ReadHostListFrom reads data followed by an
// envelope's end as ReadHostList reads them whole, however the bytes
// arrive: the same hosts, the same error, and what follows the listing
// left to read.
func sameAsWhole(t *testing.T, data []byte, readers bool) {
	t.Helper()
	const after = `,"request_id":"r"}`
	in := append(bytes.Clone(data), after...)
	var whole readings
	n, err := ReadHostList(in, record(&whole))
	if err != nil {
		whole.err = err.Error()
	}
	make := map[string]func() io.Reader{"whole": func() io.Reader { return bytes.NewReader(in) }}
	if readers {
		make["one byte"] = func() io.Reader { return iotest.OneByteReader(bytes.NewReader(in)) }
		make["halves"] = func() io.Reader { return iotest.HalfReader(bytes.NewReader(in)) }
		make["7 bytes"] = func() io.Reader { return chunked{bytes.NewReader(in), 7} }
		make["EOF with data"] = func() io.Reader { return iotest.DataErrReader(bytes.NewReader(in)) }
	}
	for name, mk := range make {
		var got readings
		r := mk()
		rest, err := ReadHostListFrom(r, record(&got))
		if err != nil {
			got.err = err.Error()
		}
		if fmt.Sprint(got) != fmt.Sprint(whole) {
			t.Fatalf("%s: %.80q read as it arrives:\n%q\nwhole:\n%q", name, data, got, whole)
		}
		if err != nil {
			continue
		}
		tail, _ := io.ReadAll(r)
		if left := string(rest) + string(tail); left != string(in[n:]) {
			t.Fatalf("%s: %.80q: left %q after the listing, want %q", name, data, left, in[n:])
		}
	}
}

// TestReadHostListFrom: a listing read as it arrives is read as
// ReadHostList reads it whole (every refusal too, with its offset), in
// whatever pieces its bytes come.
func TestReadHostListFrom(t *testing.T) {
	sameAsWhole(t, writeList(sampleList()), true)
	sameAsWhole(t, []byte(` { "labels" : [ ] , "procs" : [ ] , "hosts" : [ ] } `), true)
	sameAsWhole(t, []byte(`{"labels":[],"procs":[],"hosts":[]}`), true)
	const tabs = `"labels":[["a","b"]],"procs":[{"proc":"web:x"}]`
	for _, data := range []string{
		`[]`, ``, ` `, `{`, `{}`, `{"labels"`, `{"labels":`,
		`{` + tabs + `}`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[1],[]]]}`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[0],[[1,"running",1,true]]]]}`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[0],[[0,"running",1.5,true]]]]}`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[0],[[0,"running",-2,true]]]]}`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[0],[[0,"running",1]]]]}`,
		`{` + tabs + `,"hosts":[["10.0.0.1","online","","",0,[],[]]]}`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[],[]],["0:10.0.0.999","online","","",0,[],[]]]}`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[],[]] ["0:10.0.0.2","online","","",0,[],[]]]}`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[],[]],`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[],[],7]]}`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","on` + "\x01" + `line","","",0,[],[]]]}`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",01,[],[]]]}`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",-0,[],[]]]}`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",9223372036854775807,[],[]]]}`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",-9223372036854775808,[],[]]]}`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",9223372036854775808,[],[]]]}`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",1-2,[],[]]]}`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[0],[[0,"running",1,tru]]]]}`,
		`{` + tabs + `,"hosts":[["0:010.0.0.1","online","","",0,[],[]]]}`,
		`{` + tabs + `,"hosts":[["0:10.0.0.1","on\u006cine","v\u00e9","\ud800",0,[],[]]]}`,
		`{` + tabs + `,"hosts":{}}`,
		`{` + tabs + `,"hosts":[]`,
		`{` + tabs + `,"hosts":[] "x":1}`,
		`{"labels":[["a"]],"procs":[],"hosts":[]}`,
		`{"labels":[],"procs":[{"labels":{}}],"hosts":[]}`,
		`{"labels":[],"procs":[],"hosts":[`,
		`{"labels":[],"labels":[["a","b"]],"procs":[],"hosts":[]}`,
		`{` + tabs + `,"hosts":[],"procs":[],"hosts":[]}`,
		`{` + tabs + `,"hosts":[],"hosts":[["0:10.0.0.1","online","","",0,[0],[]]]}`,
		`{"hosts":[],"hosts":[["0:10.0.0.1","online","","",0,[0],[]]],` + tabs + `}`,
		`{"hosts":[["0:10.0.0.1","online","","",0,[1],[]]],` + tabs + `}`,
		`{"hosts":[["0:10.0.0.1","online","","",0,[0],[]]],` + tabs + `}`,
		`{"x":{"y":[1,2.5e3,"z",null,true]},` + tabs + `,"hosts":[["0:10.0.0.1","online","","",0,[0],[]]]}`,
		`{"x":nul,` + tabs + `,"hosts":[]}`,
		`{"x":123456789,` + tabs + `,"hosts":[]}`, // a number the window cuts
		`{"x":123456789`,
		`{"x" 1}`, `{1:2}`,
	} {
		sameAsWhole(t, []byte(data), true)
	}
	// A listing of many windows (streamChunk), hosts cut at their edges.
	base := sampleList()
	var in []listHost
	for i := 0; len(in) < 4000; i++ {
		for _, h := range base {
			h.Host.IP = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
			in = append(in, h)
		}
	}
	data := writeList(in)
	if len(data) < 4*streamChunk {
		t.Fatalf("%d bytes: not several windows", len(data))
	}
	sameAsWhole(t, data, true)
}

// TestReadHostListFromDeepNesting: TestReadHostListDeepNesting's listings (deepListings)
// read as they arrive: the same errors, on a small stack.
func TestReadHostListFromDeepNesting(t *testing.T) {
	defer debug.SetMaxStack(debug.SetMaxStack(64 << 20))
	tooDeep, deepOK := deepListings()
	// And a host nested deep, which only the host's reader reads.
	deepHost := `{"labels":[],"procs":[],"hosts":[` + strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20) + `]}`
	for _, data := range append(tooDeep, deepOK, deepHost) {
		sameAsWhole(t, []byte(data), false)
	}
}

// TestReadHostListFromReadError: a reply cut by a failing read is that
// error, after the hosts read before it.
func TestReadHostListFromReadError(t *testing.T) {
	data := writeList(sampleList())
	boom := errors.New("connection reset")
	r := io.MultiReader(bytes.NewReader(data[:len(data)-10]), iotest.ErrReader(boom))
	var got readings
	_, err := ReadHostListFrom(r, record(&got))
	if !errors.Is(err, boom) || len(got.hosts) == len(sampleList()) {
		t.Fatalf("%d hosts, %v; want the read's error", len(got.hosts), err)
	}
}
