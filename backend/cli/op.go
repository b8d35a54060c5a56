package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gseproc/backend"
	"gseproc/backend/client"
	"gseproc/backend/node"
	"gseproc/backend/server/wire"
	"gseproc/model"
)

// stallNote is how long op waits without a result before saying so.
const stallNote = 3 * time.Second

// targetFlags are the selector flags op, hosts and procs share.
type targetFlags struct {
	ns, name      string
	labels, hosts multiFlag
}

func (t *targetFlags) register(fs *flag.FlagSet, withHosts bool) {
	fs.StringVar(&t.ns, "ns", "", "namespace of the processes (e.g. web, biz_2)")
	fs.StringVar(&t.name, "name", "", "process name within the namespace (e.g. nginx)")
	fs.Var(&t.labels, "label", "process label selector `key=value` (repeatable; all must match)")
	if withHosts {
		fs.Var(&t.hosts, "host", "only these hosts, as `cloud:ip` (repeatable), e.g. 0:10.0.0.1")
	}
}

// parse checks the flags, collecting every error.
func (t *targetFlags) parse(cmd string) (map[string]string, []model.Host, error) {
	var problems []string
	var labels map[string]string
	for _, l := range t.labels {
		k, v, err := model.ParseLabel(l)
		if err != nil {
			problems = append(problems, fmt.Sprintf("--label %q: want key=value", l))
			continue
		}
		if labels == nil {
			labels = map[string]string{}
		}
		labels[k] = v
	}
	var hosts []model.Host
	for _, s := range t.hosts {
		h, err := model.ParseAgentID(s)
		if err != nil {
			problems = append(problems, "--host: "+err.Error())
			continue
		}
		hosts = append(hosts, h)
	}
	if len(problems) > 0 {
		return nil, nil, usageError(cmd, "%s", strings.Join(problems, "\n"))
	}
	return labels, hosts, nil
}

// commonFlags are the flags every backend-using command has.
type commonFlags struct {
	server, config string
	verbose        bool
	sim            simFlags
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.server, "server", "", serverHelp)
	c.sim.register(fs)
	fs.StringVar(&c.config, "config", "", "config `FILE` (default: $GSEPROC_CONFIG, then $XDG_CONFIG_HOME/gseproc/config.toml, then /etc/gseproc/config.toml)")
	fs.BoolVar(&c.verbose, "v", false, "log at the configured level (default: warnings only)")
}

// open loads the config and opens the backend.
func (c *commonFlags) open(ctx context.Context, io Stdio) (backend.Backend, func() error, error) {
	cfg, err := loadConfig(c.config, io)
	if err != nil {
		return nil, nil, &ExitError{Code: 2, Err: err}
	}
	logCfg := cfg.Log
	if !c.verbose && cfg.Log.File == "" {
		logCfg.Level = "warn"
	}
	c.sim.apply(&cfg)
	server := c.server
	if server == "" {
		server = chooseServer(ctx, cfg, c.sim, io)
	}
	return node.OpenBackend(ctx, cfg, server, Version, newLogger(logCfg, io.Err))
}

func opUsage(fs *flag.FlagSet) func() {
	return func() {
		w := fs.Output()
		fmt.Fprintf(w, `Usage: gseproc op OP [flags]

Send one operation to the processes the flags select, print each host's
result as it arrives and a summary. OP is a name or its op_type number:
`)
		for _, op := range model.AllOps() {
			fmt.Fprintf(w, "  %d %-10s %s\n", int(op), op, op.Describe())
		}
		fmt.Fprintf(w, `
Targets: every (host, process) pair where a process matching --ns, --name
and --label is deployed, limited to --host when given. At least one of them
is required.

Exit status: 0 every result OK (828 on start, 829 on stop count as OK);
1 some host failed, timed out or was unreachable, or the wait was cut short;
2 bad usage or an invalid request (each bad field is named).

Flags:
`)
		fs.PrintDefaults()
		fmt.Fprintf(w, `
Examples:
  gseproc op start --ns web --name nginx
  gseproc op 2 --label app=redis --json
  gseproc op restart --ns web --host 0:10.0.0.12 --host 0:10.0.0.13
`)
	}
}

// opLine is one result as --json prints it: the result's own fields plus
// the agent id, the op name, the duration and the content the API's result
// queries show.
type opLine struct {
	model.Result
	Content    string `json:"content,omitempty"`
	AgentID    string `json:"agent_id"`
	OpName     string `json:"op"`
	DurationMS int64  `json:"duration_ms"`
}

