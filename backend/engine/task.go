package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// run is a task in progress. Its final results form an append-only log in
// Seq order; watchers read the log through their own cursor and wait on
// notify, which is closed (and replaced) whenever the log grows or the task
// completes. Nothing the fan-out does waits for a watcher.
type run struct {
	mu        sync.Mutex
	task      model.Task
	targets   []model.Target
	procs     map[string]model.Process
	results   model.ResultTable // by target index (result, setResult)
	log       []logEntry        // final results, Seq ascending
	lastSeq   int64
	slots     []model.Result // room for results handed to the writer (slotLocked)
	blk       *slotBlock     // the block slots is of (nil: one of its own)
	blocks    *slotBlocks    // where blocks are taken (nil: made for the run)
	notify    chan struct{}  // see changedLocked
	waited    bool           // notify was handed to a waiter (wakeLocked)
	done      bool
	ended     bool // finishTask is through: the task is stored complete (or that failed, logged)
	cancelled bool
	lost      bool // its lease was taken over by another engine
	// resumed: restarted from the store (a server restart or a takeover);
	// its agents may still be reconnecting, so an unreachable host is
	// tried again until its deadline.
	resumed bool
	// recall: taken over after its cancel was asked while no server ran
	// it. Every target not final may have been sent by the engine that
	// ran it before, whose answers no one receives: each is sent as a
	// cancel by op id (AgentRequest.CancelOp), and the host stops the op
	// if it runs, never runs it later, and answers its outcome.
	recall bool

	ctx    context.Context // ends on engine Close or when the run is lost
	cancel context.CancelFunc
	puts   sync.WaitGroup // results being stored

	next atomic.Int64 // next target index a worker claims

	// fence is the token its results and task are stored with (Fencer):
	// 0 for the task's creator, the one Fence gave for a resumed task. Set
	// before the run is launched.
	fence uint64

	// sent is the context every target's dispatch is made under (r.ctx's
	// child); stopSent ends it with model.ErrCancelled, which stops every
	// dispatch running (the dispatcher tells each host to stop the op).
	// One for the run, not a context per target: a cancel stops every
	// running target, and no target is sent after it (they are made
	// cancelled in the same critical section).
	sent     context.Context
	stopSent context.CancelCauseFunc
	// waits are the deadlines its dispatches wait under, by budget
	// (waitFor); r.mu guards the map.
	waits map[time.Duration]*sharedWait
	// procJSON are the encodings of procs sent to the hosts, by key:
	// taken from the engine's cache once per run, not once per target
	// (procJSONs.get compared the whole definition, labels too, at each);
	// r.mu guards the map.
	procJSON map[string][]byte

	// roll is the roll of a rolling task (roll.go); nil for another.
	roll *rollRun
	// store makes the writes of the task record one at a time (storeRun).
	store sync.Mutex
	// lease keeps its lease's renewals and its release apart (lease.go):
	// the claim's of the Operate or takeover that made the run.
	lease *leaseHold
	// hook is told every final result logged until the task is stored
	// complete (backend.ResultHook, taken by the Operate that made the
	// run); called with mu held. nil: none.
	hook func(model.Result)
}

// Operate validates the request, saves inline definitions, resolves the
// targets, records the operation in the audit trail, creates the task and
// starts its fan-out. It returns at once. A refusal is recorded too.
func (e *Engine) Operate(ctx context.Context, req backend.OperateRequest) (model.Task, error) {
	t, err := e.operate(ctx, req)
	if err != nil {
		e.recordRefusal(ctx, req, err)
	}
	return t, err
}

