package ui

import (
	"math/bits"
	"time"

	"gseproc/model"
)

// results is a task's results as the watch keeps them: one fixed-size row
// a (host, process), whose repeated values (host, process key, state,
// message, the definition's identity, the status's strings) are indexes
// into tables holding each distinct value once. A 228,000-result task
// held a model.Result (and its status) a row, each with its own strings
// when decoded from a server: ~80 MB of the console at 100,000 hosts.
// result gives a row back whole, as it arrived. A backend in the
// console's process whose statuses may be kept as they are
// (backend.SharesStatuses: the engine, which holds them anyway) has them
// kept so (kept), not copied into stats.
type results struct {
	strs   strtab
	hosts  hostTab
	extras model.Interned[resultExtra]
	stats  []compactStatus
	shapes model.Interned[statusShape]
	kept   []*model.ProcStatus // the statuses as handed over, with keep
	keep   bool
	rows   []compactResult
	index  rowIndex
}

// pairKey is a row's (host, process).
type pairKey struct{ host, proc uint32 }

// compactResult is one row: indexes into the tables, numbers, and times
// as Unix nanoseconds (0: the zero time).
type compactResult struct {
	seq, code         int64
	started, finished int64
	host, proc        uint32
	state, msg        uint32 // strs
	extra             uint32 // extras
	status            uint32 // stats (or kept) index + 1; 0: none
	rank              int8   // rowRank, kept for the ordering
	hosted            bool
}

// resultExtra is what a task's results mostly share: the task, the op,
// the definition's identity, the value key and the agent id the request
// named the host by.
type resultExtra struct {
	task, valueKey, agentID string
	op                      model.OpType
	proc                    model.ResultProc
}

// compactStatus is a status result's model.ProcStatus: what differs from
// host to host, and the index of the rest (shapes).
type compactStatus struct {
	pid                         int64
	start                       int64 // Unix ns, 0: the zero time
	register, lastStart, report int64
	cpu, mem                    float64
	rss                         uint64
	shape                       uint32
}

// statusShape is what a process's statuses mostly share: its names,
// state, version, command line, message (strs indexes), counts, hosting.
type statusShape struct {
	procKey, procName, state, ver, cmdline, msg uint32
	restarts, exit, threads                     int64
	hosted                                      bool
}

// strtab holds each distinct string once; index 0 is "".
type strtab struct {
	ix    map[string]uint32
	s     []string
	last  string // the last string looked up, and its index: results
	lastI uint32 // arrive in runs of the same process and state
}

func (t *strtab) id(s string) uint32 {
	if s == "" {
		return 0
	}
	if s == t.last && t.lastI != 0 {
		return t.lastI
	}
	i, ok := t.ix[s]
	if !ok {
		if t.ix == nil {
			t.ix, t.s = map[string]uint32{}, []string{""}
		}
		i = uint32(len(t.s))
		t.ix[s] = i
		t.s = append(t.s, s)
	}
	t.last, t.lastI = s, i
	return i
}

func (t *strtab) str(i uint32) string {
	if i == 0 {
		return ""
	}
	return t.s[i]
}

// newResults makes room for n rows (and their statuses, for a status op:
// a table of 228,000 grown by doubling held up to twice that); keep: the
// statuses are kept as they are handed over (backend.SharesStatuses).
func newResults(n int, status, keep bool) *results {
	t := &results{rows: make([]compactResult, 0, n), keep: keep}
	t.index.grow(nil, n)
	switch {
	case status && keep:
		t.kept = make([]*model.ProcStatus, 0, n)
	case status:
		t.stats = make([]compactStatus, 0, n)
	}
	return t
}

func (t *results) len() int { return len(t.rows) }

// cap is the number of rows the table has room for.
func (t *results) cap() int { return cap(t.rows) }

// find is the row of (h, proc).
// late reports whether r is a non-final update of a row already final:
// a late update, which never undoes a final one. i is r's row when found.
func (t *results) late(r *model.Result) (i int, found, late bool) {
	i, found = t.find(r.Host, r.ProcKey)
	return i, found, found && t.state(i).Final() && !r.State.Final()
}

func (t *results) find(h model.Host, proc string) (int, bool) {
	hi, ok := t.hosts.find(h)
	if !ok {
		return 0, false
	}
	pi, ok := t.strs.ix[proc]
	if !ok {
		return 0, false
	}
	return t.index.find(t.rows, pairKey{hi, pi})
}