func runOp(ctx context.Context, args []string, io Stdio) error {
	fs := newFlags("op", "op OP [flags]", io)
	var tf targetFlags
	var cf commonFlags
	tf.register(fs, true)
	cf.register(fs)
	jsonOut := fs.Bool("json", false, "print one JSON object per host result, one per line, on stdout (the summary goes to stderr)")
	quiet := fs.Bool("quiet", false, "print only the results that are not OK, and the summary")
	timeout := fs.Duration("timeout", 0, "stop waiting after this long (e.g. 30s): pending targets are cancelled and the exit status is 1 (0 = wait for every host's own deadline)")
	var rf rollFlags
	rf.register(fs)
	fs.Usage = opUsage(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usageError("op", "missing OP: one of start, stop, status, register, unregister, restart, reload, kill (or its op_type number)")
	case len(pos) > 1:
		return usageError("op", "one OP only, got %q", pos)
	}
	op, err := model.ParseOp(pos[0])
	if err != nil {
		return usageError("op", "%v", err)
	}
	labels, hosts, err := tf.parse("op")
	if err != nil {
		return err
	}
	sel := backend.Selector{Namespace: tf.ns, Name: tf.name, Labels: labels, Hosts: hosts}
	if sel.Empty() {
		return usageError("op", "no targets: give --ns, --name, --label or --host")
	}
	if *timeout < 0 {
		return usageError("op", "--timeout %s must be >= 0", *timeout)
	}
	rollout, err := rf.parse()
	if err != nil {
		return err
	}

	b, closeBackend, err := cf.open(ctx, io)
	if err != nil {
		return err
	}
	defer closeBackend()

	start := time.Now()
	task, err := b.Operate(ctx, backend.OperateRequest{Op: op, Selector: sel, Source: "cli", Operator: operator(), Rollout: rollout})
	if err != nil {
		var ve model.ValidationError
		if errors.As(err, &ve) {
			lines := make([]string, len(ve))
			for i, f := range ve {
				lines[i] = "  " + f.Error()
			}
			return &ExitError{Code: 2, Err: fmt.Errorf("invalid request:\n%s", strings.Join(lines, "\n"))}
		}
		if errors.Is(err, model.ErrReadOnly) {
			return &ExitError{Code: 2, Err: err}
		}
		return err
	}

	waitCtx, cancelWait := ctx, context.CancelFunc(func() {})
	if *timeout > 0 {
		waitCtx, cancelWait = context.WithTimeout(ctx, *timeout)
	}
	defer cancelWait()
	// Results in batches when the backend sends them so (a client of a
	// server), else one by one.
	// The --json lines take the text of each result as the server sent
	// it, when it is exact (resultTextWatcher).
	var ch <-chan model.Result
	var batched <-chan []model.Result
	var texts <-chan client.ResultBatch
	if tw, ok := b.(resultTextWatcher); ok && *jsonOut {
		texts, err = tw.WatchResultBatches(waitCtx, task.ID, 0)
	} else if bw, ok := b.(batchWatcher); ok {
		batched, err = bw.WatchBatches(waitCtx, task.ID, 0)
	} else {
		ch, err = b.Watch(waitCtx, task.ID, 0)
	}
	if err != nil {
		return fmt.Errorf("watch %s: %w", task.ID, err)
	}

	// Results are written through a buffer, flushed whenever no further
	// result waits, at most once every flushGap: results that arrive
	// together leave in one write, a lone one within flushGap (a write
	// per result was 100,000 system calls; a write per batch read, a
	// few thousand, 7% of the client's CPU).
	out := bufio.NewWriterSize(io.Out, 64<<10)
	pr := &resultPrinter{out: out, json: *jsonOut, quiet: *quiet, status: op == model.OpStatus}
	var batches *batchPrinter
	if !pr.json || task.Rollout != nil {
		if view, err := b.Task(ctx, task.ID); err == nil {
			pr.widths(view.Results)
			batches = newBatchPrinter(view, io.Err)
		}
	}
	if !pr.json {
		fmt.Fprintf(io.Err, "%s: %s on %d target(s)\n", task.ID, op, task.Targets)
		if task.Rollout != nil {
			fmt.Fprintf(io.Err, "rolled: %s; %d batches (gseproc task pause|resume|abort %s)\n", task.Rollout, task.Roll.Batches, task.ID)
		}
		pr.header()
		if err := out.Flush(); err != nil {
			return err
		}
	}
	// A note on stderr when results stall (hosts that do not answer hold
	// only their own result, up to their own deadline).
	got := 0
	var counts model.Counts
	stall := time.NewTimer(stallNote)
	defer stall.Stop()
	var lastFlush time.Time
	flushT := time.NewTimer(flushGap) // armed when a flush waits for its gap
	flushT.Stop()
	defer flushT.Stop()
	flushArmed := false
	// results prints rs; text, when not nil, is the exact text of rs[i]
	// (or nil).
	results := func(rs []model.Result, text func(i int) []byte) error {
		for i := range rs {
			r := &rs[i]
			got++
			counts.Add(r.State, 1)
			batches.result(*r)
			var t []byte
			if text != nil {
				t = text(i)
			}
			if err := pr.print(r, t); err != nil {
				return err
			}
		}
		if len(ch) == 0 && len(batched) == 0 && len(texts) == 0 && !flushArmed {
			if wait := flushGap - time.Since(lastFlush); wait > 0 {
				flushT.Reset(wait)
				flushArmed = true
			} else {
				if err := out.Flush(); err != nil {
					return err
				}
				lastFlush = time.Now()
			}
		}
		stall.Reset(stallNote)
		return nil
	}
	var one [1]model.Result
wait:
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				break wait
			}
			one[0] = r
			if err := results(one[:], nil); err != nil {
				return err
			}
		case rs, ok := <-batched:
			if !ok {
				break wait
			}
			if err := results(rs, nil); err != nil {
				return err
			}
		case tb, ok := <-texts:
			if !ok {
				break wait
			}
			if err := results(tb.Results, tb.Text); err != nil {
				return err
			}
			tb.Done() // nothing of it is kept: its room is read into again
		case <-flushT.C:
			flushArmed = false
			if err := out.Flush(); err != nil {
				return err
			}
			lastFlush = time.Now()
		case <-stall.C:
			if task.Rollout != nil {
				// A roll holds its targets between batches: say why.
				if v, err := b.Task(ctx, task.ID); err == nil && v.Roll != nil {
					batches.state(*v.Roll)
				}
				break
			}
			if !*quiet {
				fmt.Fprintf(io.Err, "waiting for %d of %d target(s); each host has its own deadline (op_timeout + start check; --timeout caps the wait)\n",
					task.Targets-got, task.Targets)
			}
		}
	}

	// The channel closed: the task is complete, or the wait was cut short.
	if err := pr.flush(); err != nil {
		return err
	}
	if err := out.Flush(); err != nil {
		return err
	}
	cut := got < task.Targets
	if cut {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = b.Cancel(cctx, task.ID)
		cancel()
	}
	// Complete: every result came through the watch, which ends once the
	// task is stored complete; the summary is theirs (reading the task
	// back would move every result again: 130 MB at 100,000 hosts).
	// Only a cut wait asks the server where the task stands.
	t := task
	t.Counts, t.Status = counts, counts.Outcome(counts.Cancelled > 0)
	if cut {
		vctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		view, err := b.Task(vctx, task.ID)
		cancel()
		if err != nil {
			return fmt.Errorf("task %s: %w", task.ID, err)
		}
		t = view.Task
	}
	summaryTo := io.Out
	if pr.json {
		summaryTo = io.Err
	}
	if !(pr.json && *quiet) {
		fmt.Fprintln(summaryTo, summary(t, time.Since(start)))
	}
	if task.Rollout != nil {
		// The roll's end: its batches and why it stopped (read back once).
		vctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if v, err := b.Task(vctx, task.ID); err == nil && v.Roll != nil {
			printBatches(io.Err, *v.Roll)
		}
		cancel()
	}
	switch {
	case cut:
		why := "interrupted"
		if ctx.Err() == nil {
			why = fmt.Sprintf("gave up after --timeout %s", *timeout)
		}
		return &ExitError{Code: 1, Err: fmt.Errorf("%s with %d of %d results; pending targets cancelled", why, got, t.Targets)}
	case t.Counts.Bad() > 0:
		return &ExitError{Code: 1, Err: fmt.Errorf("%d of %d targets not OK", t.Counts.Bad(), t.Targets)}
	}
	return nil
}

