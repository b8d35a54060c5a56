package ui

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/progress"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"gseproc/backend"
	"gseproc/backend/server/wire"
	"gseproc/model"
)

// watchPage is one task's live per-host table: results arrive through
// backend.Watch, drained in batches; failures sort first; a summary line
// and a progress bar sit on top. The subscription ends when the page closes.
type watchPage struct {
	s          *shared
	id         int
	task       model.Task
	res        *results // one row a (host, process): its last result
	rowsWant   int      // the rows the task will have (its targets): room made once, for them all
	shown      []int    // row indexes, sorted, filtered
	failedOnly bool
	// filter finds rows by host, process, state, code or message (/);
	// match is its value compiled, applied with failedOnly.
	filter listFilter
	match  cellMatcher
	dirty  bool // shown is to be rebuilt whole (the filter changed)
	// moved are the rows added or whose rank changed since shown was
	// ordered (marked in moving): only they are placed again, merged
	// into the rest, which keeps its order (a row's host and process
	// never change). A 228,000-result task re-sorted every row at each
	// batch: 38 s of CPU in BenchmarkSelectAllOp100k.
	moved  []int
	moving []bool
	spare  []int // the buffer of the next merge
	follow bool  // the operator moved the cursor: keep it on its row
	// sort is the column chosen with s/S (col < 0: the default order,
	// failures first); sortKey is that column's key (watchSortKey).
	sort        sortState
	sortKey     watchSortKey
	list        vlist
	counts      model.Counts
	ctx         context.Context
	cancel      context.CancelFunc
	loaded      bool
	cancelAsked bool  // the operator cancelled the task from here
	err         error // the task could not be loaded
	streaming   bool  // the Watch channel is open
	ticking     bool
	bar         progress.Model
	stats       watchStats // durations and results per second (watchstats.go), kept as results arrive; seconds count from task.Created (setTask)
	// roll is a rolling task's roll as last read (refreshed every tick
	// while the task runs; rollLoading: a read is on its way).
	roll        *model.RollView
	rollLoading bool
	w, h        int
}

type (
	watchInitMsg struct {
		id   int
		view backend.TaskView
		rows *results // the view's results, made rows as they were read
		ch   <-chan model.Result
		err  error
	}
	watchBatchMsg struct {
		id      int
		results []model.Result
		ch      <-chan model.Result
		closed  bool
	}
	watchTaskMsg struct {
		id   int
		task model.Task
		roll *model.RollView
		err  error
	}
	// watchRolledMsg: the backend took a pause, resume or abort.
	watchRolledMsg struct {
		id  int
		act model.RollAction
	}
	watchTickMsg struct{ id int }
	// watchCancelledMsg: the backend accepted the cancel; view is the
	// task right after it, without its results.
	watchCancelledMsg struct {
		id   int
		view backend.TaskView
	}
)

func (m watchInitMsg) pageID() int   { return m.id }
func (m watchBatchMsg) pageID() int  { return m.id }
func (m watchTaskMsg) pageID() int   { return m.id }
func (m watchTickMsg) pageID() int   { return m.id }
func (m watchRolledMsg) pageID() int { return m.id }
func (m watchCancelledMsg) pageID() int {
	return m.id
}

func newWatchPage(s *shared, t model.Task) *watchPage {
	ctx, cancel := context.WithCancel(s.ctx)
	bar := progress.New(progress.WithSolidFill(s.theme.ProgressFull), progress.WithColorProfile(s.theme.Profile),
		progress.WithFillCharacters('█', '░'))
	bar.EmptyColor = s.theme.ProgressEmpty
	bar.ShowPercentage = false // drawn by the page, rounded down: 100% only when all are done
	// Room for a row per target from the start (a 228,000-target task
	// grew them by copying, half the time of applying its results), made
	// by Init's read of the results, which the page then takes as its
	// table: made here as well, a task over 100,000 hosts had two tables
	// of room for all its rows (33 MB each) at the embedded console's
	// peak.
	n := min(max(t.Targets, 0), 1<<20)
	return &watchPage{s: s, id: s.newID(), task: t, res: newResults(0, t.Op == model.OpStatus, backend.SharesStatuses(s.be)), rowsWant: n, moving: make([]bool, 0, n), sort: unsorted(),
		ctx: ctx, cancel: cancel, bar: bar, filter: newListFilter("host:10.0.1 state=failed proc=nginx message:refused · other words: any column")}
}

func (p *watchPage) ID() int { return p.id }
func (p *watchPage) Title() string {
	if p.task.Created.IsZero() {
		return "task"
	}
	return p.task.Op.String() + " task " + p.task.Created.Local().Format("15:04:05")
}
func (p *watchPage) Capturing() bool { return p.filter.typing }
func (p *watchPage) Close()          { p.cancel() }
func (p *watchPage) Resume() tea.Cmd { return p.tick() }

