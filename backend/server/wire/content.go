package wire

import (
	"encoding/json"

	"gseproc/model"
)

// The result content of the GSE/JOB documents: a JSON text per (host,
// process) that the engine does not build. It keeps typed results
// (model.Result: code, message, the definition's identity, hosting, the
// status the agent reported) and the server renders them here.

// Content is r's content as GSE shapes it: StatusContent for a status op
// that got a status back, ControlContent for any other result the engine
// ran, and "" for one it did not (pending, cancelled before it was sent,
// its definition gone).
func Content(r model.Result) string {
	if r.Proc == (model.ResultProc{}) && r.Status == nil {
		return ""
	}
	if r.Op == model.OpStatus && r.Status != nil {
		return StatusContent(r)
	}
	return ControlContent(r)
}

// ControlContent is the content of a control-op result as GSE shapes it:
// {"value":[{procName, setupPath, funcID, instanceID, result, isAuto}]};
// result is "success" for code 0, else the result's message.
func ControlContent(r model.Result) string {
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

// StatusContent is the content of a status-op (op 2) result as GSE shapes
// it: {ip, utctime, utctime2, timezone, process:[{procname, instance:[{...}]}]},
// as of the time the result was final.
func StatusContent(r model.Result) string {
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
