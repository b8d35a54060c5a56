package model

import (
	"encoding/json"
	"time"
)

// AgentRequest is what the engine sends one host for one process.
type AgentRequest struct {
	TaskID string `json:"task_id"`
	// OpID names this operation (OpID): an agent runs an op id at most
	// once and answers a repeat with the recorded outcome.
	OpID     string    `json:"op_id,omitempty"`
	Op       OpType    `json:"op_type"`
	Process  Process   `json:"process"`
	Deadline time.Time `json:"deadline,omitzero"`
}

// OpID is the operation id of task taskID on one target: the same every
// time the target is dispatched for the task, also by another server that
// resumes the task, so that the host runs it at most once.
func OpID(taskID string, host Host, procKey string) string {
	return taskID + "/" + host.AgentID() + "/" + procKey
}

// AgentReply is one host's answer.
type AgentReply struct {
	Code    int         `json:"error_code"`
	Message string      `json:"error_msg"`
	Output  string      `json:"output,omitempty"` // command screen output
	Status  *ProcStatus `json:"status,omitempty"` // the process after the op
}

// ProcState is the agent's state machine for one hosted process, after
// supervisord's: stopped, starting, running, backoff, stopping, exited, fatal.
type ProcState string

// Process states.
const (
	ProcStopped  ProcState = "stopped"
	ProcStarting ProcState = "starting"
	ProcRunning  ProcState = "running"
	ProcBackoff  ProcState = "backoff"
	ProcStopping ProcState = "stopping"
	ProcExited   ProcState = "exited"
	ProcFatal    ProcState = "fatal"
	ProcUnknown  ProcState = "unknown"
)

// Up reports whether the process is alive in this state.
func (s ProcState) Up() bool { return s == ProcRunning || s == ProcStarting || s == ProcStopping }

// ProcStatus is one process on one host.
type ProcStatus struct {
	ProcKey       string    `json:"proc"`
	ProcName      string    `json:"proc_name"`
	State         ProcState `json:"state"`
	PID           int       `json:"pid"` // -1 when not running
	Hosted        bool      `json:"is_auto"`
	StartTime     time.Time `json:"start_time,omitzero"`
	RegisterTime  int64     `json:"register_time,omitempty"`
	LastStartTime int64     `json:"last_start_time,omitempty"`
	ReportTime    int64     `json:"report_time,omitempty"`
	CPU           float64   `json:"cpu_usage"` // percent of the whole machine
	Mem           float64   `json:"mem_usage"` // percent of the whole machine
	MemRSS        uint64    `json:"mem_rss,omitempty"`
	Restarts      int       `json:"restarts,omitempty"`
	ExitStatus    int       `json:"exit_status,omitempty"`
	Version       string    `json:"version,omitempty"`
	Cmdline       string    `json:"cmdline,omitempty"`
	Threads       int       `json:"threads,omitempty"`
	Message       string    `json:"message,omitempty"`
}

// Event is something that happened on a host without an operator asking:
// a hosted process restarted, failed to restart, was given up, broke a limit.
type Event struct {
	Time    time.Time `json:"time"`
	Host    Host      `json:"host"`
	ProcKey string    `json:"proc"`
	Kind    EventKind `json:"event_name"`
	Message string    `json:"content"`
	Value   float64   `json:"value,omitempty"` // the measured value, for limit events
}

// EventKind names an event as bk-monitor does.
type EventKind string

// Event kinds.
const (
	EventRestartSuccess EventKind = "process_restart_success"
	EventRestartFailed  EventKind = "process_restart_failed"
	EventGiveUp         EventKind = "process_cancel_restart"
	EventLimitExceeded  EventKind = "process_resource_limit_exceed"
	EventAgentOnline    EventKind = "agent_online"
	EventAgentOffline   EventKind = "agent_offline"
)

// ControlContent is the content of a control-op result as GSE shapes it:
// {"value":[{procName, setupPath, funcID, instanceID, result, isAuto}]}.
func ControlContent(p Process, result string, isAuto bool) string {
	type item struct {
		ProcName   string `json:"procName"`
		SetupPath  string `json:"setupPath"`
		FuncID     string `json:"funcID"`
		InstanceID string `json:"instanceID"`
		Result     string `json:"result"`
		IsAuto     bool   `json:"isAuto"`
	}
	b, _ := json.Marshal(struct {
		Value []item `json:"value"`
	}{[]item{{p.Spec.Identity.ProcName, p.Spec.Identity.SetupPath, p.Spec.Identity.FuncID, p.Spec.Identity.InstanceID, result, isAuto}}})
	return string(b)
}

// StatusContent is the content of a status-op (op 2) result as GSE shapes it:
// {ip, utctime, utctime2, timezone, process:[{procname, instance:[{...}]}]}.
func StatusContent(h Host, p Process, st ProcStatus, now time.Time) string {
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
	pid := st.PID
	if !st.State.Up() || pid == 0 {
		pid = -1
	}
	in := instance{
		ProcessName: p.Spec.Identity.ProcName, PID: pid, IsAuto: st.Hosted, Version: st.Version,
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
	}{h.IP, h.AgentID(), now.Format("2006-01-02 15:04:05"), now.UTC().Format("2006-01-02 15:04:05"), off / 3600,
		[]proc{{p.Spec.Identity.ProcName, []instance{in}}}})
	return string(b)
}
