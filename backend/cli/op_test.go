package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/server/wire"
	"gseproc/model"
)

// fleetConfig writes a config for a small, quick simulated fleet. extra is
// TOML: its leading key = value lines override [simulator] keys, and any
// sections after them are appended.
func fleetConfig(t *testing.T, extra string) string {
	t.Helper()
	sim := []string{"hosts = 40", "seed = 11", `latency_median = "1ms"`, `latency_p99 = "3ms"`,
		"failure_rate = 0", "offline_rate = 0", "unreachable_rate = 0", "crash_rate = 0"}
	var rest []string
	for _, l := range strings.Split(extra, "\n") {
		if len(rest) > 0 || strings.HasPrefix(l, "[") {
			rest = append(rest, l)
			continue
		}
		k, _, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		for i, d := range sim {
			if dk, _, _ := strings.Cut(d, "="); strings.TrimSpace(dk) == strings.TrimSpace(k) {
				sim[i] = l
			}
		}
	}
	body := "[simulator]\n" + strings.Join(sim, "\n") + "\n" + strings.Join(rest, "\n")
	p := filepath.Join(t.TempDir(), "gseproc.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	// syncBuf: a NATS client's asynchronous callbacks (error handlers) may
	// still log while Main returns and writes its own last line.
	var out, errb syncBuf
	code = Main(context.Background(), args, Stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

func jsonResults(t *testing.T, stdout string) []opLine {
	t.Helper()
	var out []opLine
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if l == "" {
			continue
		}
		var r opLine
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		out = append(out, r)
	}
	return out
}

func TestOpHelpNamesEveryFlag(t *testing.T) {
	code, stdout, _ := run(t, "op", "--help") // help is on stdout (TestHelpGoesToStdout)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"-ns", "-name", "-label", "-host", "-json", "-quiet", "-timeout", "-server", "-config", "-hosts", "-seed", "restart", "op_type", "Exit status"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("op --help does not mention %q", want)
		}
	}
	for _, cmd := range []string{"hosts", "procs"} {
		code, stdout, _ := run(t, cmd, "--help")
		if code != 0 || !strings.Contains(stdout, "-json") || !strings.Contains(stdout, "-ns") || !strings.Contains(stdout, "-label") {
			t.Errorf("%s --help: exit %d\n%s", cmd, code, stdout)
		}
	}
}

func TestOpStartStopStatus(t *testing.T) {
	cfg := fleetConfig(t, "")
	// Text output: a header, one line per host, a summary.
	code, stdout, stderr := run(t, "op", "start", "--ns", "web", "--name", "nginx", "--config", cfg)
	if code != 0 {
		t.Fatalf("start: exit %d\n%s%s", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "HOST") || !strings.Contains(lines[len(lines)-1], "start done") {
		t.Fatalf("start output:\n%s", stdout)
	}
	for _, l := range lines[1 : len(lines)-1] {
		if !strings.Contains(l, "web:nginx") || !strings.Contains(l, "success") {
			t.Fatalf("result line %q", l)
		}
	}

	// Each run is a fresh simulated fleet, so drive one process through
	// its codes within one run per step and check each answer.
	steps := []struct {
		args  []string
		codes map[int]bool
	}{
		{[]string{"op", "0", "--ns", "web", "--name", "nginx", "--json"}, map[int]bool{0: true, 828: true}},
		{[]string{"op", "stop", "--ns", "web", "--name", "nginx", "--json"}, map[int]bool{0: true, 829: true}},
		{[]string{"op", "status", "--label", "app=nginx", "--json"}, map[int]bool{0: true}},
	}
	for _, s := range steps {
		code, stdout, stderr := run(t, append(s.args, "--config", cfg)...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", s.args, code, stderr)
		}
		rs := jsonResults(t, stdout)
		if len(rs) == 0 {
			t.Fatalf("%v: no results", s.args)
		}
		for i, r := range rs {
			if !s.codes[r.Code] || r.State != model.StateSuccess || r.AgentID != r.Host.AgentID() || r.Seq != int64(i+1) {
				t.Fatalf("%v: result %+v", s.args, r)
			}
		}
		if !strings.Contains(stderr, "done") {
			t.Fatalf("%v: summary missing from stderr: %q", s.args, stderr)
		}
	}
}

func TestOpHostFlagLimitsTargets(t *testing.T) {
	cfg := fleetConfig(t, "")
	_, stdout, _ := run(t, "hosts", "--ns", "web", "--name", "nginx", "--json", "--config", cfg)
	var hv []backend.HostView
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var h backend.HostView
		if err := json.Unmarshal([]byte(l), &h); err != nil {
			t.Fatalf("hosts --json line %q: %v", l, err)
		}
		hv = append(hv, h)
	}
	if len(hv) < 2 {
		t.Fatalf("%d hosts carry web:nginx", len(hv))
	}
	a, b := hv[0].Host.AgentID(), hv[1].Host.AgentID()
	code, stdout, stderr := run(t, "op", "status", "--ns", "web", "--name", "nginx", "--host", a, "--host", b, "--json", "--config", cfg)
	rs := jsonResults(t, stdout)
	if code != 0 || len(rs) != 2 {
		t.Fatalf("exit %d, %d results\n%s", code, len(rs), stderr)
	}
}