// flushGap is the least time between two flushes of an op's results
// (runOp). A variable for TestOpPrintsALoneResult alone, which widens it
// so that its second result always waits for the timed flush.
var flushGap = 2 * time.Millisecond

// resultTextWatcher is a backend that sends a task's results in batches
// with the text the server sent of each, when it is exact
// (client.Client): an op's --json lines hold that text.
type resultTextWatcher interface {
	WatchResultBatches(ctx context.Context, id string, after int64) (<-chan client.ResultBatch, error)
}

// batchWatcher is a backend that sends a task's results in batches
// (client.Client): an op over 100,000 hosts handed over one by one woke
// the printing goroutine for every result.
type batchWatcher interface {
	WatchBatches(ctx context.Context, id string, after int64) (<-chan []model.Result, error)
}

func operator() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

// summary is the one-line outcome of a task.
func summary(t model.Task, elapsed time.Duration) string {
	c := t.Counts
	parts := []string{}
	for _, p := range []struct {
		n    int
		name string
	}{{c.Success, "success"}, {c.Failed, "failed"}, {c.Timeout, "timeout"}, {c.Unreachable, "unreachable"},
		{c.Cancelled, "cancelled"}, {c.Skipped, "skipped"}, {c.Running, "running"}, {c.Pending, "pending"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.name))
		}
	}
	return fmt.Sprintf("%s: %s %s, %d target(s): %s in %s", t.ID, t.Op, t.Status, t.Targets,
		strings.Join(parts, ", "), elapsed.Round(time.Millisecond))
}

