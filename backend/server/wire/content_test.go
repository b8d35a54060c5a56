package wire

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"gseproc/model"
)

// legacyContent is Content as it was written by json.Marshal of the GSE
// documents (before the appender), kept verbatim as the reference the
// appender is tested against.
func legacyContent(r model.Result) string {
	if r.Proc == (model.ResultProc{}) && r.Status == nil {
		return ""
	}
	if r.Op == model.OpStatus && r.Status != nil {
		return legacyStatusContent(r)
	}
	return legacyControlContent(r)
}

// legacyControlContent is the content of a control-op result as GSE shapes it:
// {"value":[{procName, setupPath, funcID, instanceID, result, isAuto}]};
// result is "success" for code 0, else the result's message.
func legacyControlContent(r model.Result) string {
	type item struct {
		ProcName   string `json:"procName"`
		SetupPath  string `json:"setupPath"`
		FuncID     string `json:"funcID"`
		InstanceID string `json:"instanceID"`
		Result     string `json:"result"`
		IsAuto     bool   `json:"isAuto"`
	}
	text := "success"
	if r.Code != model.CodeSuccess {
		text = r.Message
	}
	id := r.Proc
	b, _ := json.Marshal(struct {
		Value []item `json:"value"`
	}{[]item{{id.ProcName, id.SetupPath, id.FuncID, id.InstanceID, text, r.Hosted}}})
	return string(b)
}

// legacyStatusContent is the content of a status-op (op 2) result as GSE shapes
// it: {ip, utctime, utctime2, timezone, process:[{procname, instance:[{...}]}]},
// as of the time the result was final.
func legacyStatusContent(r model.Result) string {
	type instance struct {
		ProcessName   string  `json:"processName"`
		PID           int     `json:"pid"`
		IsAuto        bool    `json:"isAuto"`
		Version       string  `json:"version"`
		Health        string  `json:"health"`
		Cmdline       string  `json:"cmdline"`
		CPUUsage      float64 `json:"cpuUsage"`
		CPUUsageAve   float64 `json:"cpuUsageAve"`
		PhyMemUsage   float64 `json:"phyMemUsage"`
		UsePhyMem     uint64  `json:"usePhyMem"`
		FreeVMem      string  `json:"freeVMem"`
		DiskSize      int     `json:"diskSize"`
		StartTime     string  `json:"startTime"`
		Stat          string  `json:"stat"`
		Utime         string  `json:"utime"`
		Stime         string  `json:"stime"`
		ThreadCount   int     `json:"threadCount"`
		ElapsedTime   int64   `json:"elapsedTime"`
		RegisterTime  int64   `json:"register_time"`
		LastStartTime int64   `json:"last_start_time"`
		ReportTime    int64   `json:"report_time"`
	}
	type proc struct {
		ProcName string     `json:"procname"`
		Instance []instance `json:"instance"`
	}
	var st model.ProcStatus
	if r.Status != nil {
		st = *r.Status
	}
	now := r.Finished
	name := r.Proc.ProcName
	if name == "" {
		name = st.ProcName
	}
	pid := st.PID
	if !st.State.Up() || pid == 0 {
		pid = -1
	}
	in := instance{
		ProcessName: name, PID: pid, IsAuto: st.Hosted, Version: st.Version,
		Cmdline: st.Cmdline, CPUUsage: st.CPU, CPUUsageAve: st.CPU, PhyMemUsage: st.Mem,
		UsePhyMem: st.MemRSS, FreeVMem: "0", DiskSize: -1, Stat: string(st.State), Utime: "0", Stime: "0",
		ThreadCount: st.Threads, RegisterTime: st.RegisterTime, LastStartTime: st.LastStartTime,
		ReportTime: now.Unix(),
	}
	if pid > 0 && !st.StartTime.IsZero() {
		in.StartTime = st.StartTime.UTC().Format("2006-01-02 15:04:05")
		in.ElapsedTime = int64(now.Sub(st.StartTime).Seconds())
	}
	_, off := now.Zone()
	b, _ := json.Marshal(struct {
		IP       string `json:"ip"`
		AgentID  string `json:"bk_agent_id"`
		UTCTime  string `json:"utctime"`
		UTCTime2 string `json:"utctime2"`
		Timezone int    `json:"timezone"`
		Process  []proc `json:"process"`
	}{r.Host.IP, r.Host.AgentID(), now.Format("2006-01-02 15:04:05"), now.UTC().Format("2006-01-02 15:04:05"), off / 3600,
		[]proc{{name, []instance{in}}}})
	return string(b)
}