// Init loads what the task has so far, then subscribes from the last final
// result it saw (Watch replays anything newer, so nothing is missed). The
// results are made rows as they are read (backend.TaskResults): a task
// over 100,000 hosts read whole first held ~218,000 model.Results besides
// the rows, the remote console's peak.
func (p *watchPage) Init() tea.Cmd {
	ctx, be, id, tid := p.ctx, p.s.be, p.id, p.task.ID
	n, status, keep := p.rowsWant, p.task.Op == model.OpStatus, backend.SharesStatuses(be)
	load := func() tea.Msg {
		rows := newResults(n, status, keep)
		var after int64
		v, err := backend.TaskResults(ctx, be, tid, func(r *model.Result) {
			if r.Seq > after {
				after = r.Seq
			}
			if _, _, late := rows.late(r); !late {
				rows.put(r)
			}
		})
		if err != nil {
			return watchInitMsg{id: id, err: err}
		}
		v.Results = nil
		var ch <-chan model.Result
		if v.Task.Status == model.TaskRunning || v.Task.Status == model.TaskPending {
			ch, err = be.Watch(ctx, tid, after)
		}
		return watchInitMsg{id: id, view: v, rows: rows, ch: ch, err: err}
	}
	return tea.Batch(load, p.tick())
}

func (p *watchPage) tick() tea.Cmd {
	if p.s.static || p.ticking || taskFinal(p.task.Status) {
		return nil
	}
	p.ticking = true
	id := p.id
	return tea.Tick(time.Second, func(time.Time) tea.Msg { return watchTickMsg{id} })
}

func taskFinal(s model.TaskStatus) bool {
	return s == model.TaskDone || s == model.TaskFailed || s == model.TaskCanceled
}

// drain reads the next batch of results from ch into buf's room: the
// batch before, applied (apply keeps nothing of it), or nil.
func (p *watchPage) drain(ch <-chan model.Result, buf []model.Result) tea.Cmd {
	id, max, win := p.id, p.s.batchMax, p.s.batchWin
	return func() tea.Msg {
		rs, closed := drainInto(buf, ch, max, win)
		return watchBatchMsg{id: id, results: rs, ch: ch, closed: closed}
	}
}

// releaseMin is the fewest rows of a watch whose end gives the process's
// unused memory back (Options.ReleaseMemory): an op over fewer grows the
// heap too little to be worth a collection of all of it.
const releaseMin = 10_000

// releaseMemory gives the process's unused memory back once a large op's
// live results have ended (nil: not large, or no ReleaseMemory). After a
// status op over 100,000 hosts the embedded console's RSS was 446 MB, 292
// MB once given back, for one collection of its ~260 MB live heap.
func (p *watchPage) releaseMemory() tea.Cmd {
	release := p.s.release
	if release == nil || p.res.len() < releaseMin {
		return nil
	}
	return func() tea.Msg {
		release()
		return nil
	}
}

func (p *watchPage) refreshTask() tea.Cmd {
	ctx, be, id, tid := p.ctx, p.s.be, p.id, p.task.ID
	return func() tea.Msg {
		// The task and its roll, without its results (they came through
		// Watch): a finished task's 218,000 results read whole were the
		// remote console's biggest reply.
		t, err := backend.TaskSummary(ctx, be, tid)
		return watchTaskMsg{id: id, task: t.Task, roll: t.Roll, err: err}
	}
}

// setTask takes the task as it is now; when its creation time, which the
// stats count seconds from, changed (the page opened on a task not loaded
// yet), the stats are counted again over the rows.
func (p *watchPage) setTask(t model.Task) {
	moved := !p.task.Created.Equal(t.Created)
	p.task = t
	if moved {
		p.stats = taskStats(p.res, t.Created)
	}
}

func (p *watchPage) SetSize(w, h int) {
	p.w, p.h = w, h
	p.filter.input.Width = max(w-4, 10)
	p.bar.Width = max(w-7, 10)
	p.list.setHeight(h - 7 - p.rollLines())
}

// setRoll takes the roll as read; the table gives it its lines.
func (p *watchPage) setRoll(v *model.RollView) {
	if v == nil {
		return
	}
	p.roll = v
	p.SetSize(p.w, p.h)
}

func (p *watchPage) Help() keyHelp {
	k := p.s.keys
	h := keyHelp{
		short: []binding{k.Open, k.FailedOnly, k.Retry, k.CancelTask},
		full:  [][]binding{k.nav(), {k.Open, k.FailedOnly, k.Retry, k.CancelTask}, {k.Filter, k.Sort, k.SortReverse, k.Logs, k.Reload, k.Tasks}},
	}
	if p.task.Rollout != nil {
		h.short = append(h.short, k.PauseRoll, k.AbortRoll)
		h.full = append(h.full, []binding{k.PauseRoll, k.AbortRoll})
	}
	return h
}

// apply merges results into the table.
func (p *watchPage) apply(rs []model.Result) {
	for k := range rs {
		r := &rs[k]
		i, ok, late := p.res.late(r)
		switch {
		case late:
			continue // a late non-final update never undoes a final one
		case ok:
			old := p.res.state(i)
			p.counts.Add(old, -1)
			p.stats.add(old, p.res.started(i), p.res.finished(i), p.task.Created, -1)
			rank := p.res.rank(i)
			p.res.put(r)
			// Under a chosen column the row's key, and under a filter
			// its match, may have changed with any update (its state,
			// code, message, time): placed (and matched) again.
			if p.res.rank(i) != rank || p.sort.col >= 0 || len(p.match.terms) > 0 {
				p.move(i)
			}
		default:
			i, _ := p.res.put(r)
			p.moving = append(p.moving, false)
			p.move(i)
		}
		p.counts.Add(r.State, 1)
		p.stats.add(r.State, r.Started, r.Finished, p.task.Created, 1)
	}
}