// put stores r in its (host, process)'s row, added when new; it returns
// the row and whether it is new.
func (t *results) put(r *model.Result) (int, bool) {
	k := pairKey{t.hosts.id(r.Host), t.strs.id(r.ProcKey)}
	i, ok := t.index.find(t.rows, k)
	if !ok {
		i = len(t.rows)
		t.rows = append(t.rows, compactResult{host: k.host, proc: k.proc})
		t.index.add(t.rows, i)
	}
	c := &t.rows[i]
	slot := c.status // an updated row's status is written over its last one
	*c = compactResult{seq: r.Seq, code: int64(r.Code), started: unixNano(r.Started), finished: unixNano(r.Finished),
		host: k.host, proc: k.proc, state: t.strs.id(string(r.State)), msg: t.strs.id(r.Message),
		extra: t.extras.ID(resultExtra{task: r.TaskID, valueKey: r.ValueKey, agentID: r.AgentID, op: r.Op, proc: r.Proc}),
		rank:  int8(rowRank(r)), hosted: r.Hosted}
	if st := r.Status; st != nil && t.keep {
		if slot == 0 {
			t.kept = append(t.kept, nil)
			slot = uint32(len(t.kept))
		}
		t.kept[slot-1] = st
		c.status = slot
	} else if st != nil {
		cs := compactStatus{pid: int64(st.PID), start: unixNano(st.StartTime), register: st.RegisterTime, lastStart: st.LastStartTime,
			report: st.ReportTime, cpu: st.CPU, mem: st.Mem, rss: st.MemRSS,
			shape: t.shapes.ID(statusShape{procKey: t.strs.id(st.ProcKey), procName: t.strs.id(st.ProcName), state: t.strs.id(string(st.State)),
				ver: t.strs.id(st.Version), cmdline: t.strs.id(st.Cmdline), msg: t.strs.id(st.Message),
				restarts: int64(st.Restarts), exit: int64(st.ExitStatus), threads: int64(st.Threads), hosted: st.Hosted})}
		if slot == 0 {
			t.stats = append(t.stats, compactStatus{})
			slot = uint32(len(t.stats))
		}
		t.stats[slot-1] = cs
		c.status = slot
	}
	return i, !ok
}

// rowIndex finds a row by its (host, process): an open-addressed table of
// row indexes + 1 (0: empty), at most half full, the keys read from the
// rows. A map by pairKey was ~7 MB of a 228,000-result watch; this is 2.
type rowIndex struct {
	slots []int32
	n     int // rows indexed
}

// slot is where k's probe starts in a table of size slots (a power of two).
func (x *rowIndex) slot(k pairKey, size int) int {
	h := (uint64(k.host)<<32 | uint64(k.proc)) * 0x9e3779b97f4a7c15
	return int(h >> (64 - bits.Len(uint(size-1))))
}

// find is the row of k among rows.
func (x *rowIndex) find(rows []compactResult, k pairKey) (int, bool) {
	size := len(x.slots)
	if size == 0 {
		return 0, false
	}
	for j := x.slot(k, size); ; j = (j + 1) & (size - 1) {
		r := x.slots[j]
		if r == 0 {
			return 0, false
		}
		if c := &rows[r-1]; c.host == k.host && c.proc == k.proc {
			return int(r - 1), true
		}
	}
}

// add indexes row i of rows (its key not indexed yet).
func (x *rowIndex) add(rows []compactResult, i int) {
	if 2*(x.n+1) > len(x.slots) {
		x.grow(rows, 2*(x.n+1))
	}
	x.put(rows, i)
	x.n++
}

func (x *rowIndex) put(rows []compactResult, i int) {
	size := len(x.slots)
	k := pairKey{rows[i].host, rows[i].proc}
	j := x.slot(k, size)
	for x.slots[j] != 0 {
		j = (j + 1) & (size - 1)
	}
	x.slots[j] = int32(i + 1)
}

// grow makes room for n rows (at least), the first x.n of rows indexed
// again.
func (x *rowIndex) grow(rows []compactResult, n int) {
	size := 1 << bits.Len(uint(2*max(n, 8)-1))
	if size <= len(x.slots) {
		return
	}
	x.slots = make([]int32, size)
	for i := range x.n {
		x.put(rows, i)
	}
}