func (e *Engine) operate(ctx context.Context, req backend.OperateRequest) (model.Task, error) {
	if req.Op.Mutating() {
		if err := e.refuseReadOnly("operate " + req.Op.String()); err != nil {
			return model.Task{}, err
		}
	}
	req, err := validateRequest(req)
	if err != nil {
		return model.Task{}, err
	}

	var targets []model.Target
	var procs map[string]model.Process
	if len(req.Items) > 0 {
		targets, procs = itemTargets(req.Items)
	} else {
		defs, err := e.definitions(ctx) // read only: resolve copies what it keeps
		if err != nil {
			return model.Task{}, fmt.Errorf("operate: load registry: %w", err)
		}
		targets, procs = resolve(defs, req.Selector, &e.hosts)
	}
	if len(targets) == 0 {
		return model.Task{}, model.ValidationError{{Field: "selector", Reason: "matches no (host, process) target: " + describeSelector(req.Selector)}}
	}
	nameByAgentID(targets, req.ByAgentID)
	var rollout *model.Rollout
	var plan []model.Batch
	if req.Rollout != nil {
		if e.rolls == nil {
			return model.Task{}, errors.New("operate: this engine's store keeps no roll controls: a rolling operation cannot run on it")
		}
		groupByHost(targets)
		v := &model.Validator{}
		ro, p := planRoll(v, *req.Rollout, targets)
		if err := v.Err(); err != nil {
			return model.Task{}, err
		}
		rollout, plan = &ro, p
	}
	if len(targets) > e.cfg.MaxTargets {
		return model.Task{}, model.ValidationError{{Field: "selector", Reason: fmt.Sprintf(
			"matches %d (host, process) targets, more than engine.max_targets %d: narrow it by name, label or host", len(targets), e.cfg.MaxTargets)}}
	}

	// A status query only reads: its inline definitions are used for the
	// query and never replace what the registry holds.
	if len(req.Items) > 0 && req.Op.Mutating() {
		if err := e.saveItems(ctx, req.Items); err != nil {
			return model.Task{}, err
		}
	}

	seq, err := e.st.NextSeq(ctx)
	if err != nil {
		return model.Task{}, fmt.Errorf("operate: next task id: %w", err)
	}
	now := e.now()
	id := model.FormatTaskID(now, seq)
	hold := &leaseHold{}
	if e.leaser != nil {
		// The lease comes first: a task in the store always has one. It is
		// renewed from now on, even while the task is being stored.
		e.mu.Lock()
		e.claims[id] = hold
		e.mu.Unlock()
		defer func() {
			e.mu.Lock()
			delete(e.claims, id)
			e.mu.Unlock()
		}()
	}
	nsSet := map[string]bool{}
	for k := range procs {
		nsSet[procs[k].Meta.Namespace] = true
	}
	namespaces := make([]string, 0, len(nsSet))
	for ns := range nsSet {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	t := model.Task{
		ID: id, Op: req.Op, Targets: len(targets), Namespace: namespaces,
		Source: req.Source, Operator: req.Operator, Suppliers: req.Suppliers, Selection: selection(req),
		Status: model.TaskPending, Created: now,
		Counts: model.Counts{Pending: len(targets)},
	}
	if rollout != nil {
		t.Rollout, t.Roll = rollout, &model.RollState{Batches: len(plan)}
	}
	en := operateEntry(ctx, req)
	en.Namespaces, en.TargetCount, en.TaskID = namespaces, len(targets), id
	en.Result, en.Summary = model.AuditOK, fmt.Sprintf("task created over %d (host, process) targets", len(targets))
	if rollout != nil {
		en.Summary += fmt.Sprintf(", rolled in %d batches (%s)", len(plan), rollout)
	}
	if err := e.createTask(ctx, t, targets, en); err != nil {
		if e.leaser != nil {
			e.letLeaseGo(context.WithoutCancel(ctx), hold, id, true)
		}
		return model.Task{}, err
	}
	r := newRun(t, targets, procs, nil)
	r.lease = hold
	r.hook = backend.ResultHookOf(ctx).Take()
	if rollout != nil {
		r.roll = newRollRun(r, model.RollControl{}, plan)
	}
	if e.log.Enabled(ctx, slog.LevelInfo) { // else its attributes are not even made (every operate)
		e.log.Info("task created", "task", t.ID, "op", t.Op.String(), "targets", t.Targets,
			"namespaces", namespaces, "source", t.Source, "operator", t.Operator)
	}
	if err := e.launch(r); err != nil {
		return model.Task{}, err
	}
	return t, nil
}

// createTask stores a new task t: its lease (with a Leaser), the audit
// entry en of the operation that makes it and its targets, then t; in
// this order (a task in the store always has its lease, its audit entry
// and its targets), or all but t together when the store is a
// TaskCreator. Nothing of the task is acted on before it returns: an
// operation that cannot be recorded is not run. On an error the caller
// lets the lease go.
func (e *Engine) createTask(ctx context.Context, t model.Task, targets []model.Target, en model.AuditEntry) error {
	if e.creator != nil {
		en = e.stamp(en)
		err := e.creator.CreateTask(context.WithoutCancel(ctx), t, targets, e.owner, e.leaseTTL, en)
		if errors.Is(err, ErrNotAudited) {
			e.notAudited(en, err)
		}
		if err != nil {
			return fmt.Errorf("operate: store task: %w", err)
		}
		return nil
	}
	if e.leaser != nil {
		ok, err := e.leaser.AcquireLease(ctx, t.ID, e.owner, e.leaseTTL)
		if err != nil {
			return fmt.Errorf("operate: %w", err)
		}
		if !ok {
			return fmt.Errorf("operate: task %s already has a lease: %w", t.ID, model.ErrConflict)
		}
	}
	err := e.record(ctx, en)
	if err == nil {
		if k, ok := e.st.(TaskKeeper); ok {
			err = k.KeepTask(ctx, t, targets) // the run's targets: never changed
		} else {
			err = e.st.PutTask(ctx, t, targets)
		}
	}
	if err != nil {
		return fmt.Errorf("operate: store task: %w", err)
	}
	return nil
}

// selection is Task.Selection: the request's name, labels, hosts and
// (host, process) pairs, or its inline definitions.
func selection(req backend.OperateRequest) string {
	if len(req.Items) > 0 {
		n := 0
		for _, it := range req.Items {
			n += len(it.Hosts)
		}
		return fmt.Sprintf("%d inline definition(s) on %d host(s)", len(req.Items), n)
	}
	s := req.Selector
	var parts []string
	if s.Name != "" {
		parts = append(parts, "name "+s.Name)
	}
	if len(s.Labels) > 0 {
		parts = append(parts, "labels "+strings.Join(model.SortedLabels(s.Labels), ","))
	}
	switch n := len(s.Hosts); {
	case n > 0 && n <= 3:
		ids := make([]string, n)
		for i, h := range s.Hosts {
			ids[i] = h.AgentID()
		}
		parts = append(parts, "hosts "+strings.Join(ids, ","))
	case n > 3:
		parts = append(parts, fmt.Sprintf("%d hosts", n))
	}
	if len(s.Targets) > 0 {
		parts = append(parts, fmt.Sprintf("%d (host, process) pairs", len(s.Targets)))
	}
	return strings.Join(parts, " · ")
}

func describeSelector(s backend.Selector) string {
	var parts []string
	if s.Namespace != "" {
		parts = append(parts, fmt.Sprintf("namespace %q", s.Namespace))
	}
	if s.Name != "" {
		parts = append(parts, fmt.Sprintf("name %q", s.Name))
	}
	if len(s.Labels) > 0 {
		parts = append(parts, fmt.Sprintf("labels %v", model.SortedLabels(s.Labels)))
	}
	if len(s.Hosts) > 0 {
		parts = append(parts, fmt.Sprintf("%d host(s)", len(s.Hosts)))
	}
	if len(s.Targets) > 0 {
		parts = append(parts, fmt.Sprintf("%d (host, process) pair(s)", len(s.Targets)))
	}
	if len(parts) == 0 {
		return "the registry has no such process"
	}
	out := "no registered process deployed on a host matches "
	for i, p := range parts {
		if i > 0 {
			out += ", "
		}
		out += p
	}
	return out
}

// validateRequest collects every error of the request and returns it in
// canonical form (hosts canonical, paths cleaned; nothing of the caller's
// is changed).
func validateRequest(req backend.OperateRequest) (backend.OperateRequest, error) {
	v := &model.Validator{}
	if !req.Op.Valid() {
		_, err := model.ParseOp(fmt.Sprint(int(req.Op)))
		v.Add("op_type", err.Error())
	}
	if req.Selector.Empty() && len(req.Items) == 0 {
		v.Add("selector", "required: give a namespace, name, labels or hosts (or items)")
	}
	for k := range req.Selector.Labels {
		if k == "" {
			v.Add("selector.labels", "label key must not be empty")
		}
	}
	req.Selector.Hosts = model.CanonicalHosts(v, "selector.hosts", req.Selector.Hosts)
	targets := make([]model.Target, len(req.Selector.Targets))
	for i, t := range req.Selector.Targets {
		t.Host = t.Host.Canonicalize(v, fmt.Sprintf("selector.targets[%d].host", i))
		if ns, name, ok := model.SplitKey(t.ProcKey); !ok || ns == "" || name == "" {
			v.Add(fmt.Sprintf("selector.targets[%d].proc", i), fmt.Sprintf("want namespace:name, got %q", t.ProcKey))
		}
		targets[i] = t
	}
	if req.Selector.Targets != nil {
		req.Selector.Targets = targets
	}
	named := make([]model.Target, len(req.ByAgentID))
	for i, t := range req.ByAgentID {
		f := fmt.Sprintf("by_agent_id[%d]", i)
		t.Host = t.Host.Canonicalize(v, f+".host")
		if ns, name, ok := model.SplitKey(t.ProcKey); !ok || ns == "" || name == "" {
			v.Add(f+".proc", fmt.Sprintf("want namespace:name, got %q", t.ProcKey))
		}
		id, err := model.CheckAgentID(t.AgentID)
		if err != nil {
			v.Add(f+".agent_id", err.Error())
		}
		t.AgentID = id
		named[i] = t
	}
	req.ByAgentID = named
	items := make([]model.ProcessDef, len(req.Items))
	for i, it := range req.Items {
		items[i] = canonicalDef(v, fmt.Sprintf("items[%d].", i), it)
	}
	req.Items = items
	if req.Rollout != nil {
		spec := req.Rollout.Parse(v, "rollout.").Spec()
		req.Rollout = &spec
	}
	return req, v.Err()
}

// itemTargets returns the targets of inline definitions: each on the hosts
// it names.
func itemTargets(items []model.ProcessDef) ([]model.Target, map[string]model.Process) {
	var targets []model.Target
	procs := map[string]model.Process{}
	seen := map[model.Target]bool{}
	for _, it := range items {
		key := it.Process.Key()
		procs[key] = it.Process
		for _, h := range it.Hosts {
			if t := (model.Target{Host: h, ProcKey: key}); !seen[t] {
				seen[t] = true
				targets = append(targets, model.Target{Host: h, ProcKey: key})
			}
		}
	}
	return targets, procs
}

// nameByAgentID sets the agent id of each target its host was named by
// (named lists them; a pair named twice keeps its first id).
func nameByAgentID(targets []model.Target, named []model.Target) {
	if len(named) == 0 {
		return
	}
	ids := make(map[model.Target]string, len(named))
	for _, t := range named {
		if _, ok := ids[t.Pair()]; !ok {
			ids[t.Pair()] = t.AgentID
		}
	}
	for i := range targets {
		targets[i].AgentID = ids[targets[i].Pair()]
	}
}

// saveItems puts inline definitions into the registry; the hosts they name
// are added to the hosts the definition already had.
func (e *Engine) saveItems(ctx context.Context, items []model.ProcessDef) error {
	have, err := e.st.Processes(ctx)
	if err != nil {
		return fmt.Errorf("operate: load registry: %w", err)
	}
	byKey := make(map[string]model.ProcessDef, len(have))
	for _, d := range have {
		byKey[d.Process.Key()] = d
	}
	for _, it := range items {
		key := it.Process.Key()
		def := model.ProcessDef{Process: it.Process, Updated: e.now().Unix()}
		hosts := map[model.Host]bool{}
		if old, ok := byKey[key]; ok {
			def.Hosts = slices.Clip(old.Hosts)
			for _, h := range old.Hosts {
				hosts[h] = true
			}
		}
		for _, h := range it.Hosts {
			if nh := h; !hosts[nh] {
				hosts[nh] = true
				def.Hosts = append(def.Hosts, h)
			}
		}
		if err := e.st.PutProcess(ctx, def); err != nil {
			return fmt.Errorf("operate: save %s: %w", key, err)
		}
		byKey[key] = def
	}
	return nil
}

// newRun builds a run; prior holds results already stored (resume).
func newRun(t model.Task, targets []model.Target, procs map[string]model.Process, prior []model.Result) *run {
	r := &run{task: t, targets: targets, procs: procs, notify: make(chan struct{}), log: make([]logEntry, 0, len(targets)),
		lease: &leaseHold{}}
	r.results = model.MakeResultTable(len(targets))
	index := make(map[model.Target]int, len(prior))
	if len(prior) > 0 {
		for i, tg := range targets {
			index[model.Target{Host: tg.Host, ProcKey: tg.ProcKey}] = i
		}
	}
	for i, tg := range targets {
		p := procs[tg.ProcKey]
		r.setResult(i, model.Result{TaskID: t.ID, Host: tg.Host, ProcKey: tg.ProcKey, ValueKey: p.Spec.Identity.ValueKey,
			AgentID: tg.AgentID, Op: t.Op, State: model.StatePending})
	}
	for _, res := range prior {
		i, ok := index[model.Target{Host: res.Host, ProcKey: res.ProcKey}]
		if !ok || !res.State.Final() {
			continue
		}
		r.setResult(i, res)
		r.log = append(r.log, logEntry{i: int32(i)})
	}
	sort.Slice(r.log, func(i, j int) bool { return r.loggedSeq(i) < r.loggedSeq(j) })
	if n := len(r.log); n > 0 {
		r.lastSeq = r.loggedSeq(n - 1)
	}
	r.task.Counts = model.Counts{}
	for i := range r.results.Len() {
		r.task.Counts.Add(r.results.State(i), 1)
	}
	return r
}

// result is target i's result (r.mu held, or the run not launched yet).
func (r *run) result(i int) model.Result {
	res, _ := r.results.Get(i, &r.targets[i])
	return res
}

// setResult makes res target i's result (r.mu held, or the run not
// launched yet).
func (r *run) setResult(i int, res model.Result) { r.results.Set(i, &r.targets[i], &res) }

// resultsLocked is every target's result, in target order. r.mu is held.
func (r *run) resultsLocked() []model.Result {
	out := make([]model.Result, r.results.Len())
	for i := range out {
		out[i] = r.result(i)
	}
	return out
}

// launch registers the run and starts its fan-out.
func (e *Engine) launch(r *run) error {
	e.mu.Lock()
	if e.ctx.Err() != nil {
		e.mu.Unlock()
		return errors.New("engine is closed")
	}
	r.ctx, r.cancel = context.WithCancel(e.ctx)
	r.sent, r.stopSent = context.WithCancelCause(r.ctx)
	r.mu.Lock()
	r.blocks = &e.blocks
	r.mu.Unlock()
	e.runs[r.task.ID] = r
	e.runsChangedLocked()
	e.recent.reserve(len(r.targets), recentMaxRuns)
	e.wg.Add(1)
	e.mu.Unlock()
	if r.roll != nil && !r.recall {
		go e.executeRoll(r)
		return nil
	}
	go e.execute(r) // a recall: every target left is a cancel, all at once
	return nil
}

// execute fans the run out over at most cfg.Concurrency workers, each
// claiming the next target index: the number of goroutines is bounded by
// the concurrency, not by the number of targets.
func (e *Engine) execute(r *run) {
	defer e.wg.Done()
	defer r.cancel()
	r.mu.Lock()
	pending := r.task.Counts.Pending
	r.mu.Unlock()
	workers := min(e.cfg.Concurrency, pending)
	if ad, ok := e.d.(AsyncDispatcher); ok && !r.resumed && !r.recall && pending >= asyncMin {
		// A resumed run tries an unreachable host again and a recall
		// cancels every target at once: both the workers' way. So does a
		// small run: a worker is idle already for it (goWork), and the
		// window and the context watch a run sends through cost more
		// than the few waits they spare.
		if e.sendAll(r, ad, workers) {
			e.finishTask(r) // completed by a result recorded by an answer
			return
		}
	} else {
		var wg sync.WaitGroup
		share := func() { // one closure for every worker
			defer wg.Done()
			for r.ctx.Err() == nil {
				i := int(r.next.Add(1) - 1)
				if i >= len(r.targets) {
					return
				}
				e.dispatchOne(r, i)
			}
		}
		wg.Add(workers)
		for range workers {
			e.goWork(share)
		}
		wg.Wait()
	}
	if r.ctx.Err() != nil {
		return // closing or lost: unfinished targets stay unfinished in the store
	}
	r.mu.Lock()
	complete := r.completeLocked(e.now())
	r.mu.Unlock()
	if complete {
		e.finishTask(r)
	}
}

// asyncMin is the fewest targets a run sends through an AsyncDispatcher
// (sendAll). Under 3,000 operate calls a second of one target each, every
// run sent async cost the server 0.64 ms of CPU a call against 0.52 ms
// through a worker (bench operate, load 2.5).
const asyncMin = 64

// dispatchOne sends target i to its host and records the final result.
func (e *Engine) dispatchOne(r *run, i int) {
	s, req, send := e.prepare(r, i)
	if !send {
		return
	}
	dctx := s.wait.ctx
	reply, err := e.d.Dispatch(dctx, s.res.Host, req)
	for r.resumed && errors.Is(err, model.ErrUnreachable) && dctx.Err() == nil {
		// Resumed right after a server restart, the agents are still
		// reconnecting: try again (the op id keeps it from running twice).
		select {
		case <-dctx.Done():
		case <-time.After(250 * time.Millisecond):
			reply, err = e.d.Dispatch(dctx, s.res.Host, req)
		}
	}
	if res, ok := e.outcome(r, &s, reply, err); ok {
		e.finishResult(r, i, res)
	}
}

// sending is a target being dispatched: what its final result is made
// of once its host answered (outcome).
type sending struct {
	i        int
	res      model.Result // running
	cctx     context.Context
	budget   time.Duration
	wait     *sharedWait
	procName string
	proc     model.ResultProc
	op       model.OpType
	cancelOp bool // the request cancels the op (a recall)
	// done is its callback (sendAll), made once for each sending.
	done func(model.AgentReply, error)
}

// prepare makes target i running and req the request that sends it;
// send false: nothing to send (i was not pending, or it is final
// already: its process is no longer in the registry).
func (e *Engine) prepare(r *run, i int) (s sending, req model.AgentRequest, send bool) {
	r.mu.Lock()
	if r.results.State(i) != model.StatePending {
		r.mu.Unlock()
		return s, req, false // cancelled, or final from before a restart
	}
	res := r.result(i)
	// Made running in the critical section that found it pending: a
	// cancel (cancelRun) finds it pending, or running and stops it (the
	// run's sent context, which its dispatch is made under).
	cctx := r.sent
	now := e.now()
	res.State, res.Started = model.StateRunning, now
	r.setResult(i, res)
	r.task.Counts.Add(model.StatePending, -1)
	r.task.Counts.Add(model.StateRunning, 1)
	r.rollMoveLocked(i, model.StatePending, res)
	if r.task.Status == model.TaskPending {
		r.task.Status = model.TaskRunning
	}
	op := r.task.Op
	p, ok := r.procs[res.ProcKey]
	budget := time.Duration(p.Deadline(op))*time.Second + e.cfg.DeadlineSlack.D()
	var wait *sharedWait
	if ok {
		wait = r.waitFor(budget)
	}
	pj, encoded := r.procJSON[res.ProcKey]
	r.mu.Unlock()

	if !ok {
		res.State, res.Code = model.StateFailed, model.CodeCommandFailed
		res.Message = fmt.Sprintf("process %s is no longer in the registry", res.ProcKey)
		res.Finished = e.now()
		e.finishResult(r, i, res)
		return s, req, false
	}
	if !encoded {
		pj = e.procJSON.get(res.ProcKey, p)
		r.mu.Lock()
		if r.procJSON == nil {
			r.procJSON = map[string][]byte{}
		}
		r.procJSON[res.ProcKey] = pj
		r.mu.Unlock()
	}
	s = sending{i: i, res: res, cctx: cctx, budget: budget, wait: wait, procName: p.Spec.Identity.ProcName, proc: model.ResultProcOf(p),
		op: op, cancelOp: r.recall}
	req = model.AgentRequest{TaskID: r.task.ID, OpID: model.OpID(r.task.ID, res.Host, res.ProcKey), Op: op, Process: p,
		Deadline: now.Add(budget), CancelOp: r.recall, ProcessJSON: pj}
	return s, req, true
}

// outcome is target s's final result, its dispatch having returned reply
// or err; ok false: none (the engine is closing or the run was lost: the
// target is left unfinished).
func (e *Engine) outcome(r *run, s *sending, reply model.AgentReply, err error) (res model.Result, ok bool) {
	op, cctx, budget := s.op, s.cctx, s.budget
	deadlinePassed := errors.Is(s.wait.ctx.Err(), context.DeadlineExceeded)
	s.wait.release()
	res = s.res
	end := e.now()
	res.Finished = end
	hosted := false
	switch {
	case err == nil:
		if st := applyReply(&res, op, reply, s.procName, end); st != nil {
			hosted = st.Hosted
			e.recordStatus(res.Host, st)
		}
		if s.cancelOp && reply.Cancelled {
			res.Message = recallCancelled + "; the host stopped it: " + reply.Message
		}
	case s.cancelOp && r.ctx.Err() == nil:
		// Told to no host: what an engine before may have sent is unknown.
		res.State, res.Code = model.StateCancelled, model.CodeCommandFailed
		res.Message = fmt.Sprintf("%s; the host could not be told (%v): an op sent before may have run there", recallCancelled, err)
	case errors.Is(err, model.ErrUnreachable):
		res.State, res.Code = model.StateUnreachable, model.CodeAgentAbnormal
		res.Message = err.Error()
	case errors.Is(context.Cause(cctx), model.ErrCancelled) && r.ctx.Err() == nil:
		res.State, res.Code = model.StateCancelled, model.CodeCommandFailed
		res.Message = fmt.Sprintf("cancelled while running on the host; the host did not confirm that it stopped (%v)", err)
	case deadlinePassed || errors.Is(err, context.DeadlineExceeded):
		res.State, res.Code = model.StateTimeout, model.CodeTimeout
		res.Message = fmt.Sprintf("no reply within %s", budget)
	case r.ctx.Err() != nil:
		return res, false // engine closing or run lost: leave the target unfinished
	default:
		res.State, res.Code = model.StateFailed, model.CodeCommandFailed
		res.Message = fmt.Sprintf("dispatch: %v", err)
	}
	res.Proc = s.proc
	res.Hosted = hosted
	if e.log.Enabled(r.ctx, slog.LevelDebug) { // its arguments cost a string and boxes per target
		e.log.Debug("host result", "task", res.TaskID, "host", res.Host.String(), "proc", res.ProcKey,
			"state", string(res.State), "code", res.Code, "duration", res.Duration())
	}
	return res, true
}

// waitStep is how much past its budget a dispatch may wait: the
// dispatches of a run with one budget sent within waitStep of each other
// wait under one deadline (a context per target was a timer, and an entry
// added to and removed from the children of the run's sent context under
// its lock by every worker: 6% of the server's CPU in an op over 10,000
// hosts, and most of the waits on a lock in it).
const waitStep = 20 * time.Millisecond

// sharedWait is a deadline that dispatches of a run wait under: ctx, a
// child of the run's sent context, ends between budget and budget +
// waitStep after each of them was sent. Its timer is let go once it is
// no longer handed out and no dispatch waits under it.
type sharedWait struct {
	at       time.Time // ctx's deadline
	ctx      context.Context
	cancel   context.CancelFunc
	refs     atomic.Int64 // dispatches waiting under it
	replaced atomic.Bool  // no longer handed out
}

// waitFor is the deadline a dispatch with budget sent now waits under
// (real time, as a context's deadline is); the caller releases it once
// its dispatch is over. r.mu is held.
func (r *run) waitFor(budget time.Duration) *sharedWait {
	now := time.Now()
	w := r.waits[budget]
	if w == nil || w.at.Before(now.Add(budget)) {
		if w != nil {
			w.replaced.Store(true)
			if w.refs.Load() == 0 {
				w.cancel()
			}
		}
		w = &sharedWait{at: now.Add(budget + waitStep)}
		w.ctx, w.cancel = context.WithDeadline(r.sent, w.at)
		if r.waits == nil {
			r.waits = map[time.Duration]*sharedWait{}
		}
		r.waits[budget] = w
	}
	w.refs.Add(1)
	return w
}

// release ends a dispatch's wait under w.
func (w *sharedWait) release() {
	if w.refs.Add(-1) == 0 && w.replaced.Load() {
		w.cancel()
	}
}

// recallCancelled begins the message of a target cancelled by a recall.
const recallCancelled = "cancelled while no server ran the task (taken over after its cancel)"

// applyReply makes res what the host's reply to op says (state, code,
// message) and returns the process status the reply carried (nil: none),
// completed with its key, name (procName) and report time (end).
func applyReply(res *model.Result, op model.OpType, reply model.AgentReply, procName string, end time.Time) *model.ProcStatus {
	res.Code = reply.Code
	res.State = model.StateForCode(op, reply.Code)
	if res.State == model.StateRunning { // 115: the agent had not finished at its deadline
		res.State = model.StateTimeout
	}
	res.Message = reply.Message
	if res.Message == "" {
		res.Message = reply.Output
	}
	if t := model.CodeText(reply.Code); res.Message == "" || res.Message == t {
		res.Message = t // one copy of "success" for every host
	}
	if reply.Cancelled {
		res.State, res.Code = model.StateCancelled, model.CodeCommandFailed
		res.Message = "cancelled while running on the host: " + res.Message
	}
	if reply.Status == nil {
		return nil
	}
	// The reply's status is the engine's (Dispatcher): completed and kept
	// as it is, not copied (a copy per target was ~25 MB an op over
	// 100,000 hosts, on top of the decoded one).
	st := reply.Status
	// The key, name and state as the engine holds them already when they
	// say the same: one copy for every host, not one per reply kept by
	// the result and the last known statuses.
	if st.ProcKey == "" || st.ProcKey == res.ProcKey {
		st.ProcKey = res.ProcKey
	}
	if st.ProcName == "" || st.ProcName == procName {
		st.ProcName = procName
	}
	st.State = knownState(st.State)
	if st.ReportTime == 0 {
		st.ReportTime = end.Unix()
	}
	if op == model.OpStatus {
		res.Status = st // shared with the last known statuses: neither changes it
	}
	return st
}

// knownState is s, as the constant that names it when there is one.
func knownState(s model.ProcState) model.ProcState {
	for _, k := range [...]model.ProcState{model.ProcRunning, model.ProcStopped, model.ProcStarting, model.ProcBackoff,
		model.ProcStopping, model.ProcExited, model.ProcFatal, model.ProcUnknown} {
		if s == k {
			return k
		}
	}
	return s
}

// finishLocked records a final result: it gets the next Seq, joins the log
// and wakes the watchers. It reports whether the task is now complete.
func (r *run) finishLocked(i int, res model.Result, now time.Time) (model.Result, bool) {
	prev := r.results.State(i)
	if prev.Final() {
		// Replaced (a late answer's correction): its log entry keeps
		// the result it logged. Copied here only (the copy is kept):
		// made for every result, it cost an allocation each.
		was := r.result(i)
		k := sort.Search(len(r.log), func(k int) bool { return r.loggedSeq(k) >= was.Seq })
		if k < len(r.log) && r.log[k].was == nil && int(r.log[k].i) == i {
			r.log[k].was = &was
		}
	}
	r.lastSeq++
	res.Seq = r.lastSeq
	r.setResult(i, res)
	r.log = append(r.log, logEntry{i: int32(i)})
	r.task.Counts.Add(prev, -1)
	r.task.Counts.Add(res.State, 1)
	r.rollMoveLocked(i, prev, res)
	if r.hook != nil && !r.ended { // as a watch from the start: it ends with the task stored
		r.hook(res)
	}
	r.changedLocked()
	return res, r.completeLocked(now)
}

// wakeLocked is the channel closed at the run's next change (a result
// logged, its end, its loss). r.mu is held.
func (r *run) wakeLocked() <-chan struct{} {
	r.waited = true
	return r.notify
}

// changedLocked wakes whoever waits for a change of the run. The channel
// is replaced only when it was handed out since: most results are logged
// while no watcher waits (it is busy sending the ones before), and a
// channel made and closed for each cost an allocation per target. r.mu
// is held.
func (r *run) changedLocked() {
	if r.waited {
		close(r.notify)
		r.notify = make(chan struct{})
		r.waited = false
	}
}

// logEntry is a final result in a run's log: its target's (result(i)),
// or, once a later one replaced it (a late answer's correction), the one
// it was (was). The log holds no second copy of every result.
type logEntry struct {
	i   int32
	was *model.Result
}

// logged is the k-th result of the log. r.mu is held.
func (r *run) logged(k int) model.Result {
	if w := r.log[k].was; w != nil {
		return *w
	}
	return r.result(int(r.log[k].i))
}

// loggedSeq is the Seq of the k-th result of the log (logged(k).Seq,
// without making the result). r.mu is held.
func (r *run) loggedSeq(k int) int64 {
	if w := r.log[k].was; w != nil {
		return w.Seq
	}
	return r.results.Seq(int(r.log[k].i))
}

// completeLocked marks the task complete when every result is final (once).
func (r *run) completeLocked(now time.Time) bool {
	if r.done || r.task.Counts.Final() < len(r.targets) {
		return false
	}
	r.done = true
	r.task.Status = r.task.Counts.Outcome(r.cancelled)
	r.task.Finished = now
	r.changedLocked()
	return true
}

// finishResult records target i's final result.
func (e *Engine) finishResult(r *run, i int, res model.Result) {
	if e.recordResult(r, i, res) {
		e.finishTask(r)
	}
}

// recordResult records target i's final result and hands it to the
// writer; it reports whether the task is now complete (the caller then
// stores it: finishTask).
func (e *Engine) recordResult(r *run, i int, res model.Result) (complete bool) {
	r.mu.Lock()
	if r.lost {
		r.mu.Unlock()
		return false // another engine owns the task now and dispatches it again
	}
	res, complete = r.finishLocked(i, res, e.now())
	p := r.slotLocked()
	*p = res
	blk := r.blk
	r.puts.Add(1)
	r.mu.Unlock()
	e.enqueue(write{res: p, blk: blk, fence: r.fence, puts: &r.puts})
	return complete
}

// resultBlock is how many results' room slotLocked takes at once.
const resultBlock = 128

// slotLocked is room for a final result handed to the writer, taken from
// a block of at most resultBlock: one allocation a block, not one a
// result (the result handed over by address was moved to the heap, once
// per target). A block is no bigger than the targets not final yet (the
// one just finished counted), so a small task takes no more than it did
// and a run that finished holds none (a run stays in memory a while
// after, recentRuns); a block is let go once its results are stored.
// A whole block is taken from r.blocks (slotBlocks), and given back
// there once each of its results is stored; r.blk is the block slots
// is of. r.mu is held.
func (r *run) slotLocked() *model.Result {
	if len(r.slots) == 0 {
		n := max(1, min(resultBlock, len(r.targets)-r.task.Counts.Final()+1))
		r.blk = nil
		if n == resultBlock && r.blocks != nil {
			r.blk = r.blocks.get()
			r.slots = r.blk.rs[:]
		} else {
			r.slots = make([]model.Result, n)
		}
	}
	p := &r.slots[0]
	r.slots = r.slots[1:]
	return p
}

// dropSlotsLocked lets the room not handed out go: a block's is given
// back (a run that finished holds none). r.mu is held.
func (r *run) dropSlotsLocked() {
	if r.blk != nil {
		r.blocks.put(r.blk, len(r.slots))
	}
	r.slots, r.blk = nil, nil
}

// slotBlock is room for resultBlock results handed to the writer, used
// again once every one of them is stored. A block made for every
// resultBlock results of every op was ~28 MB of garbage an op over
// 100,000 hosts (heap profile of bench fleet), which the collector,
// paced by the memory ceiling there, caught up with several times an op.
type slotBlock struct {
	rs [resultBlock]model.Result
	// left counts its results not given back (put): handed to the
	// writer and not stored yet, or not handed out.
	left atomic.Int32
}

// slotBlocks are the blocks free to be used again. The zero value is
// ready.
type slotBlocks struct{ free sync.Pool }

// get is a block whose results are all to hand out.
func (p *slotBlocks) get() *slotBlock {
	b, _ := p.free.Get().(*slotBlock)
	if b == nil {
		b = &slotBlock{}
	}
	b.left.Store(resultBlock)
	return b
}

// put gives back n of b's results (b nil: none): once they all are, b is
// emptied (it holds no result's texts alive) and free again. Nothing may
// read a result given back.
func (p *slotBlocks) put(b *slotBlock, n int) {
	if b == nil || n == 0 {
		return
	}
	if b.left.Add(int32(-n)) == 0 {
		clear(b.rs[:])
		p.free.Put(b)
	}
}

// finishTask stores the completed task, once every result is stored (so
// an engine that sees the task complete in the store finds all its
// results), releases its lease and forgets the run.
func (e *Engine) finishTask(r *run) {
	r.puts.Wait()
	t := r.snapshot()
	err := e.storeRun(r)
	if errors.Is(err, model.ErrConflict) {
		e.lose(r, err, true) // another engine runs the task now: it stores its end
		return
	}
	if err != nil {
		e.log.Warn("store task", "task", t.ID, "err", err)
	}
	// Stored complete: the lease goes. Not stored: it is let go, so that
	// an engine (this one too) takes the task over and stores it. With a
	// TaskEnder the audit entry of the end is stored with the release.
	audited := false
	switch {
	case e.ender != nil:
		e.endTask(r.lease, t, err == nil)
		audited = true
	case e.leaser != nil:
		e.letLeaseGo(context.WithoutCancel(e.ctx), r.lease, t.ID, err == nil)
	}
	// Watchers end now: the task and every result are stored. What only
	// a dispatch uses goes (no target is dispatched again): the run is
	// kept a while (recentRuns), and under 3,000 operate calls a second
	// 4,096 kept runs held some 10 MB of definitions (a map of one 448-byte
	// Process each), shared deadlines and result room.
	r.mu.Lock()
	r.ended = true
	r.dropSlotsLocked()
	r.procs, r.procJSON, r.waits, r.hook = nil, nil, nil, nil
	r.changedLocked()
	r.mu.Unlock()
	e.mu.Lock()
	if e.runs[t.ID] == r {
		delete(e.runs, t.ID)
		e.runsChangedLocked()
		if err == nil {
			e.recent.add(r)
		}
	}
	e.mu.Unlock()
	c := t.Counts
	if e.log.Enabled(e.ctx, slog.LevelInfo) { // else its attributes are not even made (every task)
		e.log.Info("task finished", "task", t.ID, "op", t.Op.String(), "status", string(t.Status),
			"targets", t.Targets, "success", c.Success, "failed", c.Failed, "timeout", c.Timeout,
			"unreachable", c.Unreachable, "cancelled", c.Cancelled, "duration", t.Finished.Sub(t.Created))
	}
	if !audited {
		e.recordFinished(t)
	}
}

// Cancel stops a task: pending targets become cancelled, and the hosts
// running a target are told to stop it (the agent kills the command's
// process group and answers cancelled). A task run by another engine is
// cancelled there: the request is recorded in the store (CancelBoard),
// which the engine running it watches, and which an engine taking it over
// later reads. Cancelling a finished task does nothing. Each call is
// recorded in the audit trail.
func (e *Engine) Cancel(ctx context.Context, id string) error {
	t, c, err := e.cancelTask(ctx, id)
	en := model.AuditEntry{Actor: actor(ctx, "", ""), Action: model.AuditCancel, Namespaces: t.Namespace,
		Targets: []string{id}, TargetCount: t.Targets, TaskID: id}
	if t.ID != "" {
		en.Op = t.Op.String()
	}
	en.Result, en.Summary = outcome(err)
	if err == nil {
		en.Summary = c.String()
	}
	if rerr := e.record(ctx, en); rerr != nil && err == nil {
		return fmt.Errorf("cancel %s: cancelled, but %w", id, rerr)
	}
	return err
}

// cancelled is what a cancel did.
type cancelled struct {
	pending, running int  // targets cancelled before being sent; told to stop
	elsewhere        bool // the task runs on another engine: requested there
	final            bool // the task was over already
	recalling        bool // taken over after its cancel: its hosts are being told
}

func (c cancelled) String() string {
	switch {
	case c.final:
		return "task already finished: nothing to cancel"
	case c.elsewhere:
		return "cancel requested of the server running the task"
	case c.recalling:
		return "the task is being cancelled on its hosts already (taken over after its cancel)"
	}
	return fmt.Sprintf("%d pending targets cancelled, %d running told to stop", c.pending, c.running)
}

// cancelTask cancels a task here, or records the request for the engine
// running it; it returns the task (as far as known) and what it did.
func (e *Engine) cancelTask(ctx context.Context, id string) (model.Task, cancelled, error) {
	e.mu.RLock()
	r := e.runs[id]
	e.mu.RUnlock()
	if r == nil {
		t, _, err := e.st.Task(ctx, id)
		if err != nil {
			return t, cancelled{}, fmt.Errorf("cancel: %w", err)
		}
		if t.Status.Final() {
			return t, cancelled{final: true}, nil
		}
		if e.board == nil {
			return t, cancelled{}, nil
		}
		if err := e.board.RequestCancel(ctx, id); err != nil {
			return t, cancelled{}, fmt.Errorf("cancel %s: %w", id, err)
		}
		e.log.Info("task cancel requested of the server running it", "task", id)
		return t, cancelled{elsewhere: true}, nil
	}
	if e.board != nil {
		// Recorded first, so that an engine taking the task over should
		// this one die cancels it too.
		if err := e.board.RequestCancel(ctx, id); err != nil {
			return r.snapshot(), cancelled{}, fmt.Errorf("cancel %s: %w", id, err)
		}
	}
	c, err := e.cancelRun(r)
	return r.snapshot(), c, err
}

// snapshot is the run's task now.
func (r *run) snapshot() model.Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.task
}