// applyRows merges rows read before (Init's): taken as the table when the
// page has none yet (with its room for the task's rows, even when it has
// none yet), else applied one by one.
func (p *watchPage) applyRows(t *results) {
	if t == nil {
		return
	}
	if p.res.len() > 0 {
		for i := range t.len() {
			p.apply([]model.Result{t.result(i)})
		}
		return
	}
	p.res = t
	for i := range t.len() {
		p.moving = append(p.moving, false)
		p.move(i)
		st := t.state(i)
		p.counts.Add(st, 1)
		p.stats.add(st, t.started(i), t.finished(i), p.task.Created, 1)
	}
}

// move marks row i to be placed again by the next resort.
func (p *watchPage) move(i int) {
	if !p.moving[i] {
		p.moving[i] = true
		p.moved = append(p.moved, i)
	}
}

// stateRank sorts failures first, then running, pending, successes.
func stateRank(s model.ResultState) int {
	switch {
	case s.Final() && !s.OK():
		return 0
	case s == model.StateRunning:
		return 1
	case s == model.StatePending || s == "":
		return 2
	}
	return 3
}

// rowRank is stateRank, with the successful status results of a process
// that is not up (stopped, exited, fatal, backoff) right after the failures.
func rowRank(r *model.Result) int {
	s := stateRank(r.State) * 2
	if s == 0 {
		return 0
	}
	if r.Status != nil && r.State.OK() && !r.Status.State.Up() {
		return 1
	}
	return s
}

// before orders rows: by the chosen column when there is one (s/S), and
// within it (or without one) by rank (failures first), then host, then
// process. Every key is read from the row in O(1), so the merge of the
// moved rows (resort) works under any column.
func (p *watchPage) before(a, b int) bool {
	t := p.res
	if p.sort.col >= 0 {
		if c := p.sort.apply(p.compareKey(a, b)); c != 0 {
			return c < 0
		}
	}
	ra, rb := &t.rows[a], &t.rows[b]
	if ra.rank != rb.rank {
		return ra.rank < rb.rank
	}
	if ra.host != rb.host {
		if c := t.hosts.compare(ra.host, rb.host); c != 0 {
			return c < 0
		}
	}
	return t.strs.str(ra.proc) < t.strs.str(rb.proc)
}

// resort brings the shown order up to date, keeping the cursor on the same
// row: the whole list when the filter changed (dirty), else only the rows
// moved since, sorted among themselves and merged into the others, which
// are still in order: O(rows + moved·log moved) a batch instead of a sort
// of every row.
func (p *watchPage) resort() {
	if !p.dirty && len(p.moved) == 0 {
		return
	}
	var keep = -1
	if p.follow && p.list.cursor >= 0 && p.list.cursor < len(p.shown) {
		keep = p.shown[p.list.cursor]
	}
	var cells []string
	in := func(i int) bool {
		if p.failedOnly && stateRank(p.res.state(i)) != 0 {
			return false
		}
		if len(p.match.terms) == 0 {
			return true
		}
		cells = p.matchCells(i, cells)
		return p.match.match(cells)
	}
	var shown []int
	if p.dirty {
		shown = p.shown[:0]
		for i := range p.res.len() {
			if in(i) {
				shown = append(shown, i)
			}
		}
		sort.Slice(shown, func(a, b int) bool { return p.before(shown[a], shown[b]) })
	} else {
		stay := p.shown[:0] // in place: the old order is not needed after
		for _, i := range p.shown {
			if !p.moving[i] {
				stay = append(stay, i)
			}
		}
		add := make([]int, 0, len(p.moved))
		for _, i := range p.moved {
			if in(i) {
				add = append(add, i)
			}
		}
		sort.Slice(add, func(a, b int) bool { return p.before(add[a], add[b]) })
		// Each moved row goes where a binary search over the rest puts
		// it, the rows between copied as runs: moved·log rows comparisons
		// a batch instead of one per row (2.25 s of CPU over a
		// 228,000-result task merged row by row).
		shown = slices.Grow(p.spare[:0], len(stay)+len(add))
		x := 0
		for _, a := range add {
			j := x + sort.Search(len(stay)-x, func(k int) bool { return p.before(a, stay[x+k]) })
			shown = append(append(shown, stay[x:j]...), a)
			x = j
		}
		shown = append(shown, stay[x:]...)
		p.spare = stay[:0]
	}
	for _, i := range p.moved {
		p.moving[i] = false
	}
	p.moved, p.dirty = p.moved[:0], false
	p.shown = shown
	p.list.setLen(len(shown))
	if keep >= 0 {
		for pos, i := range shown {
			if i == keep {
				p.list.cursor = pos
				p.list.clamp()
				break
			}
		}
	}
}

// watchSortKey is what a column of the watch sorts by.
type watchSortKey int

const (
	wsortHost watchSortKey = iota
	wsortProc
	wsortState
	wsortCode
	wsortMessage
	wsortTime
	wsortPID
	wsortUptime
	wsortCPU
	wsortMem
)

// watchSortKeys maps a column's title to its key.
var watchSortKeys = map[string]watchSortKey{"HOST": wsortHost, "PROC": wsortProc, "STATE": wsortState, "CODE": wsortCode,
	"MESSAGE": wsortMessage, "TIME": wsortTime, "PID": wsortPID, "UPTIME": wsortUptime, "CPU": wsortCPU, "MEM": wsortMem}

// cols are the table's columns (the status op has its own).
func (p *watchPage) cols() []column {
	if p.task.Op == model.OpStatus {
		return statusCols()
	}
	return watchCols()
}

