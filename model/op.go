// Package model is gseproc's domain: operation types, process definitions,
// hosts, tasks, per-host results, error codes and validation. It does no I/O.
package model

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// OpType is an operation on a process, numbered as the API documents number it.
type OpType int

// The operation types of operate_proc / operate_process / proc operate.
const (
	OpStart      OpType = 0
	OpStop       OpType = 1
	OpStatus     OpType = 2
	OpRegister   OpType = 3 // register hosting ("auto"): the agent supervises the process
	OpUnregister OpType = 4 // cancel hosting ("noauto")
	OpRestart    OpType = 7
	OpReload     OpType = 8
	OpKill       OpType = 9
)

type opInfo struct {
	name string
	desc string
}

var ops = map[OpType]opInfo{
	OpStart:      {"start", "run start_cmd; on success the agent hosts the process"},
	OpStop:       {"stop", "run stop_cmd; on success hosting is cancelled"},
	OpStatus:     {"status", "report pid, state, hosting and usage; changes nothing"},
	OpRegister:   {"register", "host the process: restart it on abnormal exit, stop it over its cpu/mem limits"},
	OpUnregister: {"unregister", "stop hosting the process; it keeps running"},
	OpRestart:    {"restart", "run restart_cmd (or stop then start)"},
	OpReload:     {"reload", "run reload_cmd so the process re-reads its configuration"},
	OpKill:       {"kill", "run kill_cmd, or SIGKILL the process group; hosting is cancelled"},
}

// AllOps lists the valid op types in numeric order.
func AllOps() []OpType {
	out := make([]OpType, 0, len(ops))
	for op := range ops {
		out = append(out, op)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Valid reports whether op is one of the documented op types.
func (op OpType) Valid() bool { _, ok := ops[op]; return ok }

// String is the op's name ("start"), or "op(N)" for an unknown number.
func (op OpType) String() string {
	if i, ok := ops[op]; ok {
		return i.name
	}
	return "op(" + strconv.Itoa(int(op)) + ")"
}

// Describe says in one line what the op does.
func (op OpType) Describe() string { return ops[op].desc }

// Destructive reports whether the op takes a running process away.
func (op OpType) Destructive() bool {
	return op == OpStop || op == OpKill || op == OpUnregister
}

// Mutating reports whether the op changes anything on the host (all but status).
func (op OpType) Mutating() bool { return op != OpStatus }

// ParseOp accepts an op name ("restart", also "check", "auto", "noauto" as the
// English documents call them) or its op_type number.
func ParseOp(s string) (OpType, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if n, err := strconv.Atoi(s); err == nil {
		op := OpType(n)
		if !op.Valid() {
			return 0, fmt.Errorf("op_type %d is not one of %s", n, opList())
		}
		return op, nil
	}
	switch s {
	case "check":
		return OpStatus, nil
	case "auto":
		return OpRegister, nil
	case "noauto":
		return OpUnregister, nil
	}
	for op, i := range ops {
		if i.name == s {
			return op, nil
		}
	}
	return 0, fmt.Errorf("unknown op %q: want one of %s", s, opList())
}

func opList() string {
	var parts []string
	for _, op := range AllOps() {
		parts = append(parts, fmt.Sprintf("%d %s", int(op), op))
	}
	return strings.Join(parts, ", ")
}

// ManageOp is manage_proc's op_type: 1 register hosting, 2 unregister.
type ManageOp int

// ToOpType maps manage_proc's 1/2 onto op types 3/4.
func (m ManageOp) ToOpType() (OpType, bool) {
	switch m {
	case 1:
		return OpRegister, true
	case 2:
		return OpUnregister, true
	}
	return 0, false
}

// AutoType is how a hosted process runs ("type" / "auto_type").
type AutoType int

// Hosting types.
const (
	AutoPeriodic AutoType = 0 // run every cycle_time seconds
	AutoResident AutoType = 1 // keep running; restart on abnormal exit
	AutoOneShot  AutoType = 2 // run once; not brought back after a clean exit
)

// Valid reports whether t is 0, 1 or 2.
func (t AutoType) Valid() bool { return t >= AutoPeriodic && t <= AutoOneShot }

func (t AutoType) String() string {
	switch t {
	case AutoPeriodic:
		return "periodic"
	case AutoResident:
		return "resident"
	case AutoOneShot:
		return "one-shot"
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}