// cancelRun cancels r's pending targets and tells the hosts running one to
// stop it (its dispatch ends with model.ErrCancelled).
func (e *Engine) cancelRun(r *run) (cancelled, error) {
	now := e.now()
	r.mu.Lock()
	id := r.task.ID
	if r.lost {
		r.mu.Unlock()
		return cancelled{}, fmt.Errorf("cancel %s: another server took the task over: %w", id, model.ErrConflict)
	}
	if r.done {
		r.mu.Unlock()
		return cancelled{final: true}, nil
	}
	if r.recall {
		// Every target not final is being cancelled on its host already.
		r.mu.Unlock()
		return cancelled{recalling: true}, nil
	}
	r.cancelled = true
	finals, complete := r.cancelPendingLocked(now, "cancelled before it was sent to the host")
	running := r.task.Counts.Running // every one is being dispatched under r.sent
	r.puts.Add(len(finals))
	r.mu.Unlock()
	if r.stopSent != nil {
		r.stopSent(model.ErrCancelled)
	}
	for i := range finals {
		e.enqueue(write{res: &finals[i], fence: r.fence, puts: &r.puts})
	}
	e.log.Info("task cancelled", "task", id, "cancelled_targets", len(finals), "running_told_to_stop", running)
	if complete {
		e.finishTask(r)
	}
	return cancelled{pending: len(finals), running: running}, nil
}