// resultPrinter prints results as aligned lines or JSON lines. The status
// op's lines show each process's state, pid, uptime, cpu and memory, and
// are printed at the end, failures and processes not up first.
type resultPrinter struct {
	out        io.Writer
	json       bool
	quiet      bool
	status     bool
	held       []model.Result // status results, printed sorted by flush
	hostW      int
	procW      int
	headerDone bool
	buf        []byte              // a --json line's, reused
	enc        model.ResultEncoder // the --json lines' results
}

// appendResultLineText appends r's --json line, json.Marshal of its
// opLine (TestOpLineJSON, FuzzOpLineJSON compare the two), as the printer
// writes it: the result by enc (its times' text kept from one result to
// the next), the content quoted as it is written, the agent id without a
// string made, nothing allocated. An op over 100,000 hosts prints 100,000
// lines; by reflection they were most of the client's CPU. text, when not
// nil, is exactly what model.AppendResultJSON writes of *r (the text the
// server sent, as model.ResultDecoder.DecodeExact read it): the line holds
// the text itself, not the result written again (a sixth of the op
// client's CPU), when the result has no agent_id of its own (the line's
// hides it: then the result is written without it). TestOpLineText,
// FuzzOpLineText compare the two.
func appendResultLineText(b []byte, enc *model.ResultEncoder, r *model.Result, text []byte) ([]byte, error) {
	if r.AgentID == "" && len(text) > 0 && text[len(text)-1] == '}' {
		b = append(b, text...)
	} else {
		rc := *r
		rc.AgentID = "" // opLine's own agent_id hides the result's
		var err error
		if b, err = enc.Append(b, &rc); err != nil {
			return b, err
		}
	}
	// The result's object without its '}', then opLine's fields.
	b = append(b[:len(b)-1], `,"content":`...)
	n := len(b)
	if b = wire.AppendContentString(b, r); len(b) == n { // no content
		b = b[:n-len(`,"content":`)]
	}
	var ab [24 + model.MaxIPText]byte
	return appendOpLineEnd(b, r.Host.AppendAgentID(ab[:0]), r.Op.String(), r.Duration().Milliseconds()), nil
}

// appendOpLineEnd appends an opLine's fields after its content (agent_id,
// op, duration_ms) and the line's '}'.
func appendOpLineEnd[S string | []byte](b []byte, agentID S, op string, durationMS int64) []byte {
	b = model.AppendJSONString(append(b, `,"agent_id":`...), agentID)
	b = model.AppendJSONString(append(b, `,"op":`...), op)
	b = strconv.AppendInt(append(b, `,"duration_ms":`...), durationMS, 10)
	return append(b, '}')
}

func (p *resultPrinter) widths(rs []model.Result) {
	p.hostW, p.procW = len("HOST"), len("PROC")
	for _, r := range rs {
		p.hostW = max(p.hostW, len(r.Host.AgentID()))
		p.procW = max(p.procW, len(r.ProcKey))
	}
}

