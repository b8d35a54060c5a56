package wire

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"gseproc/model"
)

// The result content of the GSE/JOB documents: a JSON text per (host,
// process) that the engine does not build. It keeps typed results
// (model.Result: code, message, the definition's identity, hosting, the
// status the agent reported) and the server renders them here.
//
// The content is written by hand, as json.Marshal writes the documents
// below (controlDoc, statusDoc) byte for byte: the op client writes one
// per result (100,000 per op over 100,000 hosts) and reflection was a
// large part of its CPU. A content the appender does not write itself (a
// float json writes in exponent form or refuses) is written by
// json.Marshal of the document (FuzzContent compares the two).

// Content is r's content as GSE shapes it: StatusContent for a status op
// that got a status back, ControlContent for any other result the engine
// ran, and "" for one it did not (pending, cancelled before it was sent,
// its definition gone).
func Content(r model.Result) string {
	var buf [1024]byte // most contents: the one allocation is the string
	return string(AppendContent(buf[:0], &r))
}

// AppendContent appends Content(*r) to b.
func AppendContent(b []byte, r *model.Result) []byte {
	if r.Proc == (model.ResultProc{}) && r.Status == nil {
		return b
	}
	if r.Op == model.OpStatus && r.Status != nil {
		return appendStatusContent(b, r)
	}
	return appendControlContent(b, r)
}

// ControlContent is the content of a control-op result as GSE shapes it:
// {"value":[{procName, setupPath, funcID, instanceID, result, isAuto}]};
// result is "success" for code 0, else the result's message.
func ControlContent(r model.Result) string {
	return string(appendControlContent(nil, &r))
}

// StatusContent is the content of a status-op (op 2) result as GSE shapes
// it: {ip, utctime, utctime2, timezone, process:[{procname, instance:[{...}]}]},
// as of the time the result was final.
func StatusContent(r model.Result) string {
	return string(appendStatusContent(nil, &r))
}

type controlItem struct {
	ProcName   string `json:"procName"`
	SetupPath  string `json:"setupPath"`
	FuncID     string `json:"funcID"`
	InstanceID string `json:"instanceID"`
	Result     string `json:"result"`
	IsAuto     bool   `json:"isAuto"`
}

type controlDoc struct {
	Value []controlItem `json:"value"`
}

func controlOf(r *model.Result) controlItem {
	text := "success"
	if r.Code != model.CodeSuccess {
		text = r.Message
	}
	id := r.Proc
	return controlItem{id.ProcName, id.SetupPath, id.FuncID, id.InstanceID, text, r.Hosted}
}

func appendControlContent(b []byte, r *model.Result) []byte {
	it := controlOf(r)
	b = append(b, `{"value":[{"procName":`...)
	b = model.AppendJSONString(b, it.ProcName)
	b = append(b, `,"setupPath":`...)
	b = model.AppendJSONString(b, it.SetupPath)
	b = append(b, `,"funcID":`...)
	b = model.AppendJSONString(b, it.FuncID)
	b = append(b, `,"instanceID":`...)
	b = model.AppendJSONString(b, it.InstanceID)
	b = append(b, `,"result":`...)
	b = model.AppendJSONString(b, it.Result)
	b = append(b, `,"isAuto":`...)
	b = strconv.AppendBool(b, it.IsAuto)
	return append(b, `}]}`...)
}

type statusInstance struct {
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

type statusProc struct {
	ProcName string           `json:"procname"`
	Instance []statusInstance `json:"instance"`
}

type statusDoc struct {
	IP       string       `json:"ip"`
	AgentID  string       `json:"bk_agent_id"`
	UTCTime  string       `json:"utctime"`
	UTCTime2 string       `json:"utctime2"`
	Timezone int          `json:"timezone"`
	Process  []statusProc `json:"process"`
}

const contentTime = "2006-01-02 15:04:05"

// statusOf is the status document's values but for its times and its
// one process's name and instance, then those. The times are now's and
// the instance's StartTime (when set) formatted by contentTime.
func statusOf(r *model.Result) (doc statusDoc, name string, in statusInstance, startTime time.Time) {
	var st model.ProcStatus
	if r.Status != nil {
		st = *r.Status
	}
	now := r.Finished
	name = r.Proc.ProcName
	if name == "" {
		name = st.ProcName
	}
	pid := st.PID
	if !st.State.Up() || pid == 0 {
		pid = -1
	}
	in = statusInstance{
		ProcessName: name, PID: pid, IsAuto: st.Hosted, Version: st.Version,
		Cmdline: st.Cmdline, CPUUsage: st.CPU, CPUUsageAve: st.CPU, PhyMemUsage: st.Mem,
		UsePhyMem: st.MemRSS, FreeVMem: "0", DiskSize: -1, Stat: string(st.State), Utime: "0", Stime: "0",
		ThreadCount: st.Threads, RegisterTime: st.RegisterTime, LastStartTime: st.LastStartTime,
		ReportTime: now.Unix(),
	}
	if pid > 0 && !st.StartTime.IsZero() {
		startTime = st.StartTime.UTC()
		in.ElapsedTime = int64(now.Sub(st.StartTime).Seconds())
	}
	_, off := now.Zone()
	doc = statusDoc{IP: r.Host.IP, AgentID: r.Host.AgentID(), Timezone: off / 3600}
	return doc, name, in, startTime
}

// appendTime appends t formatted by contentTime as a JSON string, "" for
// the zero time. The text is made of digits, '-', ':' and ' ' alone, and
// is escaped all the same.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, `""`...)
	}
	var buf [40]byte
	return model.AppendJSONString(b, appendContentTime(buf[:0], t))
}