// cancelPendingLocked makes every pending target cancelled (why); it
// returns their final results and whether the task is now complete.
func (r *run) cancelPendingLocked(now time.Time, why string) ([]model.Result, bool) {
	return r.cancelPendingFromLocked(0, now, why)
}

// cancelPendingFromLocked is cancelPendingLocked for the targets from
// index lo on.
func (r *run) cancelPendingFromLocked(lo int, now time.Time, why string) ([]model.Result, bool) {
	var finals []model.Result
	complete := false
	for i := lo; i < r.results.Len(); i++ {
		if r.results.State(i) != model.StatePending {
			continue
		}
		res := r.result(i)
		res.State, res.Code, res.Finished = model.StateCancelled, model.CodeCommandFailed, now
		res.Message = why
		var c bool
		res, c = r.finishLocked(i, res, now)
		complete = complete || c
		finals = append(finals, res)
	}
	return finals, complete
}

// cancelLoop cancels, as they are recorded in the store by any engine,
// the tasks this engine runs.
func (e *Engine) cancelLoop(ids <-chan string) {
	for id := range ids {
		e.mu.RLock()
		r := e.runs[id]
		e.mu.RUnlock()
		if r == nil {
			continue
		}
		if _, err := e.cancelRun(r); err != nil {
			e.log.Warn("cancel requested by another server", "task", id, "err", err)
		}
	}
}