func (p *resultPrinter) header() {
	if p.quiet {
		return
	}
	if p.status {
		fmt.Fprintf(p.out, "%-*s  %-*s  %-11s  %7s  %11s  %6s  %6s  %s\n", p.hostW, "HOST", p.procW, "PROC", "STATE", "PID", "UPTIME", "CPU", "MEM", "MESSAGE")
		return
	}
	fmt.Fprintf(p.out, "%-*s  %-*s  %-11s  %7s  %8s  %s\n", p.hostW, "HOST", p.procW, "PROC", "STATE", "CODE", "TIME", "MESSAGE")
}

// statusRank orders status results: failures, then processes not up, then
// the rest.
func statusRank(r model.Result) int {
	switch {
	case !r.State.OK():
		return 0
	case r.Status != nil && !r.Status.State.Up():
		return 1
	}
	return 2
}

// flush prints the held status results, worst first, then by host.
func (p *resultPrinter) flush() error {
	sort.SliceStable(p.held, func(i, j int) bool {
		a, b := p.held[i], p.held[j]
		if x, y := statusRank(a), statusRank(b); x != y {
			return x < y
		}
		if c := model.CompareHosts(a.Host, b.Host); c != 0 {
			return c < 0
		}
		return a.ProcKey < b.ProcKey
	})
	for _, r := range p.held {
		if err := p.statusLine(r); err != nil {
			return err
		}
	}
	p.held = nil
	return nil
}

// statusLine prints one status result: the process as reported, or why
// there is no report.
func (p *resultPrinter) statusLine(r model.Result) error {
	state, pid, up, cpu, mem, msg := string(r.State), "-", "-", "-", "-", r.Message
	if st := r.Status; st != nil && r.State.OK() {
		state, cpu, mem, msg = string(st.State), fmt.Sprintf("%.1f%%", st.CPU), fmt.Sprintf("%.1f%%", st.Mem), st.Message
		if st.State.Up() && st.PID > 0 {
			pid = strconv.Itoa(st.PID)
			if !st.StartTime.IsZero() && !r.Finished.IsZero() {
				up = r.Finished.Sub(st.StartTime).Round(time.Second).String()
			}
		}
	}
	// UPTIME holds a month's "720h12m32s" and more: at 8 the columns after
	// it shifted on every host up longer than 99 hours.
	_, err := fmt.Fprintf(p.out, "%-*s  %-*s  %-11s  %7s  %11s  %6s  %6s  %s\n", p.hostW, r.Host.AgentID(), p.procW, r.ProcKey,
		state, pid, up, cpu, mem, oneLine(msg, 160))
	return err
}

// print prints r; text, when not nil, is exactly what
// model.AppendResultJSON writes of it (appendResultLineText).
func (p *resultPrinter) print(r *model.Result, text []byte) error {
	if p.quiet && r.State.OK() {
		return nil
	}
	if p.json {
		var err error
		p.buf, err = appendResultLineText(p.buf[:0], &p.enc, r, text)
		if err != nil {
			return fmt.Errorf("encode result: %w", err)
		}
		_, err = p.out.Write(append(p.buf, '\n'))
		return err
	}
	if p.status {
		p.held = append(p.held, *r)
		return nil
	}
	_, err := fmt.Fprintf(p.out, "%-*s  %-*s  %-11s  %7d  %8s  %s\n", p.hostW, r.Host.AgentID(), p.procW, r.ProcKey,
		r.State, r.Code, r.Duration().Round(time.Millisecond), oneLine(r.Message, 160))
	return err
}

// oneLine is s (text from the fleet) made plain (model.PlainText: no escape
// sequence or control character reaches the terminal), its whitespace
// folded, cut to n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(model.PlainText(s)), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// listFlags are the flags of hosts and procs.
type listFlags struct {
	targetFlags
	commonFlags
	json bool
}

func (l *listFlags) register(fs *flag.FlagSet, withHosts bool) {
	l.targetFlags.register(fs, withHosts)
	l.commonFlags.register(fs)
	fs.BoolVar(&l.json, "json", false, "print one JSON object per line instead of a table")
}

func listUsage(fs *flag.FlagSet, synopsis, what string) func() {
	return func() {
		fmt.Fprintf(fs.Output(), "Usage: gseproc %s\n\n%s\n\nFlags:\n", synopsis, what)
		fs.PrintDefaults()
	}
}