// setSort takes a new sort (s or S): the rows are ordered again whole
// (O(n log n) on the key press, never per batch) and the cursor stays on
// its row.
func (p *watchPage) setSort(next func(*sortState)) {
	cols := p.cols()
	next(&p.sort)
	if p.sort.col >= 0 {
		p.sortKey = watchSortKeys[cols[p.sort.col].title]
	}
	p.follow = p.list.cursor >= 0 && p.list.cursor < len(p.shown)
	p.dirty = true
	p.resort()
	p.follow = p.list.cursor > 0
}

// compareKey compares rows a and b by the chosen column's key, as the
// cells draw it (an empty cell, a result not final yet, first).
func (p *watchPage) compareKey(a, b int) int {
	t := p.res
	ra, rb := &t.rows[a], &t.rows[b]
	switch p.sortKey {
	case wsortHost:
		return t.hosts.compare(ra.host, rb.host)
	case wsortProc:
		_, na, _ := model.SplitKey(t.strs.str(ra.proc))
		_, nb, _ := model.SplitKey(t.strs.str(rb.proc))
		return strings.Compare(na, nb)
	case wsortState:
		return strings.Compare(p.stateWord(a), p.stateWord(b))
	case wsortCode:
		return cmp.Compare(p.finalNum(a, ra.code), p.finalNum(b, rb.code))
	case wsortMessage:
		return strings.Compare(p.messageOf(a), p.messageOf(b))
	case wsortTime:
		return cmp.Compare(p.finalNum(a, int64(t.duration(a))), p.finalNum(b, int64(t.duration(b))))
	}
	// The status columns: a row without a process status (a failure,
	// a result to come) has an empty cell.
	sa, oka := p.statusOf(a)
	sb, okb := p.statusOf(b)
	if !oka || !okb {
		return cmp.Compare(boolInt(oka), boolInt(okb))
	}
	up := func(i int, s statusKey) int64 {
		if !s.up {
			return -1
		}
		switch p.sortKey {
		case wsortPID:
			return s.pid
		case wsortUptime:
			if s.start == 0 || t.rows[i].finished == 0 {
				return -1
			}
			return t.rows[i].finished - s.start
		}
		return 0
	}
	switch p.sortKey {
	case wsortCPU:
		return cmp.Compare(sa.cpu, sb.cpu)
	case wsortMem:
		return cmp.Compare(sa.mem, sb.mem)
	}
	return cmp.Compare(up(a, sa), up(b, sb))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// finalNum is v for a final row, -1 (an empty cell) else.
func (p *watchPage) finalNum(i int, v int64) int64 {
	if !p.res.state(i).Final() {
		return -1
	}
	return v
}

// statusOf is row i's process status as its status cells sort it: only
// of a successful result (ok false else).
func (p *watchPage) statusOf(i int) (statusKey, bool) {
	if !p.res.state(i).OK() {
		return statusKey{}, false
	}
	return p.res.statusKey(i)
}

// stateWord is the STATE cell's word: the process's state on a status
// result, else the result's.
func (p *watchPage) stateWord(i int) string {
	if p.res.hasStatus(i) && p.res.state(i).OK() {
		return string(p.res.statusState(i))
	}
	return string(p.res.state(i))
}

// messageOf is the MESSAGE cell's text (before it is made one line).
func (p *watchPage) messageOf(i int) string {
	r := p.res
	st := r.state(i)
	if r.hasStatus(i) && st.OK() {
		// Read in place: status(i) makes the whole status, an
		// allocation a comparison.
		return r.statusMessage(i)
	}
	if msg := r.message(i); msg != "" || !st.Final() {
		return msg
	}
	return model.CodeText(r.code(i))
}

// watchMatchCols are the columns a filter names (field:value).
func watchMatchCols() []column {
	return []column{{title: "HOST"}, {title: "PROC"}, {title: "STATE"}, {title: "CODE"}, {title: "MESSAGE"}}
}

// matchCells is row i as the filter reads it, in buf: the state a word
// (stateWord), the message as drawn (messageOf, made one line). Read from
// the row's fields, not its whole model.Result (nor its whole status): a
// keystroke reads every row.
func (p *watchPage) matchCells(i int, buf []string) []string {
	r := p.res
	_, proc, _ := model.SplitKey(r.proc(i))
	code, msg := "", p.messageOf(i)
	if r.state(i).Final() {
		code = strconv.Itoa(r.code(i))
	}
	if strings.ContainsAny(msg, "\n\r\t") || strings.Contains(msg, "  ") {
		msg = oneLine(msg)
	}
	return append(buf[:0], r.host(i).AgentID(), proc, p.stateWord(i), code, msg)
}

// filterKey types into the filter; the rows follow each change.
func (p *watchPage) filterKey(msg tea.KeyMsg) tea.Cmd {
	changed, cmd := p.filter.key(msg)
	if changed {
		p.refilter()
	}
	return cmd
}

func (p *watchPage) refilter() {
	p.match = newCellMatcher(p.filter.value(), watchMatchCols())
	p.dirty = true
	p.resort()
}

func (p *watchPage) Update(msg tea.Msg) tea.Cmd {
	k := p.s.keys
	switch msg := msg.(type) {
	case watchInitMsg:
		p.loaded = true
		if msg.err != nil {
			p.err = msg.err
			return errCmd("watch "+p.task.ID, msg.err)
		}
		if p.err != nil {
			p.err = nil
			p.s.resolved("watch " + p.task.ID)
		}
		p.setTask(msg.view.Task)
		p.setRoll(msg.view.Roll)
		p.applyRows(msg.rows)
		if len(msg.view.Results) > 0 && p.res.len() == 0 && p.res.cap() < p.rowsWant {
			// Results read whole (not Init's): room for all the rows first.
			p.res = newResults(p.rowsWant, p.task.Op == model.OpStatus, p.res.keep)
		}
		p.apply(msg.view.Results)
		p.resort()
		if msg.ch != nil {
			p.streaming = true
			return p.drain(msg.ch, nil)
		}
	case watchBatchMsg:
		p.apply(msg.results)
		p.resort()
		if msg.closed {
			p.streaming = false
			p.rollLoading = p.task.Rollout != nil
			return tea.Batch(p.refreshTask(), p.s.refreshInfo(), p.releaseMemory())
		}
		if p.task.Rollout != nil && !p.rollLoading && len(msg.results) > 0 {
			// Results move the roll on: read where it is (one read at a time).
			p.rollLoading = true
			return tea.Batch(p.drain(msg.ch, msg.results), p.refreshTask())
		}
		return p.drain(msg.ch, msg.results)
	case watchCancelledMsg:
		// Say what the cancel did, from the task as it is now: hosts not
		// sent the op are cancelled; those already running are told to
		// stop and report cancelled (or their outcome, if they finished
		// first).
		p.cancelAsked = true
		p.setTask(msg.view.Task)
		p.setRoll(msg.view.Roll)
		// The task's counts say how many hosts have not reported a
		// final result (the results themselves come through Watch).
		running := msg.view.Task.Counts.Pending + msg.view.Task.Counts.Running
		text := fmt.Sprintf("cancel of %s: %d not-yet-sent hosts cancelled", p.task.ID, p.task.Counts.Cancelled)
		if running > 0 {
			text += fmt.Sprintf("; %d already running told to stop", running)
		}
		return p.s.post(flashMsg{text})
	case watchTaskMsg:
		p.rollLoading = false
		if msg.err != nil {
			return errCmd("task "+p.task.ID, msg.err)
		}
		p.setTask(msg.task)
		p.setRoll(msg.roll)
	case watchRolledMsg:
		text := map[model.RollAction]string{
			model.RollPause:  "roll paused: no more hosts are sent the op (those running it finish)",
			model.RollResume: "roll resumed",
			model.RollAbort:  "roll aborted: the hosts not sent the op yet are cancelled",
		}[msg.act]
		p.rollLoading = true
		return tea.Batch(p.s.post(flashMsg{text}), p.refreshTask())
	case watchTickMsg:
		// The elapsed-time clock runs only while the task runs and its page
		// is on top; Resume starts it again.
		p.ticking = false
		if p.ctx.Err() == nil && p.s.topID == p.id {
			if p.task.Rollout != nil && !p.rollLoading && !taskFinal(p.task.Status) {
				// The roll's state (a pause, a wait) is not in the
				// results: read it with the task.
				p.rollLoading = true
				return tea.Batch(p.tick(), p.refreshTask())
			}
			return p.tick()
		}
	case tea.KeyMsg:
		if p.filter.typing {
			return p.filterKey(msg)
		}
		if p.list.navigate(k, msg) {
			p.follow = p.list.cursor > 0
			return nil
		}
		if !p.loaded {
			return p.s.notReady("the task")
		}
		switch {
		case keyIs(msg, k.Filter):
			return p.filter.start()
		case keyIs(msg, k.Back): // a filter to clear (consumesBack)
			p.filter.clear()
			p.refilter()
			return nil
		case keyIs(msg, k.Sort):
			n := len(p.cols())
			p.setSort(func(s *sortState) { s.next(n) })
			return nil
		case keyIs(msg, k.SortReverse):
			p.setSort((*sortState).reverse)
			return nil
		}
		if p.err != nil && keyIs(msg, k.Reload) && !p.streaming {
			p.loaded = false
			return p.Init()
		}
		if keyIs(msg, k.Reload) && p.task.Rollout != nil && !p.rollLoading {
			p.rollLoading = true
			return p.refreshTask()
		}
		switch {
		case keyIs(msg, k.Open):
			if p.list.cursor < len(p.shown) {
				return p.s.post(pushMsg{newResultPage(p.s, p.res.result(p.shown[p.list.cursor]))})
			}
		case keyIs(msg, k.Logs):
			if p.list.cursor < len(p.shown) {
				i := p.shown[p.list.cursor]
				return p.s.openLogs([]procOn{{p.res.proc(i), p.res.host(i)}})
			}
		case keyIs(msg, k.FailedOnly):
			p.failedOnly = !p.failedOnly
			p.dirty = true
			p.resort()
		case keyIs(msg, k.Retry):
			return p.retry()
		case keyIs(msg, k.CancelTask):
			if taskFinal(p.task.Status) {
				return p.s.post(flashMsg{"the task is already " + string(p.task.Status)})
			}
			ctx, be, tid, id := p.s.ctx, p.s.be, p.task.ID, p.id
			cancel := func() tea.Msg {
				if err := be.Cancel(ctx, tid); err != nil {
					return errMsg{"cancel " + tid, err}
				}
				// The task without its results, as Init reads it: they
				// come through Watch, and a task over 100,000 hosts read
				// whole (~218,000 results) was the cancel's peak.
				v, err := backend.TaskSummary(ctx, be, tid)
				if err != nil {
					return errMsg{"cancel " + tid + ": cancelled, but reading the task back", err}
				}
				return watchCancelledMsg{id: id, view: v}
			}
			running := p.counts.Running
			body := []string{p.task.ID,
				"Hosts the op was not sent to yet are cancelled at once.",
				fmt.Sprintf("Hosts already running it (%d now) are told to stop: the agent kills the command's process group and reports cancelled (a host that finished first reports its outcome).", running)}
			d := newDialog("Cancel task", body, "", "", true, cancel)
			return p.s.post(confirmMsg{d})
		case keyIs(msg, k.PauseRoll), keyIs(msg, k.AbortRoll):
			return p.controlRoll(keyIs(msg, k.AbortRoll))
		}
	}
	return nil
}

// retry asks, then re-runs the op on exactly the (host, process) pairs
// whose result is not OK: one task, one watch, whatever the number of
// processes.
func (p *watchPage) retry() tea.Cmd {
	var pairs []model.Target
	nss, procs, hosts := map[string]bool{}, map[string]bool{}, map[model.Host]bool{}
	for i := range p.res.len() {
		if st := p.res.state(i); !st.Final() || st.OK() {
			continue
		}
		h, proc := p.res.host(i), p.res.proc(i)
		pairs = append(pairs, model.Target{Host: h, ProcKey: proc})
		ns, name, _ := model.SplitKey(proc)
		nss[ns], procs[name], hosts[h] = true, true, true
	}
	if len(pairs) == 0 {
		return p.s.post(flashMsg{"no failed host to retry"})
	}
	if p.s.readOnly && p.task.Op.Mutating() {
		return p.s.post(flashMsg{"retry is disabled: read-only mode"})
	}
	sel := backend.Selector{Targets: pairs}
	if len(nss) == 1 {
		sel.Namespace = sortedKeys(nss)[0]
	}
	if len(procs) == 1 && len(nss) == 1 {
		sel.Name = sortedKeys(procs)[0]
	}
	run := p.s.operate(p.id, backend.OperateRequest{Op: p.task.Op, Selector: sel})
	if !p.task.Op.Mutating() {
		return run
	}
	tg := target{sel: sel, hosts: len(hosts), procs: sortedKeys(procs), nsAll: sortedKeys(nss)}
	d := confirmOp(p.s, p.task.Op, tg, run)
	d.title = "Retry " + p.task.Op.String() + " on failed hosts"
	return p.s.post(confirmMsg{d})
}

func (p *watchPage) elapsed() time.Duration {
	if p.task.Created.IsZero() {
		return 0
	}
	end := p.s.now()
	if taskFinal(p.task.Status) && !p.task.Finished.IsZero() {
		end = p.task.Finished
	}
	return end.Sub(p.task.Created)
}

func watchCols() []column {
	return []column{
		{title: "HOST", width: 17, min: 12}, {title: "PROC", width: 10, flex: true, min: 6}, {title: "STATE", width: 13, min: 11},
		{title: "CODE", width: 5, right: true}, {title: "MESSAGE", width: 16, flex: true, grow: 4}, {title: "TIME", width: 7, right: true},
	}
}

func (p *watchPage) View() string {
	t := p.s.theme
	var b strings.Builder
	c := p.counts
	total := max(p.task.Targets, c.Total())
	status := taskGlyph(p.task.Status)
	switch {
	case p.cancelAsked && !taskFinal(p.task.Status) && p.streaming:
		// Not "cancelled" while hosts still run the op.
		status = glyph{"◐", fmt.Sprintf("cancelling, %d still running", c.Pending+c.Running), styleWarn}
	case p.streaming && !taskFinal(p.task.Status):
		status = taskGlyph(model.TaskRunning)
	}
	line := fmt.Sprintf("%s %s · %d/%d finished · %s · %s", t.Title.Render(p.task.Op.String()),
		status.style(t).Render(status.text()), c.Final(), total, fmtDuration(p.elapsed()), t.Muted.Render(p.task.ID))
	b.WriteString(line + "\n")
	if p.roll != nil {
		b.WriteString(p.rollView())
	}
	counts := []string{t.OK.Render(fmt.Sprintf("✓ %d ok", c.Success+c.Skipped)), t.Error.Render(fmt.Sprintf("✗ %d failed", c.Failed))}
	if c.Timeout > 0 {
		counts = append(counts, t.Error.Render(fmt.Sprintf("◷ %d timeout", c.Timeout)))
	}
	if c.Unreachable > 0 {
		counts = append(counts, t.Error.Render(fmt.Sprintf("⊘ %d unreachable", c.Unreachable)))
	}
	if c.Cancelled > 0 {
		counts = append(counts, t.Warn.Render(fmt.Sprintf("– %d cancelled", c.Cancelled)))
	}
	if n := c.Pending + c.Running; n > 0 {
		counts = append(counts, t.Pending.Render(fmt.Sprintf("◐ %d to go", n)))
	}
	b.WriteString(strings.Join(counts, "  ") + "\n")
	pct := 0.0
	if total > 0 {
		pct = float64(c.Final()) / float64(total)
	}
	b.WriteString(p.bar.ViewAs(pct) + fmt.Sprintf(" %3d%%", c.Final()*100/max(total, 1)) + "\n")
	b.WriteString(cut(p.stats.durationLine(t, p.w), p.w) + "\n")
	b.WriteString(cut(p.stats.rateLine(t, p.w, p.elapsed()), p.w) + "\n")
	filter := "all results"
	if p.failedOnly {
		filter = "failed only (f shows all)"
	}
	if f := p.filter.value(); f != "" {
		filter = fmt.Sprintf("%d shown · filter %s", len(p.shown), t.Title.Render(f))
		if p.failedOnly {
			filter += " · failed only"
		}
	}
	// The columns inline (not p.cols()): they stay on the stack, as a
	// frame of the default order allocated nothing for them before.
	cols := watchCols()
	if p.task.Op == model.OpStatus {
		cols = statusCols()
	}
	if p.sort.col >= 0 {
		cols = p.sort.mark(cols)
	}
	order := "failures first"
	if p.task.Op == model.OpStatus {
		order = "failures and stopped processes first"
	}
	if s := p.sort.describe(cols); s != "" {
		order = s
	}
	if p.filter.typing {
		b.WriteString(p.filter.input.View() + "\n")
	} else {
		b.WriteString(t.Muted.Render(fmt.Sprintf("%s · %s · %s", filter, order, p.list.scrollInfo())) + "\n")
	}
	if p.err != nil && p.res.len() == 0 {
		return b.String() + "\n" + loadFailed(p.s, "task "+p.task.ID, p.err, p.w)
	}
	wd := layout(cols, p.w)
	b.WriteString(header(t, cols, wd))
	if !p.loaded {
		b.WriteString("\n" + t.Muted.Render("  loading…"))
	} else if len(p.shown) == 0 {
		if p.filter.value() != "" {
			b.WriteString("\n" + t.Muted.Render("  No result matches the filter (esc clears it)."))
		} else if p.failedOnly {
			b.WriteString("\n" + t.Muted.Render("  No failed host."))
		} else {
			b.WriteString("\n" + t.Muted.Render("  No result yet."))
		}
	}
	p.list.first = strings.Count(b.String(), "\n") + 1 // where a click finds the rows
	s, e := p.list.window()
	for i := s; i < e; i++ {
		if p.task.Op == model.OpStatus {
			b.WriteString("\n" + p.statusRow(p.res.result(p.shown[i]), wd, i == p.list.cursor))
			continue
		}
		r := p.res.result(p.shown[i])
		g := resultGlyph(r.State)
		code, msg, dur := "", r.Message, ""
		if r.State.Final() {
			code = fmt.Sprint(r.Code)
			dur = fmtDuration(r.Duration())
			if msg == "" {
				msg = model.CodeText(r.Code)
			}
		}
		_, proc, _ := model.SplitKey(r.ProcKey)
		cells := []string{cell(r.Host.AgentID(), wd[0], false), cell(proc, wd[1], false), cell(g.text(), wd[2], false),
			cell(code, wd[3], true), cell(oneLine(msg), wd[4], false), cell(dur, wd[5], true)}
		st := g.style(t)
		styles := []*lipgloss.Style{nil, nil, &st}
		b.WriteString("\n" + renderRow(t, i == p.list.cursor, false, cells, styles))
	}
	return b.String()
}

// statusCols are the watch's columns for the status op: the process's own
// state, pid, uptime and usage instead of the op's code.
func statusCols() []column {
	return []column{
		{title: "HOST", width: 17, min: 12}, {title: "PROC", width: 10, flex: true, min: 6}, {title: "STATE", width: 13, min: 11},
		{title: "PID", width: 7, right: true}, {title: "UPTIME", width: 7, right: true}, {title: "CPU", width: 6, right: true},
		{title: "MEM", width: 6, right: true}, {title: "MESSAGE", width: 10, flex: true, grow: 4, optional: true},
	}
}

// statusRow draws one status result: a failed one says why; a successful
// one shows the process as its agent reported it.
func (p *watchPage) statusRow(r model.Result, wd []int, cursor bool) string {
	t := p.s.theme
	_, proc, _ := model.SplitKey(r.ProcKey)
	g := resultGlyph(r.State)
	pid, up, cpu, mem, msg := "", "", "", "", ""
	switch st := r.Status; {
	case !r.State.Final() || !r.State.OK():
		msg = r.Message
		if r.State.Final() && msg == "" {
			msg = model.CodeText(r.Code)
		}
	case st == nil:
		msg = r.Message
	default:
		g = procGlyph(st.State)
		pid, up, cpu, mem, msg = "-", "-", fmt.Sprintf("%.1f%%", st.CPU), fmt.Sprintf("%.1f%%", st.Mem), st.Message
		if st.PID > 0 && st.State.Up() {
			pid = fmt.Sprint(st.PID)
		}
		if st.State.Up() && !st.StartTime.IsZero() && !r.Finished.IsZero() {
			up = fmtDuration(r.Finished.Sub(st.StartTime))
		}
	}
	cells := []string{cell(r.Host.AgentID(), wd[0], false), cell(proc, wd[1], false), cell(g.text(), wd[2], false),
		cell(pid, wd[3], true), cell(up, wd[4], true), cell(cpu, wd[5], true), cell(mem, wd[6], true), cell(oneLine(msg), wd[7], false)}
	st := g.style(t)
	return renderRow(t, cursor, false, cells, []*lipgloss.Style{nil, nil, &st})
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// ---- one host's full result ---------------------------------------------

type resultPage struct {
	textView
	r model.Result
}

func newResultPage(s *shared, r model.Result) *resultPage {
	p := &resultPage{r: r}
	p.textView = newTextView(s, p.content)
	return p
}

func (p *resultPage) Title() string { return p.r.Host.AgentID() }

func (p *resultPage) content() string {
	t := p.s.theme
	r := p.r
	g := resultGlyph(r.State)
	kv := func(k, v string) string { return t.Muted.Render(fmt.Sprintf("%-9s", k)) + " " + v + "\n" }
	var b strings.Builder
	b.WriteString(kv("host", r.Host.AgentID()))
	b.WriteString(kv("process", r.ProcKey))
	if r.ValueKey != "" {
		b.WriteString(kv("value_key", r.ValueKey))
	}
	b.WriteString(kv("op", fmt.Sprintf("%s (%d)", r.Op, int(r.Op))))
	b.WriteString(kv("state", g.style(t).Render(g.text())))
	b.WriteString(kv("code", fmt.Sprintf("%d %s", r.Code, model.CodeText(r.Code))))
	b.WriteString(kv("message", r.Message))
	if !r.Started.IsZero() {
		b.WriteString(kv("started", r.Started.UTC().Format("2006-01-02 15:04:05.000Z")))
	}
	if !r.Finished.IsZero() {
		b.WriteString(kv("finished", r.Finished.UTC().Format("2006-01-02 15:04:05.000Z")))
		b.WriteString(kv("took", fmtDuration(r.Duration())))
	}
	b.WriteString(kv("task", r.TaskID))
	b.WriteString("\n" + t.Title.Render("content") + "\n")
	b.WriteString(prettyJSON(wire.Content(r))) // as the API's result queries show it
	return b.String()
}

// prettyJSON indents JSON text, keeping its key order; anything else is
// shown as it is.
func prettyJSON(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(empty)"
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(s), "", "  "); err != nil {
		return s
	}
	return buf.String()
}

func (p *watchPage) listPtr() *vlist { return &p.list }

// controlRoll pauses or resumes the roll (p), or aborts it (X, after a
// confirmation).
func (p *watchPage) controlRoll(abort bool) tea.Cmd {
	switch {
	case p.task.Rollout == nil:
		return p.s.post(flashMsg{"not a rolling task: x cancels it"})
	case taskFinal(p.task.Status):
		return p.s.post(flashMsg{"the task is already " + string(p.task.Status)})
	case p.s.readOnly:
		return p.s.post(flashMsg{"read-only mode"})
	}
	act := model.RollPause
	switch {
	case abort:
		act = model.RollAbort
	case p.roll != nil && (p.roll.State == model.RollStatePaused || p.roll.State == model.RollStateWaitingResume):
		act = model.RollResume
	}
	ctx, be, tid, id := p.s.ctx, p.s.be, p.task.ID, p.id
	run := func() tea.Msg {
		if _, err := be.ControlRoll(ctx, tid, act); err != nil {
			return errMsg{string(act) + " " + tid, err}
		}
		return watchRolledMsg{id: id, act: act}
	}
	if !abort {
		return run
	}
	body := []string{p.task.ID, "The roll stops for good: the hosts not sent the op yet are cancelled.",
		"Hosts running it now finish (x cancels them too)."}
	return p.s.post(confirmMsg{newDialog("Abort roll", body, "", "", true, run)})
}

// rollLines is how many lines the roll takes above the table.
func (p *watchPage) rollLines() int {
	if p.roll == nil {
		return 0
	}
	return 2
}

// rollView draws the roll: its state and why, its threshold, and a
// strip of its batches (✓ done, ▶ running, · waiting, – not sent), or
// their counts when they do not fit.
func (p *watchPage) rollView() string {
	t, r := p.s.theme, p.roll
	st := t.Pending
	switch r.State {
	case model.RollStateStopped, model.RollStateCancelled:
		st = t.Error
	case model.RollStatePaused, model.RollStateWaitingResume, model.RollStateWaiting:
		st = t.Warn
	case model.RollStateDone:
		st = t.OK
	}
	reason := r.Reason
	if r.State == model.RollStateWaiting && !r.Until.IsZero() {
		reason += fmt.Sprintf(" (%s left)", fmtDuration(max(r.Until.Sub(p.s.now()), 0)))
	}
	line := t.Title.Render("roll ") + st.Render(strings.ReplaceAll(r.State, "_", " ")+": "+reason) + t.Muted.Render(" · "+r.Threshold)
	var done, running, waiting, notSent int
	var strip strings.Builder
	for _, b := range r.Batches {
		g := "·"
		switch b.State {
		case model.RollStateDone:
			done++
			g = "✓"
			if b.Bad > 0 {
				g = "✗"
			}
		case model.RollStateRunning:
			running++
			g = "▶"
		case model.BatchNotSent:
			notSent++
			g = "–"
		default:
			waiting++
		}
		strip.WriteString(g)
	}
	batches := fmt.Sprintf("batches %d: %d done, %d running, %d waiting", len(r.Batches), done, running, waiting)
	if notSent > 0 {
		batches += fmt.Sprintf(", %d not sent", notSent)
	}
	if s := strip.String(); len(r.Batches) <= p.w-len(batches)-3 {
		batches += "  " + s
	}
	k := p.s.keys
	if !taskFinal(p.task.Status) {
		pause := "pause"
		if r.State == model.RollStatePaused || r.State == model.RollStateWaitingResume {
			pause = "resume"
		}
		batches += t.Muted.Render(fmt.Sprintf(" · %s %s · %s abort", k.PauseRoll.Help().Key, pause, k.AbortRoll.Help().Key))
	}
	return cut(line, p.w) + "\n" + cut(batches, p.w) + "\n"
}
