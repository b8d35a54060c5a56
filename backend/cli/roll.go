package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// rollFlags are op's flags that roll an operation batch by batch.
type rollFlags struct {
	batch, canary, pause, maxFail, scope string
}

func (r *rollFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.batch, "batch", "", "roll the op: `N` hosts (or N% of them) a batch, one batch after the other")
	fs.StringVar(&r.canary, "canary", "", "with --batch: a first batch of `N` hosts (or N%); any failure in it stops the roll")
	fs.StringVar(&r.pause, "pause", "", "with --batch: pause between batches, a `duration` (30s) or manual (until 'gseproc task resume ID')")
	fs.StringVar(&r.maxFail, "max-fail", "", "with --batch: failures tolerated, `N` or N% (default 0: the first failure stops the roll); unreachable and timed-out hosts are failures")
	fs.StringVar(&r.scope, "fail-scope", "", "with --batch: count --max-fail over each `batch` (default) or the whole task")
}

// parse returns the rollout the flags ask for (nil: none); the server
// checks it (every bad field named).
func (r *rollFlags) parse() (*model.RolloutSpec, error) {
	if r.batch == "" {
		var given []string
		for _, f := range []struct{ name, v string }{{"--canary", r.canary}, {"--pause", r.pause}, {"--max-fail", r.maxFail}, {"--fail-scope", r.scope}} {
			if f.v != "" {
				given = append(given, f.name)
			}
		}
		if len(given) > 0 {
			return nil, usageError("op", "%s roll the op: give --batch too", strings.Join(given, ", "))
		}
		return nil, nil
	}
	return &model.RolloutSpec{Batch: r.batch, Canary: r.canary, Pause: r.pause, MaxFail: r.maxFail, FailScope: model.FailScope(r.scope)}, nil
}

// batchPrinter says, on w, when an op's results move on to the next
// batch of a roll, and where the roll is when it waits.
type batchPrinter struct {
	w     io.Writer
	of    map[model.Target]int // target -> batch
	sizes []model.BatchView
	at    int // the batch last announced, -1 none
	said  string
}

// newBatchPrinter is nil when the task is no roll (its methods do nothing).
func newBatchPrinter(v backend.TaskView, w io.Writer) *batchPrinter {
	if v.Roll == nil {
		return nil
	}
	p := &batchPrinter{w: w, of: make(map[model.Target]int, len(v.Results)), sizes: v.Roll.Batches, at: -1}
	i := 0
	for b, bv := range v.Roll.Batches {
		for range bv.Size {
			if i < len(v.Results) {
				p.of[model.Target{Host: v.Results[i].Host, ProcKey: v.Results[i].ProcKey}] = b
			}
			i++
		}
	}
	return p
}

// result announces the batch of r when it is a new one.
func (p *batchPrinter) result(r model.Result) {
	if p == nil {
		return
	}
	b, ok := p.of[model.Target{Host: r.Host, ProcKey: r.ProcKey}]
	if !ok || b <= p.at || r.State == model.StateCancelled {
		return
	}
	p.at = b
	bv := p.sizes[b]
	kind := "batch"
	if bv.Canary {
		kind = "canary batch"
	}
	fmt.Fprintf(p.w, "-- %s %d of %d: %d host(s), %d target(s)\n", kind, b+1, len(p.sizes), bv.Hosts, bv.Size)
}

// state says where the roll is, once per change.
func (p *batchPrinter) state(v model.RollView) {
	if p == nil {
		return
	}
	line := fmt.Sprintf("roll %s: %s", v.State, v.Reason)
	if !v.Until.IsZero() {
		line += fmt.Sprintf(" (until %s)", v.Until.Local().Format(time.TimeOnly))
	}
	if line != p.said {
		p.said = line
		fmt.Fprintln(p.w, line)
	}
}

// printBatches prints a roll: its state, threshold, why it stopped and a
// table of its batches.
func printBatches(w io.Writer, v model.RollView) {
	fmt.Fprintf(w, "roll %s: %s; %s\n", v.State, v.Reason, v.Threshold)
	if c := v.Control; c.Paused {
		fmt.Fprintf(w, "paused by %s at %s\n", c.PausedBy, c.PausedAt.Local().Format(time.DateTime))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BATCH\tHOSTS\tSTATE\tTARGETS\tOK\tFAILED\tCANCELLED\tRUNNING\tPENDING")
	for i, b := range v.Batches {
		name := fmt.Sprint(i + 1)
		if b.Canary {
			name += " (canary)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", name, b.Hosts, b.State, b.Size, b.OK, b.Bad, b.Cancelled, b.Running, b.Pending)
	}
	_ = tw.Flush()
}

func taskUsage(fs *flag.FlagSet) func() {
	return func() {
		w := fs.Output()
		fmt.Fprintf(w, `Usage: gseproc task ACTION ID [flags]

Act on a task (wherever it runs when --server names a cluster):
  show    the task's counts and, for a roll, its batches, threshold and why it stopped
  pause   a roll: no more hosts are sent the op until it is resumed (those running it finish)
  resume  a roll: it goes on (after a pause, or past a manual pause between batches)
  abort   a roll: the targets not sent yet are cancelled and the roll ends
  cancel  any task: pending targets are cancelled, running ones told to stop

Flags:
`)
		fs.PrintDefaults()
		fmt.Fprintf(w, `
Examples:
  gseproc op restart --ns web --batch 10%% --canary 1 --max-fail 2 --pause manual
  gseproc task resume GSETASK:20260101120000:17 --server http://10.0.0.5:8080
`)
	}
}

// runTask shows, pauses, resumes, aborts or cancels a task.
func runTask(ctx context.Context, args []string, io Stdio) error {
	fs := newFlags("task", "task ACTION ID [flags]", io)
	var cf commonFlags
	cf.register(fs)
	jsonOut := fs.Bool("json", false, "print the task view as JSON")
	fs.Usage = taskUsage(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageError("task", "want ACTION ID, got %q", pos)
	}
	action, id := pos[0], pos[1]
	if _, _, err := model.ParseTaskID(id); err != nil {
		return usageError("task", "%v", err)
	}
	var act model.RollAction
	switch action {
	case "show", "cancel":
	default:
		if act, err = model.ParseRollAction(action); err != nil {
			return usageError("task", "ACTION: want show, pause, resume, abort or cancel, got %q", action)
		}
	}
	b, closeBackend, err := cf.open(ctx, io)
	if err != nil {
		return err
	}
	defer closeBackend()
	switch {
	case action == "cancel":
		err = b.Cancel(ctx, id)
	case act != "":
		_, err = b.ControlRoll(ctx, id, act)
	}
	if err != nil {
		if errors.Is(err, model.ErrConflict) || errors.Is(err, model.ErrNotFound) {
			return &ExitError{Code: 1, Err: err}
		}
		return err
	}
	v, err := b.Task(ctx, id)
	if err != nil {
		return err
	}
	if *jsonOut {
		return jsonLines(io.Out, []backend.TaskView{v})
	}
	if act != "" || action == "cancel" {
		fmt.Fprintf(io.Out, "%s: %s asked\n", id, action)
	}
	fmt.Fprintln(io.Out, summary(v.Task, v.Task.Finished.Sub(v.Task.Created).Round(time.Millisecond)))
	if v.Task.Rollout != nil {
		fmt.Fprintf(io.Out, "rolled: %s\n", v.Task.Rollout)
	}
	if v.Roll != nil {
		printBatches(io.Out, *v.Roll)
	}
	return nil
}