func TestOpFailures(t *testing.T) {
	tests := []struct {
		name     string
		extra    string
		args     []string
		wantCode int
		wantErr  []string
	}{
		{"no match", "", []string{"op", "status", "--ns", "nope"}, 2, []string{"selector", "matches no", `namespace "nope"`}},
		{"missing op", "", []string{"op", "--ns", "web"}, 2, []string{"missing OP"}},
		{"unknown op", "", []string{"op", "bounce", "--ns", "web"}, 2, []string{`unknown op "bounce"`, "--help"}},
		{"bad op number", "", []string{"op", "5", "--ns", "web"}, 2, []string{"op_type 5"}},
		{"no selector", "", []string{"op", "start"}, 2, []string{"give --ns"}},
		{"bad label and host", "", []string{"op", "start", "--label", "novalue", "--host", "x:1.2.3.4"}, 2, []string{"--label \"novalue\"", "--host"}},
		{"unknown flag", "", []string{"op", "start", "--bogus"}, 2, []string{"bogus"}},
		{"read-only", "[engine]\nread_only = true\n", []string{"op", "start", "--ns", "web"}, 2, []string{"read-only"}},
		{"unreachable hosts", "unreachable_rate = 0.5\n", []string{"op", "status", "--ns", "web"}, 1, []string{"not OK"}},
		{"offline hosts, capped wait", "offline_rate = 0.5\n", []string{"op", "status", "--ns", "web", "--timeout", "300ms"}, 1, []string{"gave up after --timeout 300ms"}},
		{"bad config", "[engine]\nconcurrency = 0\n", []string{"op", "status", "--ns", "web"}, 2, []string{"engine.concurrency"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, append(tc.args, "--config", fleetConfig(t, tc.extra))...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, stdout, stderr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
		})
	}
}

func TestOpUnreachableJSON(t *testing.T) {
	cfg := fleetConfig(t, "unreachable_rate = 0.5\n")
	code, stdout, _ := run(t, "op", "stop", "--ns", "web", "--json", "--config", cfg)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	bad := 0
	for _, r := range jsonResults(t, stdout) {
		if r.State == model.StateUnreachable {
			bad++
			if r.Code != model.CodeAgentAbnormal {
				t.Fatalf("unreachable with code %d", r.Code)
			}
		}
	}
	if bad == 0 {
		t.Fatal("no unreachable result with half the fleet unreachable")
	}
}

