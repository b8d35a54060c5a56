package model

import "time"

// ResultTable is a task's results by target index, compact: a Result is
// 272 bytes, most of it what every result of the task or of one of its
// processes shares (task id, host and process key, which its target
// holds; op, state, value key and the definition's identity, a few
// distinct sets a task). A row keeps the rest and the index of its shared
// set (its shape): 96 bytes. The engine's run and the memory store keep
// their results so (one form for both); a task over 228,000 processes
// held 62 MB of results in each. Get gives a result back whole, as it was
// set. The zero ResultTable holds no row; Make sizes it.
type ResultTable struct {
	rows   []resultRow // by target index
	shapes Interned[resultShape]
	// agentIDs are the agent ids of the results naming their host by
	// another than their target's (resultRow.agent), by target index.
	agentIDs map[int32]string
}

// resultRow is one target's result: shape is its resultShape's index + 1
// (0: no result set).
type resultRow struct {
	status            *ProcStatus
	started, finished time.Time
	seq               int64
	code              int
	msg               string
	shape             uint32
	hosted            bool
	agent             bool // AgentID is agentIDs', not the target's
}

// resultShape is what a task's results of one process and state share.
type resultShape struct {
	taskID   string
	state    ResultState
	op       OpType
	valueKey string
	proc     ResultProc
}

// MakeResultTable is a table of n targets, none with a result yet.
func MakeResultTable(n int) ResultTable {
	return ResultTable{rows: make([]resultRow, n)}
}

// Len is the number of targets.
func (t *ResultTable) Len() int { return len(t.rows) }

// Set keeps r as the result of target i, tg (whose host and process r's
// are: they are not kept); isNew is whether target i had no result yet.
func (t *ResultTable) Set(i int, tg *Target, r *Result) (isNew bool) {
	row := &t.rows[i]
	isNew = row.shape == 0
	*row = resultRow{status: r.Status, started: r.Started, finished: r.Finished, seq: r.Seq, code: r.Code,
		msg: r.Message, hosted: r.Hosted,
		shape: t.shapes.ID(resultShape{taskID: r.TaskID, state: r.State, op: r.Op, valueKey: r.ValueKey, proc: r.Proc}) + 1}
	if r.AgentID != tg.AgentID {
		if t.agentIDs == nil {
			t.agentIDs = map[int32]string{}
		}
		t.agentIDs[int32(i)] = r.AgentID
		row.agent = true
	} else if t.agentIDs != nil {
		delete(t.agentIDs, int32(i))
	}
	return isNew
}

// Get is the result of target i, tg (ok false: none set).
func (t *ResultTable) Get(i int, tg *Target) (r Result, ok bool) {
	row := &t.rows[i]
	if row.shape == 0 {
		return Result{}, false
	}
	sh := &t.shapes.Values[row.shape-1]
	r = Result{TaskID: sh.taskID, Seq: row.seq, Host: tg.Host, ProcKey: tg.ProcKey, ValueKey: sh.valueKey,
		AgentID: tg.AgentID, Op: sh.op, State: sh.state, Code: row.code, Message: row.msg, Proc: sh.proc,
		Hosted: row.hosted, Status: row.status, Started: row.started, Finished: row.finished}
	if row.agent {
		r.AgentID = t.agentIDs[int32(i)]
	}
	return r, true
}

// State is the state of target i's result ("": none set).
func (t *ResultTable) State(i int) ResultState {
	if s := t.rows[i].shape; s != 0 {
		return t.shapes.Values[s-1].state
	}
	return ""
}

// Seq is the Seq of target i's result (0: none set, or not final).
func (t *ResultTable) Seq(i int) int64 { return t.rows[i].seq }
