package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"gseproc/backend/kept"
	"gseproc/model"
)

// RegistryFile is the hosting registry's name under DataDir. Its shape
// follows GSE's procinfo.json ("{"proc":[...]}", valuekey namespace:name,
// camelCase fields) so tools that read .proc files can read it; gseproc's
// own record (the whole definition and each instance's pid and start time,
// for re-adoption) is under "gseproc".
const RegistryFile = "procinfo.json"

// OpsFile is the op ledger's name under DataDir: the outcomes of the last
// op ids the agent ran (see package opledger).
const OpsFile = "ops.jsonl"

type registryFile struct {
	Proc []procRecord `json:"proc"`
}

type procRecord struct {
	ProcName            string  `json:"procName"`
	SetupPath           string  `json:"setupPath"`
	PidPath             string  `json:"pidPath"`
	Contact             string  `json:"contact"`
	StartCmd            string  `json:"startCmd"`
	StopCmd             string  `json:"stopCmd"`
	RestartCmd          string  `json:"restartCmd"`
	ReloadCmd           string  `json:"reloadCmd"`
	KillCmd             string  `json:"killCmd"`
	VersionCmd          string  `json:"versionCmd"`
	HealthCmd           string  `json:"healthCmd"`
	Type                int     `json:"type"`
	CPULmt              float64 `json:"cpulmt"`
	MemLmt              float64 `json:"memlmt"`
	User                string  `json:"user"`
	ValueKey            string  `json:"valuekey"`
	StartCheckBeginTime int     `json:"startCheckBeginTime"`
	StartCheckEndTime   int     `json:"startCheckEndTime"`
	OpTimeOut           int     `json:"opTimeOut"`
	OperateType         int     `json:"operateType"`
	Timestamp           int64   `json:"timestamp"`

	GSEProc *hostedRecord `json:"gseproc,omitempty"`
}

// hostedRecord is gseproc's part of a registry entry.
type hostedRecord struct {
	Process      model.Process    `json:"process"`
	RegisterTime int64            `json:"register_time"`
	Instances    []instanceRecord `json:"instances"`
}

type instanceRecord struct {
	PID       int             `json:"pid"`
	StartTick uint64          `json:"start_tick"` // /proc/<pid>/stat starttime
	State     model.ProcState `json:"state"`
	Held      string          `json:"held,omitempty"` // why it is not restarted (limit, given up)
	Done      bool            `json:"done,omitempty"` // one-shot finished cleanly
	Restarts  int             `json:"restarts,omitempty"`
}

func recordOf(p model.Process, op model.OpType, ts int64, h *hostedRecord) procRecord {
	id, c, pol := p.Spec.Identity, p.Spec.Control, p.Spec.Policy
	user := id.User
	if user == "" {
		user = p.Account()
	}
	return procRecord{
		ProcName: id.ProcName, SetupPath: id.SetupPath, PidPath: id.PidPath, Contact: p.Meta.Namespace,
		StartCmd: c.StartCmd, StopCmd: c.StopCmd, RestartCmd: c.RestartCmd, ReloadCmd: c.ReloadCmd,
		KillCmd: c.KillCmd, VersionCmd: c.VersionCmd, HealthCmd: c.HealthCmd,
		Type: int(pol.AutoType), CPULmt: p.Spec.Resource.CPU, MemLmt: p.Spec.Resource.Mem,
		User: user, ValueKey: p.Key(), StartCheckBeginTime: pol.StartCheckSecs,
		StartCheckEndTime: pol.StartCheckEndSecs, OpTimeOut: pol.OpTimeout,
		OperateType: int(op), Timestamp: ts, GSEProc: h,
	}
}

// loadRegistry reads path; a missing file is an empty registry.
func loadRegistry(path string) ([]procRecord, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read hosting registry: %w", err)
	}
	var f registryFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("hosting registry %s: %w", path, err)
	}
	return f.Proc, nil
}

// writeRegistry writes an encoded registry (regEncoder: compact, the
// whole registry at every write, for up to thousands of processes)
// atomically (kept.WriteFile).
func writeRegistry(path string, b []byte) error {
	if err := kept.WriteFile(path, b); err != nil {
		return fmt.Errorf("hosting registry: %w", err)
	}
	return nil
}