// TaskHead returns a task without its results when this engine holds its
// run (running, or among the recent ones), or when its store reads the
// task's record alone (TaskRecordReader) and the record is complete (a
// complete task's record is Task's task, counts and all): ok false
// otherwise (the caller asks Task, which counts a task still running
// elsewhere from its results). A stream of a task's results needs the
// task, not a copy of its 100,000 results (Task's).
func (e *Engine) TaskHead(ctx context.Context, id string) (t model.Task, ok bool, err error) {
	r := e.heldRun(id)
	if r != nil {
		return r.snapshot(), true, nil
	}
	rr, ok := e.st.(TaskRecordReader)
	if !ok {
		return model.Task{}, false, nil
	}
	t, err = rr.TaskRecord(ctx, id)
	if err != nil {
		return model.Task{}, false, fmt.Errorf("task: %w", err)
	}
	if !t.Status.Final() {
		return model.Task{}, false, nil
	}
	return t, true, nil
}

// heldRun is the run of task id this engine holds, running or recently
// finished (nil: none; the task is read from the store).
func (e *Engine) heldRun(id string) *run {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if r := e.runs[id]; r != nil {
		return r
	}
	return e.recent.get(id)
}

// Task returns a task with every sub-result so far (pending ones included).
func (e *Engine) Task(ctx context.Context, id string) (backend.TaskView, error) {
	r := e.heldRun(id)
	if r != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		return backend.TaskView{Task: r.task, Results: r.resultsLocked(), Roll: r.rollViewLocked(e.now())}, nil
	}
	t, targets, err := e.st.Task(ctx, id)
	if err != nil {
		return backend.TaskView{}, fmt.Errorf("task: %w", err)
	}
	stored, err := e.st.Results(ctx, id)
	if err != nil {
		return backend.TaskView{}, fmt.Errorf("task %s: results: %w", id, err)
	}
	byTarget := make(map[model.Target]model.Result, len(stored))
	for _, res := range stored {
		byTarget[model.Target{Host: res.Host, ProcKey: res.ProcKey}] = res
	}
	out := make([]model.Result, len(targets))
	for i, tg := range targets {
		res, ok := byTarget[model.Target{Host: tg.Host, ProcKey: tg.ProcKey}]
		if !ok {
			res = model.Result{TaskID: id, Host: tg.Host, ProcKey: tg.ProcKey, AgentID: tg.AgentID, Op: t.Op, State: model.StatePending}
		}
		out[i] = res
	}
	if !t.Status.Final() {
		// Run by another engine (or by none until one takes it over).
		t.Counts = model.Counts{}
		for _, res := range out {
			t.Counts.Add(res.State, 1)
		}
		if t.Counts.Final() > 0 {
			t.Status = model.TaskRunning
		}
	}
	return backend.TaskView{Task: t, Results: out, Roll: e.storedRollView(ctx, t, out)}, nil
}