func checkContent(t *testing.T, r model.Result) {
	t.Helper()
	want := legacyContent(r)
	if got := Content(r); got != want {
		t.Fatalf("Content differs from json.Marshal:\n got %s\nwant %s", got, want)
	}
	if got := string(AppendContent([]byte("prefix"), &r)); got != "prefix"+want {
		t.Fatalf("AppendContent differs from json.Marshal:\n got %s\nwant prefix%s", got, want)
	}
	// Quoted as a JSON string (none when there is no content).
	wantQ := ""
	if want != "" {
		q, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		wantQ = string(q)
	}
	if got := string(AppendContentString([]byte("prefix"), &r)); got != "prefix"+wantQ {
		t.Fatalf("AppendContentString differs from json.Marshal of the content:\n got %s\nwant prefix%s", got, wantQ)
	}
}

func sampleStatusResult() model.Result {
	start := time.Date(2026, 11, 24, 5, 0, 0, 123456789, time.FixedZone("CST", 8*3600))
	return model.Result{TaskID: "T", Seq: 7, Host: model.Host{IP: "10.0.3.7", CloudID: 2}, ProcKey: "gse:beat", Op: model.OpStatus,
		State: model.StateSuccess, Message: "success", Proc: model.ResultProc{ProcName: "beat", SetupPath: "/usr/local/gse"}, Hosted: true,
		Status: &model.ProcStatus{ProcKey: "gse:beat", ProcName: "beat", State: model.ProcRunning, PID: 4242, Hosted: true,
			StartTime: start, RegisterTime: 1, LastStartTime: 2, ReportTime: 3, CPU: 12.34, Mem: 0.5, MemRSS: 123 << 20,
			Version: "3.2.1", Cmdline: "beat -c x.yml", Threads: 17},
		Started: start.Add(time.Hour), Finished: start.Add(time.Hour + 5*time.Millisecond)}
}