// appendContentTime appends t formatted by contentTime, as
// t.AppendFormat(b, contentTime) does: digit by digit from its date and
// clock, not by reading the layout (three times in every status
// content, 7% of the op client's instructions for an op's --json lines).
// A year outside 0..9999 is left to AppendFormat.
func appendContentTime(b []byte, t time.Time) []byte {
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, contentTime)
	}
	hour, minute, sec := t.Clock()
	two := func(b []byte, n int) []byte { return append(b, byte('0'+n/10), byte('0'+n%10)) }
	b = two(two(b, year/100), year%100)
	b = two(append(b, '-'), int(month))
	b = two(append(b, '-'), day)
	b = two(append(b, ' '), hour)
	b = two(append(b, ':'), minute)
	return two(append(b, ':'), sec)
}

func appendStatusContent(b []byte, r *model.Result) []byte {
	doc, name, in, startTime := statusOf(r)
	now := r.Finished
	start := len(b)
	ok := true
	b = append(b, `{"ip":`...)
	b = model.AppendJSONString(b, doc.IP)
	b = append(b, `,"bk_agent_id":`...)
	b = model.AppendJSONString(b, doc.AgentID)
	b = append(b, `,"utctime":`...)
	var tb [40]byte
	b = model.AppendJSONString(b, appendContentTime(tb[:0], now))
	b = append(b, `,"utctime2":`...)
	b = model.AppendJSONString(b, appendContentTime(tb[:0], now.UTC()))
	b = append(b, `,"timezone":`...)
	b = strconv.AppendInt(b, int64(doc.Timezone), 10)
	b = append(b, `,"process":[{"procname":`...)
	b = model.AppendJSONString(b, name)
	b = append(b, `,"instance":[{"processName":`...)
	b = model.AppendJSONString(b, in.ProcessName)
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(in.PID), 10)
	b = append(b, `,"isAuto":`...)
	b = strconv.AppendBool(b, in.IsAuto)
	b = append(b, `,"version":`...)
	b = model.AppendJSONString(b, in.Version)
	b = append(b, `,"health":`...)
	b = model.AppendJSONString(b, in.Health)
	b = append(b, `,"cmdline":`...)
	b = model.AppendJSONString(b, in.Cmdline)
	b = append(b, `,"cpuUsage":`...)
	b, ok = appendFloat(b, in.CPUUsage, ok)
	b = append(b, `,"cpuUsageAve":`...)
	b, ok = appendFloat(b, in.CPUUsageAve, ok)
	b = append(b, `,"phyMemUsage":`...)
	b, ok = appendFloat(b, in.PhyMemUsage, ok)
	b = append(b, `,"usePhyMem":`...)
	b = strconv.AppendUint(b, in.UsePhyMem, 10)
	b = append(b, `,"freeVMem":`...)
	b = model.AppendJSONString(b, in.FreeVMem)
	b = append(b, `,"diskSize":`...)
	b = strconv.AppendInt(b, int64(in.DiskSize), 10)
	b = append(b, `,"startTime":`...)
	b = appendTime(b, startTime)
	b = append(b, `,"stat":`...)
	b = model.AppendJSONString(b, in.Stat)
	b = append(b, `,"utime":`...)
	b = model.AppendJSONString(b, in.Utime)
	b = append(b, `,"stime":`...)
	b = model.AppendJSONString(b, in.Stime)
	b = append(b, `,"threadCount":`...)
	b = strconv.AppendInt(b, int64(in.ThreadCount), 10)
	for _, f := range [...]struct {
		k string
		v int64
	}{{`,"elapsedTime":`, in.ElapsedTime}, {`,"register_time":`, in.RegisterTime},
		{`,"last_start_time":`, in.LastStartTime}, {`,"report_time":`, in.ReportTime}} {
		b = append(b, f.k...)
		b = strconv.AppendInt(b, f.v, 10)
	}
	b = append(b, `}]}]}`...)
	if ok {
		return b
	}
	// A float json.Marshal writes in exponent form or refuses (NaN, ±Inf,
	// and then the content is empty, as it always was).
	data, _ := json.Marshal(statusDocOf(r))
	return append(b[:start], data...)
}

// statusDocOf is the whole status document, as json.Marshal writes it.
func statusDocOf(r *model.Result) statusDoc {
	doc, name, in, startTime := statusOf(r)
	if !startTime.IsZero() {
		in.StartTime = startTime.Format(contentTime)
	}
	doc.UTCTime, doc.UTCTime2 = r.Finished.Format(contentTime), r.Finished.UTC().Format(contentTime)
	doc.Process = []statusProc{{name, []statusInstance{in}}}
	return doc
}

// appendFloat appends f as json.Marshal writes it when that is without an
// exponent; else it leaves ok false.
func appendFloat(b []byte, f float64, ok bool) ([]byte, bool) {
	abs := math.Abs(f)
	if math.IsNaN(f) || math.IsInf(f, 0) || (abs != 0 && (abs < 1e-6 || abs >= 1e21)) {
		return b, false
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64), ok
}