// TaskResults is Task with each result passed to fn instead of returned
// (backend.TaskResultsReader): a console's watch opening on a task over
// 100,000 hosts had Task make its 228,000 results at once (59 MB), beside
// the rows it made of them. A run this engine holds is read as it was when
// the call began: its task, and each result as it was then, a result made
// final since given as it was (asAtRead: its final one has a later Seq,
// which a Watch from the largest Seq given replays). Results are copied under the
// run's lock resultChunk at a time, fn called without it.
func (e *Engine) TaskResults(ctx context.Context, id string, fn func(*model.Result)) (backend.TaskView, error) {
	r := e.heldRun(id)
	if r == nil {
		v, err := e.Task(ctx, id)
		for i := range v.Results {
			fn(&v.Results[i])
		}
		v.Results = nil
		return v, err
	}
	r.mu.Lock()
	v := backend.TaskView{Task: r.task, Roll: r.rollViewLocked(e.now())}
	seq := r.lastSeq
	n := r.results.Len()
	r.mu.Unlock()
	chunk := make([]model.Result, 0, min(n, resultChunk))
	for lo := 0; lo < n; lo += resultChunk {
		if err := ctx.Err(); err != nil {
			return backend.TaskView{}, fmt.Errorf("task %s: %w", id, err)
		}
		chunk = chunk[:0]
		r.mu.Lock()
		for i := lo; i < min(n, lo+resultChunk); i++ {
			res := r.result(i)
			if res.Seq > seq {
				res = asAtRead(res)
			}
			chunk = append(chunk, res)
		}
		r.mu.Unlock()
		for i := range chunk {
			fn(&chunk[i])
		}
	}
	return v, nil
}