func TestHostsAndProcs(t *testing.T) {
	cfg := fleetConfig(t, "")
	code, stdout, stderr := run(t, "hosts", "--config", cfg)
	if code != 0 || !strings.HasPrefix(stdout, "AGENT") || !strings.Contains(stderr, "online") {
		t.Fatalf("hosts: exit %d\n%s%s", code, stdout, stderr)
	}
	// Every simulated agent shows its agent id, as real agents do.
	if !strings.Contains(stdout, "AGENT_ID") || !regexp.MustCompile(`(?m)^\S+\s+\d+\s+\S+\s+02[0-9a-f]{32}\s`).MatchString(stdout) {
		t.Fatalf("hosts does not show agent ids:\n%s", stdout)
	}
	if n := len(strings.Split(strings.TrimSpace(stdout), "\n")) - 1; n < 40 {
		t.Fatalf("hosts lists %d rows for a 40-host fleet", n)
	}
	code, stdout, _ = run(t, "hosts", "--limit", "3", "--json", "--config", cfg)
	if code != 0 || len(strings.Split(strings.TrimSpace(stdout), "\n")) != 3 {
		t.Fatalf("hosts --limit 3: exit %d\n%s", code, stdout)
	}

	code, stdout, _ = run(t, "procs", "--ns", "web", "--config", cfg)
	if code != 0 || !strings.HasPrefix(stdout, "KEY") || !strings.Contains(stdout, "web:nginx") || strings.Contains(stdout, "db:") {
		t.Fatalf("procs --ns web: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = run(t, "procs", "--label", "app=nginx", "--json", "--config", cfg)
	if code != 0 {
		t.Fatalf("procs --json: exit %d", code)
	}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var d model.ProcessDef
		if err := json.Unmarshal([]byte(l), &d); err != nil || d.Process.Meta.Labels["app"] != "nginx" || len(d.Hosts) == 0 {
			t.Fatalf("procs --json line %q: %v", l, err)
		}
	}
	if code, _, stderr := run(t, "procs", "extra", "--config", cfg); code != 2 || !strings.Contains(stderr, "unexpected argument") {
		t.Fatalf("procs extra: exit %d %s", code, stderr)
	}
}

// gseproc op status shows each process's state, pid, uptime, cpu and
// memory, processes not up first (it said "success 0" for every host).
func TestOpStatusShowsProcesses(t *testing.T) {
	cfg := fleetConfig(t, "")
	code, stdout, stderr := run(t, "op", "status", "--ns", "web", "--config", cfg)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) < 4 || !strings.Contains(lines[0], "PID") || !strings.Contains(lines[0], "UPTIME") ||
		!strings.Contains(lines[0], "CPU") || !strings.Contains(lines[0], "MEM") {
		t.Fatalf("status output:\n%s", stdout)
	}
	seenUp := false
	running, stopped := 0, 0
	cpuEnd := strings.Index(lines[0], "CPU") + len("CPU") // the column is right-aligned
	for _, l := range lines[1 : len(lines)-1] {
		f := strings.Fields(l)
		if len(f) < 7 {
			t.Fatalf("line %q", l)
		}
		if len(l) < cpuEnd || l[cpuEnd-1] != '%' {
			t.Fatalf("the CPU column is not under its header:\n%s\n%s", lines[0], l)
		}
		switch state := model.ProcState(f[2]); {
		case state.Up():
			seenUp = true
			running++
			if f[3] == "-" || !strings.HasSuffix(f[5], "%") {
				t.Fatalf("running process without pid or cpu: %q", l)
			}
		case seenUp:
			t.Fatalf("%q (not up) after a running process", l)
		default:
			stopped++
		}
	}
	if running == 0 || stopped == 0 {
		t.Fatalf("%d running, %d not up: the fleet should have both\n%s", running, stopped, stdout)
	}
	// --json carries the same status object.
	_, stdout, _ = run(t, "op", "status", "--ns", "web", "--json", "--config", cfg)
	for _, r := range jsonResults(t, stdout) {
		if r.Status == nil || r.Status.State == "" {
			t.Fatalf("JSON result without status: %+v", r)
		}
	}
}