func runHosts(ctx context.Context, args []string, io Stdio) error {
	fs := newFlags("hosts", "hosts [flags]", io)
	var lf listFlags
	lf.register(fs, true)
	limit := fs.Int("limit", 0, "list at most `N` hosts (0 = all)")
	fs.Usage = listUsage(fs, "hosts [flags]", "List the fleet's hosts: agent id, cloud area, ip, agent state, labels, and the\n"+
		"processes deployed there (total, and how many were last known running; ? = not\nknown yet). With --ns, --name or --label only hosts carrying a matching process\nare listed and counted.")
	if err := parseList("hosts", fs, args); err != nil {
		return err
	}
	labels, hosts, err := lf.targetFlags.parse("hosts")
	if err != nil {
		return err
	}
	b, closeBackend, err := lf.open(ctx, io)
	if err != nil {
		return err
	}
	defer closeBackend()
	hv, err := b.Hosts(ctx, backend.HostQuery{Namespace: lf.ns, Name: lf.name, Labels: labels, Hosts: hosts, Limit: *limit})
	if err != nil {
		return err
	}
	if lf.json {
		return jsonLines(io.Out, hv)
	}
	tw := tabwriter.NewWriter(io.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tCLOUD\tIP\tAGENT_ID\tSTATE\tPROCS\tRUNNING\tLABELS")
	online := 0
	for _, h := range hv {
		running, unknown := 0, 0
		for _, p := range h.Procs {
			switch {
			case p.Status.State == model.ProcUnknown || p.Status.State == "":
				unknown++
			case p.Status.State.Up():
				running++
			}
		}
		runCol := strconv.Itoa(running)
		switch {
		case len(h.Procs) == 0:
		case unknown == len(h.Procs):
			runCol = "?" // no status known yet: run 'gseproc op status'
		case unknown > 0:
			runCol += "+?"
		}
		if h.State == model.AgentOnline {
			online++
		}
		agentID := h.AgentID
		if agentID == "" {
			agentID = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\n", h.Host.AgentID(), h.Host.CloudID, h.Host.IP, agentID, h.State,
			len(h.Procs), runCol, strings.Join(model.SortedLabels(h.Labels), ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(io.Err, "%d host(s), %d online\n", len(hv), online)
	return nil
}

func runProcs(ctx context.Context, args []string, io Stdio) error {
	fs := newFlags("procs", "procs [flags]", io)
	var lf listFlags
	lf.register(fs, false)
	host := fs.String("host", "", "only definitions deployed on this host, as `cloud:ip`")
	fs.Usage = listUsage(fs, "procs [flags]", "List the process definitions: key (namespace:name), proc_name, hosting type,\nthe number of hosts it is deployed on, and labels.")
	if err := parseList("procs", fs, args); err != nil {
		return err
	}
	labels, _, err := lf.targetFlags.parse("procs")
	if err != nil {
		return err
	}
	q := backend.ProcQuery{Namespace: lf.ns, Name: lf.name, Labels: labels}
	if *host != "" {
		h, err := model.ParseAgentID(*host)
		if err != nil {
			return usageError("procs", "--host: %v", err)
		}
		q.Host = &h
	}
	b, closeBackend, err := lf.open(ctx, io)
	if err != nil {
		return err
	}
	defer closeBackend()
	defs, err := b.Processes(ctx, q)
	if err != nil {
		return err
	}
	sort.Slice(defs, func(i, j int) bool { return defs[i].Process.Key() < defs[j].Process.Key() })
	if lf.json {
		return jsonLines(io.Out, defs)
	}
	tw := tabwriter.NewWriter(io.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tPROC_NAME\tTYPE\tHOSTS\tLABELS")
	for _, d := range defs {
		p := d.Process
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", p.Key(), p.Spec.Identity.ProcName, p.Spec.Policy.AutoType,
			len(d.Hosts), strings.Join(model.SortedLabels(p.Meta.Labels), ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(io.Err, "%d definition(s)\n", len(defs))
	return nil
}

// jsonLines writes each element as one JSON object on its own line.
func jsonLines[T any](w io.Writer, xs []T) error {
	enc := json.NewEncoder(w)
	for _, x := range xs {
		if err := enc.Encode(x); err != nil {
			return fmt.Errorf("encode: %w", err)
		}
	}
	return nil
}