// SharesStatuses says the statuses of the results the engine hands out
// may be kept as they are (backend.StatusSharer): each is the engine's
// (or its store's) record, completed before its result is logged
// (applyReply, recordStatus) and never changed after; a newer status
// replaces it whole.
func (e *Engine) SharesStatuses() bool { return true }

// resultChunk is how many results TaskResults copies under a run's lock.
const resultChunk = 1024

// asAtRead is res, made final after a read began (TaskResults), as it
// was then: running since it started, or pending when it never started
// (only prepare starts a target, and it sets Started): a target cancelled
// before it was sent was given as running, a state it never had.
func asAtRead(res model.Result) model.Result {
	state := model.StateRunning
	if res.Started.IsZero() {
		state = model.StatePending
	}
	return model.Result{TaskID: res.TaskID, Host: res.Host, ProcKey: res.ProcKey, ValueKey: res.ValueKey, AgentID: res.AgentID,
		Op: res.Op, State: state, Started: res.Started}
}

// TaskSummary is Task without its results (backend.TaskSummarizer): the
// task, its counts and its roll. A console's watch reads its task so at
// each refresh and at its end; through Task it copied every result (a
// run's 228,000, 62 MB, or, once the run was let go, the store's, with a
// map of them by target) to drop them.
func (e *Engine) TaskSummary(ctx context.Context, id string) (backend.TaskView, error) {
	r := e.heldRun(id)
	if r != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		return backend.TaskView{Task: r.task, Roll: r.rollViewLocked(e.now())}, nil
	}
	if rr, ok := e.st.(TaskRecordReader); ok {
		t, err := rr.TaskRecord(ctx, id)
		if err != nil {
			return backend.TaskView{}, fmt.Errorf("task: %w", err)
		}
		// A complete task's record is Task's task (TaskHead); a roll's
		// view is made from its results, and an unfinished task's
		// counts, run elsewhere, too.
		if t.Status.Final() && t.Rollout == nil {
			return backend.TaskView{Task: t}, nil
		}
	}
	v, err := e.Task(ctx, id)
	v.Results = nil
	return v, err
}