// appendOpLine appends l encoded as json.Marshal encodes it: the result
// by model.AppendResultJSON (without its agent_id, which opLine's own
// agent_id hides), then opLine's own fields by model.AppendJSONString. It
// is the tests' reference of an opLine's encoding, checked against
// json.Marshal (TestOpLineJSON, FuzzOpLineJSON); the printer writes a line
// by appendResultLineText.
func appendOpLine(b []byte, l opLine) ([]byte, error) {
	return appendOpLineWith(b, l, l.Content)
}

// appendOpLineWith is appendOpLine with the content given apart from l
// (l.Content unused).
func appendOpLineWith[S string | []byte](b []byte, l opLine, content S) ([]byte, error) {
	r := l.Result
	r.AgentID = ""
	b, err := model.AppendResultJSON(b, &r)
	if err != nil {
		return b, err
	}
	// The result's object without its '}', then opLine's fields.
	b = b[:len(b)-1]
	if len(content) > 0 {
		b = model.AppendJSONString(append(b, `,"content":`...), content)
	}
	return appendOpLineEnd(b, l.AgentID, l.OpName, l.DurationMS), nil
}

// A --json line is what json.Marshal writes of an opLine.
func TestOpLineJSON(t *testing.T) {
	start := time.Date(2026, 11, 24, 1, 2, 3, 456789000, time.UTC)
	st := &model.ProcStatus{ProcKey: "gse:beat", ProcName: "beat", State: model.ProcRunning, PID: 42, CPU: 1.5, Mem: 0.25}
	for _, r := range []model.Result{
		{},
		{TaskID: "T", Seq: 3, Host: model.Host{IP: "10.0.0.1"}, ProcKey: "gse:beat", AgentID: "0:10.0.0.1", Op: model.OpStatus,
			State: model.StateSuccess, Message: "ok <&>", Proc: model.ResultProc{ProcName: "beat"}, Status: st, Started: start, Finished: start.Add(time.Second)},
		{TaskID: "T", Host: model.Host{IP: "::1", CloudID: 7}, ProcKey: "web:n", Op: model.OpRestart, State: model.StateFailed, Code: 836,
			Message: "bad \xff \u2028", Hosted: true, Status: &model.ProcStatus{CPU: 1e-9}},
	} {
		l := opLine{Result: r, Content: wire.Content(r), AgentID: r.Host.AgentID(), OpName: r.Op.String(), DurationMS: r.Duration().Milliseconds()}
		want, werr := json.Marshal(l)
		got, gerr := appendOpLine([]byte("x"), l)
		if (werr == nil) != (gerr == nil) || (werr == nil && string(got) != "x"+string(want)) {
			t.Fatalf("appendOpLine differs from json.Marshal:\n got %s (%v)\nwant x%s (%v)", got, gerr, want, werr)
		}
		checkPrintedLine(t, r, want, werr)
	}
}

// checkPrintedLine: the --json printer writes r as want (json.Marshal of
// its opLine, werr its error) and a newline, twice (its encoder keeps
// text from one result to the next).
func checkPrintedLine(t *testing.T, r model.Result, want []byte, werr error) {
	t.Helper()
	var enc model.ResultEncoder
	for range 2 {
		got, gerr := appendResultLineText([]byte("x"), &enc, &r, nil)
		if (werr == nil) != (gerr == nil) || (werr == nil && string(got) != "x"+string(want)) {
			t.Fatalf("appendResultLineText differs from json.Marshal:\n got %s (%v)\nwant x%s (%v)", got, gerr, want, werr)
		}
	}
	if werr != nil {
		return
	}
	var out strings.Builder
	p := &resultPrinter{out: &out, json: true, status: r.Op == model.OpStatus}
	for range 2 {
		if err := p.print(&r, nil); err != nil {
			t.Fatal(err)
		}
	}
	if line := string(want) + "\n"; out.String() != line+line {
		t.Fatalf("printed\n%s\nwant twice\n%s", out.String(), line)
	}
}