// The content is written as json.Marshal writes the GSE documents: status
// and control contents, none, hostile strings, and floats json writes in
// exponent form or refuses.
func TestContentJSON(t *testing.T) {
	st := sampleStatusResult()
	checkContent(t, st)
	checkContent(t, model.Result{})
	checkContent(t, model.Result{Op: model.OpStatus, Status: &model.ProcStatus{}})
	checkContent(t, model.Result{Op: model.OpStatus, Proc: model.ResultProc{FuncID: "f"}})
	zero := sampleStatusResult()
	zero.Finished, zero.Status.StartTime = time.Time{}, time.Time{}
	checkContent(t, zero)
	ctl := st
	ctl.Op, ctl.Status, ctl.Code, ctl.Message = model.OpRestart, nil, 836, "failed"
	checkContent(t, ctl)
	ctl.Code = 0
	checkContent(t, ctl)
	for _, s := range []string{"a<b>&c", "line\nbreak\ttab\b\f\r", `quote " back \`, "\x00\x1f\x7f", "ünïcødé 中文", "\u2028\u2029", "bad \xff utf8 \xe2\x80"} {
		r := sampleStatusResult()
		r.Host.IP, r.Proc.ProcName, r.Status.Version, r.Status.Cmdline, r.Status.State = s, s, s, s, model.ProcState(s)
		checkContent(t, r)
		r.Op, r.Code, r.Message, r.Proc.InstanceID = model.OpStop, 1, s, s
		checkContent(t, r)
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1e-7, 1e-6, 123456789.125, 1e20, 1e21, -1e22, 5e-324, math.MaxFloat64, math.NaN(), math.Inf(-1)} {
		r := sampleStatusResult()
		r.Status.CPU, r.Status.Mem = f, -f
		checkContent(t, r)
	}
	r := sampleStatusResult()
	r.Status.CPU = math.NaN()
	if Content(r) != "" {
		t.Fatalf("a NaN cpu: content %q, want none (json.Marshal refuses it)", Content(r))
	}
	if _, ok := appendFloat(nil, 12.34, true); !ok {
		t.Fatal("the appender left a usual float to encoding/json")
	}
}

// TestContentEveryField: the documents the appender writes have the fields
// it writes; a field added to one fails here (the reference would write
// it, the appender not).
func TestContentEveryField(t *testing.T) {
	for _, c := range []struct {
		v    any
		want int
	}{{statusInstance{}, 21}, {statusDoc{}, 6}, {statusProc{}, 2}, {controlItem{}, 6}, {controlDoc{}, 1}} {
		if n := reflect.TypeOf(c.v).NumField(); n != c.want {
			t.Errorf("%T has %d fields, the appender writes %d: teach it the new one", c.v, n, c.want)
		}
	}
}

// FuzzContent: AppendContent writes what json.Marshal writes.
func FuzzContent(f *testing.F) {
	f.Add("10.0.0.1", "nginx", "/usr", "running", "ok", "3.1", "nginx -g", int64(42), int64(1_700_000_000), 12.5, 0.25, true, true, uint8(2))
	f.Add("", "<&>\u2028\xff", "\x00", "", "\"\\", "", "\b\f", int64(-1), int64(-7), 1e-9, 1e300, false, false, uint8(3))
	f.Fuzz(func(t *testing.T, ip, name, path, state, msg, version, cmdline string, n, unix int64, cpu, mem float64, hosted, withStatus bool, op uint8) {
		r := model.Result{Host: model.Host{IP: ip, CloudID: int(n % 1000)}, ProcKey: name, Op: model.OpType(op % 13), Code: int(n % 3),
			Message: msg, Proc: model.ResultProc{ProcName: name, SetupPath: path, FuncID: version, InstanceID: msg}, Hosted: hosted,
			Finished: time.Unix(unix%(1<<35), n%1e9).In(time.FixedZone("z", int(n%50000)))}
		if n%5 == 0 {
			r.Proc = model.ResultProc{}
		}
		if withStatus {
			r.Status = &model.ProcStatus{ProcKey: name, ProcName: path, State: model.ProcState(state), PID: int(n), Hosted: hosted,
				StartTime: time.Unix((unix/2)%(1<<35), 0), RegisterTime: unix, LastStartTime: n, ReportTime: -unix, CPU: cpu, Mem: mem,
				MemRSS: uint64(unix), Version: version, Cmdline: cmdline, Threads: int(n)}
		}
		checkContent(t, r)
	})
}

func BenchmarkContent(b *testing.B) {
	r := sampleStatusResult()
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = AppendContent(buf[:0], &r)
		}
	})
	// As the op client's --json line holds it: quoted straight away, and
	// made then escaped as before.
	b.Run("quoted", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = AppendContentString(buf[:0], &r)
		}
	})
	b.Run("append-escape", func(b *testing.B) {
		b.ReportAllocs()
		var buf, q []byte
		for b.Loop() {
			buf = AppendContent(buf[:0], &r)
			q = model.AppendJSONString(q[:0], buf)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = legacyContent(r)
		}
	})
}

// TestAppendContentTime: appendContentTime writes what AppendFormat writes
// by contentTime, in UTC and in a zone of its own, for the zero time, the
// years at both ends and past them, and times across a century.
func TestAppendContentTime(t *testing.T) {
	zone := time.FixedZone("UTC+8", 8*3600)
	times := []time.Time{{}, time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 6, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 28, 9, 5, 7, 0, zone)}
	for i := range 2000 {
		times = append(times, time.Unix(int64(i)*1_577_923+int64(i*i), int64(i)*7919))
	}
	for _, tm := range times {
		for _, tt := range []time.Time{tm, tm.UTC(), tm.In(zone)} {
			if got, want := string(appendContentTime([]byte("x"), tt)), "x"+tt.Format(contentTime); got != want {
				t.Fatalf("appendContentTime(%v) = %q, AppendFormat %q", tt, got, want)
			}
		}
	}
}