// Row accessors: what ordering, counting and drawing read without making
// the result whole.
func (t *results) host(i int) model.Host { return t.hosts.host(t.rows[i].host) }
func (t *results) proc(i int) string     { return t.strs.str(t.rows[i].proc) }
func (t *results) state(i int) model.ResultState {
	return model.ResultState(t.strs.str(t.rows[i].state))
}
func (t *results) message(i int) string     { return t.strs.str(t.rows[i].msg) }
func (t *results) code(i int) int           { return int(t.rows[i].code) }
func (t *results) rank(i int) int8          { return t.rows[i].rank }
func (t *results) started(i int) time.Time  { return fromUnixNano(t.rows[i].started) }
func (t *results) finished(i int) time.Time { return fromUnixNano(t.rows[i].finished) }
func (t *results) hasStatus(i int) bool     { return t.rows[i].status != 0 }
func (t *results) statusState(i int) model.ProcState {
	s := t.rows[i].status
	switch {
	case s == 0:
		return ""
	case t.keep:
		return t.kept[s-1].State
	}
	return model.ProcState(t.strs.str(t.shapes.Values[t.stats[s-1].shape].state))
}

// statusMessage is the message of row i's status ("": none).
func (t *results) statusMessage(i int) string {
	s := t.rows[i].status
	switch {
	case s == 0:
		return ""
	case t.keep:
		return t.kept[s-1].Message
	}
	return t.strs.str(t.shapes.Values[t.stats[s-1].shape].msg)
}

// statusKey is what the status columns of row i sort by, read in place
// (ok false: the row has no status).
func (t *results) statusKey(i int) (k statusKey, ok bool) {
	s := t.rows[i].status
	switch {
	case s == 0:
		return statusKey{}, false
	case t.keep:
		st := t.kept[s-1]
		return statusKey{pid: int64(st.PID), start: unixNano(st.StartTime), cpu: st.CPU, mem: st.Mem, up: st.State.Up()}, true
	}
	c := &t.stats[s-1]
	up := model.ProcState(t.strs.str(t.shapes.Values[c.shape].state)).Up()
	return statusKey{pid: c.pid, start: c.start, cpu: c.cpu, mem: c.mem, up: up}, true
}

// statusKey is a status as the watch's status columns sort it.
type statusKey struct {
	pid   int64
	start int64 // Unix ns, 0: the zero time
	cpu   float64
	mem   float64
	up    bool // its state is up (model.ProcState.Up)
}

// duration is the row's model.Result.Duration.
func (t *results) duration(i int) time.Duration {
	c := &t.rows[i]
	if c.started == 0 || c.finished == 0 {
		return 0
	}
	return time.Duration(c.finished - c.started)
}

// status is the row's status whole (nil: none).
func (t *results) status(i int) *model.ProcStatus {
	s := t.rows[i].status
	if s == 0 {
		return nil
	}
	if t.keep {
		return t.kept[s-1]
	}
	c := &t.stats[s-1]
	sh := &t.shapes.Values[c.shape]
	return &model.ProcStatus{ProcKey: t.strs.str(sh.procKey), ProcName: t.strs.str(sh.procName), State: model.ProcState(t.strs.str(sh.state)),
		PID: int(c.pid), Hosted: sh.hosted, StartTime: fromUnixNano(c.start), RegisterTime: c.register, LastStartTime: c.lastStart,
		ReportTime: c.report, CPU: c.cpu, Mem: c.mem, MemRSS: c.rss, Restarts: int(sh.restarts), ExitStatus: int(sh.exit),
		Version: t.strs.str(sh.ver), Cmdline: t.strs.str(sh.cmdline), Threads: int(sh.threads), Message: t.strs.str(sh.msg)}
}

// result is row i whole, as it was put.
func (t *results) result(i int) model.Result {
	c := &t.rows[i]
	e := &t.extras.Values[c.extra]
	return model.Result{TaskID: e.task, Seq: c.seq, Host: t.hosts.host(c.host), ProcKey: t.strs.str(c.proc), ValueKey: e.valueKey,
		AgentID: e.agentID, Op: e.op, State: model.ResultState(t.strs.str(c.state)), Code: int(c.code), Message: t.strs.str(c.msg),
		Proc: e.proc, Hosted: c.hosted, Status: t.status(i), Started: fromUnixNano(c.started), Finished: fromUnixNano(c.finished)}
}

// unixNano is t in Unix nanoseconds, 0 for the zero time (an instant at
// exactly the epoch reads back as the zero time: no result has one).
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func (c *compactResult) pairKey() pairKey { return pairKey{c.host, c.proc} }