// FuzzOpLineJSON: appendOpLine writes what json.Marshal writes, content
// (a JSON text in a string, every '"' escaped) included.
func FuzzOpLineJSON(f *testing.F) {
	f.Add("T", "10.0.0.1", "gse:beat", "beat", "ok <&>", int64(3), 1.5, true, uint8(2))
	f.Add("", "\xff\u2028", "\"\\", "", "\b\f\x00", int64(-1), 1e-9, false, uint8(5))
	f.Fuzz(func(t *testing.T, task, ip, proc, name, msg string, n int64, cpu float64, withStatus bool, op uint8) {
		start := time.Unix(n%(1<<35), 0).UTC()
		r := model.Result{TaskID: task, Seq: n, Host: model.Host{IP: ip, CloudID: int(n % 100)}, ProcKey: proc, AgentID: msg,
			Op: model.OpType(op % 13), State: model.ResultState(msg), Code: int(n % 3), Message: msg,
			Proc: model.ResultProc{ProcName: name, InstanceID: msg}, Started: start, Finished: start.Add(time.Duration(n % 1e9))}
		if withStatus {
			r.Status = &model.ProcStatus{ProcKey: proc, ProcName: name, State: model.ProcRunning, PID: int(n), CPU: cpu, Mem: cpu / 2,
				Version: msg, Cmdline: task, StartTime: start}
		}
		l := opLine{Result: r, Content: wire.Content(r), AgentID: r.Host.AgentID(), OpName: r.Op.String(), DurationMS: r.Duration().Milliseconds()}
		want, werr := json.Marshal(l)
		got, gerr := appendOpLine([]byte("x"), l)
		if (werr == nil) != (gerr == nil) || (werr == nil && string(got) != "x"+string(want)) {
			t.Fatalf("appendOpLine differs from json.Marshal:\n got %s (%v)\nwant x%s (%v)", got, gerr, want, werr)
		}
		// The content rendered apart, as bytes (the printer's own line,
		// appendResultLineText, is checkPrintedLine's).
		bare := l
		bare.Content = ""
		got, gerr = appendOpLineWith([]byte("x"), bare, wire.AppendContent([]byte("y")[:0], &r))
		if (werr == nil) != (gerr == nil) || (werr == nil && string(got) != "x"+string(want)) {
			t.Fatalf("appendOpLineWith differs from json.Marshal:\n got %s (%v)\nwant x%s (%v)", got, gerr, want, werr)
		}
		checkPrintedLine(t, r, want, werr)
	})
}

// checkLineText: the line the printer writes of the result data holds
// (read as the op client reads a task stream) is the same with the text
// the server sent as without it: appendResultLineText of an exact text
// is its line without a text, byte for byte. It reports whether the text
// was exact.
func checkLineText(t *testing.T, data []byte) bool {
	t.Helper()
	var d model.ResultDecoder
	r, exact, err := d.DecodeExact(data)
	if err != nil {
		return false
	}
	var text []byte
	if exact {
		text = data
	}
	var enc, enc2 model.ResultEncoder
	for range 2 { // the encoders keep text from one result to the next
		want, werr := appendResultLineText([]byte("x"), &enc, &r, nil)
		got, gerr := appendResultLineText([]byte("x"), &enc2, &r, text)
		if (werr == nil) != (gerr == nil) || (werr == nil && string(got) != string(want)) {
			t.Fatalf("%s: the line from the text differs:\n got %s (%v)\nwant %s (%v)", data, got, gerr, want, werr)
		}
	}
	// And as the printer prints it.
	var a, b strings.Builder
	pa := &resultPrinter{out: &a, json: true, status: r.Op == model.OpStatus}
	pb := &resultPrinter{out: &b, json: true, status: r.Op == model.OpStatus}
	if err := pa.print(&r, nil); err != nil {
		return exact
	}
	if err := pb.print(&r, text); err != nil || a.String() != b.String() {
		t.Fatalf("%s: printed from the text (%v)\n%s\nwant\n%s", data, err, b.String(), a.String())
	}
	return exact
}