// Tasks lists recent tasks, newest first, with live counts for running ones.
func (e *Engine) Tasks(ctx context.Context, limit int) ([]model.Task, error) {
	ts, err := e.st.Tasks(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	for i := range ts {
		e.mu.RLock()
		r := e.runs[ts[i].ID]
		e.mu.RUnlock()
		if r != nil {
			r.mu.Lock()
			ts[i] = r.task
			r.mu.Unlock()
			continue
		}
		if e.leaser != nil && !ts[i].Status.Final() {
			// Run by another engine: its counts are in its stored results.
			rs, err := e.st.Results(ctx, ts[i].ID)
			if err != nil {
				continue // deleted meanwhile: keep what was listed
			}
			c := model.Counts{}
			for _, res := range rs {
				if res.State.Final() {
					c.Add(res.State, 1)
				}
			}
			c.Pending = ts[i].Targets - c.Final()
			ts[i].Counts = c
			if c.Final() > 0 {
				ts[i].Status = model.TaskRunning
			}
		}
	}
	return ts, nil
}

// resume restarts the tasks the store says are unfinished. With a Leaser,
// only those whose lease it gets: a task another engine holds is taken
// over by the lease loop once that lease expires.
func (e *Engine) resume(ctx context.Context) error {
	ts, err := e.st.Tasks(ctx, 0)
	if err != nil {
		return fmt.Errorf("resume: list tasks: %w", err)
	}
	var defs map[string]model.Process // read once, for the first task resumed
	for _, t := range ts {
		if t.Status.Final() {
			continue
		}
		if e.leaser == nil {
			if defs == nil {
				if defs, err = e.registry(ctx); err != nil {
					return fmt.Errorf("resume %s: %w", t.ID, err)
				}
			}
			if err := e.resumeTask(ctx, t.ID, "task resumed", defs); err != nil {
				return err
			}
			continue
		}
		// The renewals run meanwhile (Start began them): the claim makes
		// them renew this lease from the moment it is ours, and keeps the
		// lease scan from taking the task over as a lease in our name that
		// nobody here runs.
		hold, ok := e.claim(t.ID)
		if !ok {
			continue // taken over by the lease scan meanwhile
		}
		err := e.resumeLeased(ctx, t.ID, hold, &defs)
		e.mu.Lock()
		delete(e.claims, t.ID)
		e.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// claim marks task id as being created or taken over here (its lease
// renewed, not scanned), unless it is run or claimed here already.
func (e *Engine) claim(id string) (*leaseHold, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.runs[id] != nil || e.claims[id] != nil {
		return nil, false
	}
	hold := &leaseHold{}
	e.claims[id] = hold
	return hold, true
}

// resumeLeased resumes task id at start-up once it has its lease (hold
// is its claim's); a lease held by another engine leaves the task to it.
// defs is the registry, read once for every task resumed.
func (e *Engine) resumeLeased(ctx context.Context, id string, hold *leaseHold, defs *map[string]model.Process) error {
	ok, err := e.leaser.AcquireLease(ctx, id, e.owner, e.leaseTTL)
	if err != nil {
		return fmt.Errorf("resume %s: %w", id, err)
	}
	if !ok {
		return nil
	}
	if *defs == nil {
		if *defs, err = e.registry(ctx); err != nil {
			e.letLeaseGo(context.WithoutCancel(ctx), hold, id, false)
			return fmt.Errorf("resume %s: %w", id, err)
		}
	}
	if err := e.resumeTask(ctx, id, "task resumed", *defs); err != nil {
		e.letLeaseGo(context.WithoutCancel(ctx), hold, id, false)
		return err
	}
	return nil
}

// registry returns the registered processes by key.
func (e *Engine) registry(ctx context.Context) (map[string]model.Process, error) {
	all, err := e.st.Processes(ctx)
	if err != nil {
		return nil, fmt.Errorf("load registry: %w", err)
	}
	defs := make(map[string]model.Process, len(all))
	for _, d := range all {
		defs[d.Process.Key()] = d.Process
	}
	return defs, nil
}

// resumeTask loads an unfinished task with the results already stored and
// runs it: its non-final targets are dispatched again, final ones kept,
// Seq goes on from the highest stored. defs is the registry by key.
func (e *Engine) resumeTask(ctx context.Context, id, why string, defs map[string]model.Process) error {
	t, targets, err := e.st.Task(ctx, id)
	if err != nil {
		return fmt.Errorf("resume %s: %w", id, err)
	}
	if t.Status.Final() {
		return nil
	}
	prior, err := e.st.Results(ctx, id)
	if err != nil {
		return fmt.Errorf("resume %s: results: %w", id, err)
	}
	procs := map[string]model.Process{}
	for _, tg := range targets {
		if p, ok := defs[tg.ProcKey]; ok {
			procs[tg.ProcKey] = p
		}
	}
	r := newRun(t, targets, procs, prior)
	r.resumed = true
	e.mu.RLock()
	if h := e.claims[id]; h != nil {
		r.lease = h // taken over: the claim's renewals and the run's release are kept apart by one lock
	}
	e.mu.RUnlock()
	if t.Rollout != nil {
		if e.rolls == nil {
			return fmt.Errorf("resume %s: a rolling task, and this engine's store keeps no roll controls", id)
		}
		c, err := e.rolls.RollControl(ctx, id)
		if err != nil {
			return fmt.Errorf("resume %s: %w", id, err)
		}
		r.roll = newRollRun(r, c, nil)
	}
	if r.task.Counts.Final() < len(targets) {
		r.task.Status = model.TaskRunning
	}
	if e.fencer != nil {
		// From now on, what the engine that ran it before stores is refused.
		if r.fence, err = e.fencer.Fence(ctx, id); err != nil {
			return fmt.Errorf("resume %s: %w", id, err)
		}
	}
	var finals []model.Result
	complete := false
	if e.board != nil {
		asked, err := e.board.CancelRequested(ctx, id)
		if err != nil {
			return fmt.Errorf("resume %s: %w", id, err)
		}
		if asked {
			// What the engine before sent runs on: each target not final
			// that it may have sent is sent as a cancel by op id (see
			// run.recall); those of a roll's batches not started yet were
			// sent to no host, and are cancelled here.
			sent := len(r.targets)
			if r.roll != nil {
				sent = 0
				if rs := r.task.Roll; rs != nil && rs.Started > 0 && rs.Started <= len(r.roll.plan) {
					sent = r.roll.plan[rs.Started-1].Hi
				}
			}
			r.cancelled, r.recall = true, true
			finals, complete = r.cancelPendingFromLocked(sent, e.now(),
				"cancelled before it was sent to the host (the task was cancelled while no server ran it)")
			r.puts.Add(len(finals))
		}
	}
	e.log.Info(why, "task", t.ID, "op", t.Op.String(), "targets", len(targets),
		"final", r.task.Counts.Final(), "to_dispatch", r.task.Counts.Pending, "owner", e.owner)
	if err := e.launch(r); err != nil {
		return err
	}
	for i := range finals {
		e.enqueue(write{res: &finals[i], fence: r.fence, puts: &r.puts})
	}
	if complete {
		e.finishTask(r)
		return nil
	}
	if r.roll != nil && !r.recall {
		// Likewise a control (pause, abort) written after the roll's was
		// read: rollLoop found no run to give it to.
		if c, err := e.rolls.RollControl(ctx, id); err != nil {
			e.log.Warn("resume: roll control written meanwhile?", "task", id, "err", err)
		} else {
			e.setControl(r, c)
		}
	}
	if e.board != nil && !r.recall {
		// A cancel recorded after the check above, and seen by the watch
		// before the run was launched, found no run to cancel
		// (cancelLoop): asked again now that the watch finds it.
		asked, err := e.board.CancelRequested(ctx, id)
		if err != nil {
			e.log.Warn("resume: cancel requested meanwhile?", "task", id, "err", err)
		} else if asked {
			if _, err := e.cancelRun(r); err != nil {
				e.log.Warn("resume: cancel requested meanwhile", "task", id, "err", err)
			}
		}
	}
	return nil
}
