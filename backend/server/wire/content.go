package wire

import (
	"encoding/json"
	"strconv"
	"strings"
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

// Content is r's content as GSE shapes it: a status content (cw.status)
// for a status op that got a status back, a control content (cw.control)
// for any other result the engine ran, and "" for one it did not (pending,
// cancelled before it was sent, its definition gone).
func Content(r model.Result) string {
	var buf [1024]byte // most contents: the one allocation is the string
	return string(AppendContent(buf[:0], &r))
}

// AppendContent appends Content(*r) to b.
func AppendContent(b []byte, r *model.Result) []byte {
	w := cw{b: b}
	w.content(r)
	return w.b
}

// AppendContentString appends Content(*r) quoted as a JSON string, as
// model.AppendJSONString(b, Content(*r)) does, or nothing when the
// content is "". The op client's --json line holds it: written quoted
// straight away, it is not made first and escaped again (escaping its
// every '"' was a third of the client's work per line).
func AppendContentString(b []byte, r *model.Result) []byte {
	w := cw{b: append(b, '"'), quoted: true}
	if !w.content(r) {
		return b
	}
	return append(w.b, '"')
}

// litID names a literal of the contents: the JSON the writer makes
// around the values, kept as text and as quoted text (cw.lit).
type litID int

const (
	litControl litID = iota
	litSetupPath
	litFuncID
	litInstanceID
	litResult
	litControlEnd
	litIP
	litAgentID
	litUTCTime
	litUTCTime2
	litTimezone
	litProcess
	litInstance
	litPID
	litIsAuto
	litVersion
	litHealth
	litCmdline
	litCPUUsage
	litCPUUsageAve
	litPhyMemUsage
	litUsePhyMem
	litFreeVMem
	litDiskSize
	litStartTime
	litStat
	litUtime
	litStime
	litThreadCount
	litElapsedTime
	litRegisterTime
	litLastStartTime
	litReportTime
	litStatusEnd
	numLits
)

// lits are the literals' text; quotedLits the same as they read inside a
// JSON string (their '"' escaped), made once: escaped for each content,
// they were a third of a quoted one's work.
var lits = [numLits]string{
	litControl:       `{"value":[{"procName":`,
	litSetupPath:     `,"setupPath":`,
	litFuncID:        `,"funcID":`,
	litInstanceID:    `,"instanceID":`,
	litResult:        `,"result":`,
	litControlEnd:    `}]}`,
	litIP:            `{"ip":`,
	litAgentID:       `,"bk_agent_id":`,
	litUTCTime:       `,"utctime":`,
	litUTCTime2:      `,"utctime2":`,
	litTimezone:      `,"timezone":`,
	litProcess:       `,"process":[{"procname":`,
	litInstance:      `,"instance":[{"processName":`,
	litPID:           `,"pid":`,
	litIsAuto:        `,"isAuto":`,
	litVersion:       `,"version":`,
	litHealth:        `,"health":`,
	litCmdline:       `,"cmdline":`,
	litCPUUsage:      `,"cpuUsage":`,
	litCPUUsageAve:   `,"cpuUsageAve":`,
	litPhyMemUsage:   `,"phyMemUsage":`,
	litUsePhyMem:     `,"usePhyMem":`,
	litFreeVMem:      `,"freeVMem":`,
	litDiskSize:      `,"diskSize":`,
	litStartTime:     `,"startTime":`,
	litStat:          `,"stat":`,
	litUtime:         `,"utime":`,
	litStime:         `,"stime":`,
	litThreadCount:   `,"threadCount":`,
	litElapsedTime:   `,"elapsedTime":`,
	litRegisterTime:  `,"register_time":`,
	litLastStartTime: `,"last_start_time":`,
	litReportTime:    `,"report_time":`,
	litStatusEnd:     `}]}]}`,
}

var quotedLits = func() (q [numLits]string) {
	for i, s := range lits {
		q[i] = strings.ReplaceAll(s, `"`, `\"`)
	}
	return q
}()

// cw writes a content: its JSON text, or (quoted) that text as it reads
// inside a JSON string, without the string's own quotes.
type cw struct {
	b      []byte
	quoted bool
}

// lit appends the literal id.
func (w *cw) lit(id litID) {
	if w.quoted {
		w.b = append(w.b, quotedLits[id]...)
		return
	}
	w.b = append(w.b, lits[id]...)
}

// str appends s as a JSON string.
func str[S string | []byte](w *cw, s S) {
	if w.quoted {
		w.b = model.AppendJSONStringInString(w.b, s)
		return
	}
	w.b = model.AppendJSONString(w.b, s)
}

// json appends data, JSON text json.Marshal wrote.
func (w *cw) json(data []byte) {
	if !w.quoted {
		w.b = append(w.b, data...)
		return
	}
	w.b = model.AppendJSONInString(w.b, data)
}

// content writes r's content; false when it is "".
func (w *cw) content(r *model.Result) bool {
	if r.Proc == (model.ResultProc{}) && r.Status == nil {
		return false
	}
	if r.Op == model.OpStatus && r.Status != nil {
		return w.status(r)
	}
	w.control(r)
	return true
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

// control writes the content of a control-op result as GSE shapes it:
// {"value":[{procName, setupPath, funcID, instanceID, result, isAuto}]};
// result is "success" for code 0, else the result's message.
func (w *cw) control(r *model.Result) {
	it := controlOf(r)
	w.lit(litControl)
	str(w, it.ProcName)
	w.lit(litSetupPath)
	str(w, it.SetupPath)
	w.lit(litFuncID)
	str(w, it.FuncID)
	w.lit(litInstanceID)
	str(w, it.InstanceID)
	w.lit(litResult)
	str(w, it.Result)
	w.lit(litIsAuto)
	w.b = strconv.AppendBool(w.b, it.IsAuto)
	w.lit(litControlEnd)
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
	doc = statusDoc{IP: r.Host.IP, Timezone: off / 3600} // AgentID: by the writer, without a string made
	return doc, name, in, startTime
}

// time appends t formatted by contentTime as a JSON string, "" for the
// zero time. The text is made of digits, '-', ':' and ' ' alone, and is
// escaped all the same.
func (w *cw) time(t time.Time) {
	if t.IsZero() {
		str(w, "")
		return
	}
	var buf [40]byte
	str(w, appendContentTime(buf[:0], t))
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

// status writes the content of a status-op (op 2) result as GSE shapes
// it: {ip, utctime, utctime2, timezone, process:[{procname, instance:[{...}]}]},
// as of the time the result was final; false when it is "" (a float
// json.Marshal refuses).
func (w *cw) status(r *model.Result) bool {
	doc, name, in, startTime := statusOf(r)
	now := r.Finished
	start := len(w.b)
	ok := true
	w.lit(litIP)
	str(w, doc.IP)
	w.lit(litAgentID)
	var ab [24 + model.MaxIPText]byte
	str(w, r.Host.AppendAgentID(ab[:0]))
	w.lit(litUTCTime)
	var tb [40]byte
	str(w, appendContentTime(tb[:0], now)) // the zero time too
	w.lit(litUTCTime2)
	str(w, appendContentTime(tb[:0], now.UTC()))
	w.lit(litTimezone)
	w.b = strconv.AppendInt(w.b, int64(doc.Timezone), 10)
	w.lit(litProcess)
	str(w, name)
	w.lit(litInstance)
	str(w, in.ProcessName)
	w.lit(litPID)
	w.b = strconv.AppendInt(w.b, int64(in.PID), 10)
	w.lit(litIsAuto)
	w.b = strconv.AppendBool(w.b, in.IsAuto)
	w.lit(litVersion)
	str(w, in.Version)
	w.lit(litHealth)
	str(w, in.Health)
	w.lit(litCmdline)
	str(w, in.Cmdline)
	w.lit(litCPUUsage)
	cpu := len(w.b)
	w.b, ok = appendFloat(w.b, in.CPUUsage, ok)
	cpu2 := len(w.b)
	w.lit(litCPUUsageAve)
	// statusOf gives the usage as its average too: the same value, its
	// text again (compared all the same: an average of its own would be
	// written). ok needs no test: when it is false, what is written here
	// is dropped for json.Marshal's content.
	if in.CPUUsageAve == in.CPUUsage {
		w.b = append(w.b, w.b[cpu:cpu2]...)
	} else {
		w.b, ok = appendFloat(w.b, in.CPUUsageAve, ok)
	}
	w.lit(litPhyMemUsage)
	w.b, ok = appendFloat(w.b, in.PhyMemUsage, ok)
	w.lit(litUsePhyMem)
	w.b = strconv.AppendUint(w.b, in.UsePhyMem, 10)
	w.lit(litFreeVMem)
	str(w, in.FreeVMem)
	w.lit(litDiskSize)
	w.b = strconv.AppendInt(w.b, int64(in.DiskSize), 10)
	w.lit(litStartTime)
	w.time(startTime)
	w.lit(litStat)
	str(w, in.Stat)
	w.lit(litUtime)
	str(w, in.Utime)
	w.lit(litStime)
	str(w, in.Stime)
	w.lit(litThreadCount)
	w.b = strconv.AppendInt(w.b, int64(in.ThreadCount), 10)
	for _, f := range [...]struct {
		k litID
		v int64
	}{{litElapsedTime, in.ElapsedTime}, {litRegisterTime, in.RegisterTime},
		{litLastStartTime, in.LastStartTime}, {litReportTime, in.ReportTime}} {
		w.lit(f.k)
		w.b = strconv.AppendInt(w.b, f.v, 10)
	}
	w.lit(litStatusEnd)
	if ok {
		return true
	}
	// A float json.Marshal writes in exponent form or refuses (NaN, ±Inf,
	// and then the content is empty, as it always was).
	w.b = w.b[:start]
	data, err := json.Marshal(statusDocOf(r))
	if err != nil {
		return false
	}
	w.json(data)
	return true
}

// statusDocOf is the whole status document, as json.Marshal writes it.
func statusDocOf(r *model.Result) statusDoc {
	doc, name, in, startTime := statusOf(r)
	doc.AgentID = r.Host.AgentID()
	if !startTime.IsZero() {
		in.StartTime = startTime.Format(contentTime)
	}
	doc.UTCTime, doc.UTCTime2 = r.Finished.Format(contentTime), r.Finished.UTC().Format(contentTime)
	doc.Process = []statusProc{{name, []statusInstance{in}}}
	return doc
}

// appendFloat appends f as json.Marshal writes it when that is without an
// exponent (model.AppendJSONFloat); else it leaves ok false.
func appendFloat(b []byte, f float64, ok bool) ([]byte, bool) {
	b, fok := model.AppendJSONFloat(b, f)
	return b, ok && fok
}