// lineTextSamples are results as a server writes them (exact) and
// written otherwise: a status with its content, a control op, a result
// with an agent_id of its own, odd values.
func lineTextSamples(t testing.TB) [][]byte {
	start := time.Date(2026, 11, 24, 1, 2, 3, 456789000, time.UTC)
	st := &model.ProcStatus{ProcKey: "gse:beat", ProcName: "beat", State: model.ProcRunning, PID: 42, Hosted: true,
		StartTime: start.Add(-40 * time.Hour), RegisterTime: 1_700_000_000, ReportTime: 1_763_950_000, CPU: 1.5, Mem: 0.25,
		MemRSS: 12 << 20, Version: "3.2.1", Cmdline: "./beat -c beat.conf", Threads: 7}
	var out [][]byte
	for _, r := range []model.Result{
		{TaskID: "T", Seq: 3, Host: model.Host{IP: "10.0.0.1"}, ProcKey: "gse:beat", Op: model.OpStatus,
			State: model.StateSuccess, Message: "success", Proc: model.ResultProc{ProcName: "beat", SetupPath: "/usr/local/gse"},
			Hosted: true, Status: st, Started: start, Finished: start.Add(time.Second)},
		{TaskID: "T", Seq: 4, Host: model.Host{IP: "10.0.0.2", CloudID: 3}, ProcKey: "gse:beat", AgentID: "3:10.0.0.2", Op: model.OpStatus,
			State: model.StateSuccess, Message: "success", Proc: model.ResultProc{ProcName: "beat"}, Status: st, Started: start, Finished: start.Add(time.Second)},
		{TaskID: "T", Seq: 5, Host: model.Host{IP: "::1", CloudID: 7}, ProcKey: "web:n", Op: model.OpRestart, State: model.StateFailed, Code: 836,
			Message: "bad thing: more", Proc: model.ResultProc{ProcName: "n", FuncID: "f"}, Hosted: true, Started: start, Finished: start.Add(3 * time.Millisecond)},
		{TaskID: "T", Seq: 6, Host: model.Host{IP: "10.0.0.3"}, ProcKey: "web:n", Op: model.OpStart, State: model.StateSuccess, Message: "success",
			Proc: model.ResultProc{ProcName: "n"}, Started: start.In(time.FixedZone("", 8*3600)), Finished: start.Add(time.Second).Local()},
		{TaskID: "T", Seq: 7, Host: model.Host{IP: "10.0.0.4"}, ProcKey: "web:n", Op: model.OpStatus, State: model.StateTimeout},
	} {
		data, err := model.AppendResultJSON(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// TestOpLineText: an op's --json lines are the same whether written from
// the text the server sent or from the result read from it: for the
// results a server writes (exact, but for a result with an agent_id of
// its own, which the line hides) and the same written otherwise.
func TestOpLineText(t *testing.T) {
	samples := lineTextSamples(t)
	for i, data := range samples {
		exact := checkLineText(t, data)
		if !exact {
			t.Fatalf("sample %d not exact: %s", i, data)
		}
		for _, c := range [][2]string{{`"seq":`, `"seq":-0,"x":`}, {`"error_msg":"`, `"error_msg":"<&>`}, {`"ip":"`, `"ip":"\u0041`},
			{`"cpu_usage":1.5`, `"cpu_usage":1.50`}, {`"proc_name":"beat"`, `"proc_name":"beat","func_id":""`}, {`Z"`, `+00:00"`}} {
			checkLineText(t, []byte(strings.Replace(string(data), c[0], c[1], 1)))
		}
	}
}

// FuzzOpLineText: the line written from a text the server sent is the
// line written from the result read from it, whatever the text.
func FuzzOpLineText(f *testing.F) {
	for _, data := range lineTextSamples(f) {
		f.Add(data)
	}
	f.Add([]byte(`{"task_id":"a","seq":1,"host":{"ip":"x","bk_cloud_id":-0},"proc":"p","op_type":2,"state":"s","error_code":0,"error_msg":"m"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkLineText(t, data)
	})
}
