package scenario

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gseproc/model"
)

const minimal = `
name = "t"
[fleet]
seed = 3
hosts = 50
`

func TestParseRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, steps string
		fields      []string
	}{
		{"no steps", "", []string{"step"}},
		{"unknown key", "[[step]]\nat = \"1s\"\naction = \"offline\"\nshaer = 0.1\n", []string{"step.shaer"}},
		{"bad at", "[[step]]\nat = \"soon\"\naction = \"offline\"\n", []string{"step[0].at"}},
		{"out of order", "[[step]]\nat = \"5s\"\naction = \"offline\"\n[[step]]\nat = \"2s\"\naction = \"online\"\n", []string{"step[1].at"}},
		{"bad share", "[[step]]\nat = \"1s\"\naction = \"offline\"\nshare = \"300%\"\n", []string{"step[0].share"}},
		{"bad action", "[[step]]\nat = \"1s\"\naction = \"explode\"\n", []string{"step[0].action"}},
		{"crash needs a process", "[[step]]\nat = \"1s\"\naction = \"crash\"\nnamespace = \"web\"\n", []string{"step[0].selector.name"}},
		{"op needs a namespace", "[[step]]\nat = \"1s\"\naction = \"op\"\nop = \"status\"\n", []string{"step[0].namespace"}},
		{"bad op", "[[step]]\nat = \"1s\"\naction = \"op\"\nop = \"explode\"\nnamespace = \"web\"\n", []string{"step[0].op"}},
		{"unknown namespace", "[[step]]\nat = \"1s\"\naction = \"offline\"\nnamespace = \"wbe\"\n", []string{"step[0].namespace"}},
		{"bad host", "[[step]]\nat = \"1s\"\naction = \"flap\"\nhosts = [\"0:10.0.0.999\"]\n", []string{"step[0].hosts[0]"}},
		{"bad rollout", "[[step]]\nat = \"1s\"\naction = \"op\"\nop = \"restart\"\nnamespace = \"web\"\n[step.rollout]\nbatch = \"0%\"\npause = \"soon\"\n", []string{"step[0].rollout.batch", "step[0].rollout.pause"}},
		{"rollout on a control", "[[step]]\nat = \"1s\"\naction = \"offline\"\n[step.rollout]\nbatch = \"10%\"\n", []string{"step[0].rollout"}},
		{"end before last", "end = \"1s\"\n[[step]]\nat = \"5s\"\naction = \"offline\"\n", []string{"end"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := minimal + tc.steps
			if strings.HasPrefix(tc.steps, "end") {
				src = "end = \"1s\"\n" + minimal + strings.TrimPrefix(tc.steps, "end = \"1s\"\n")
			}
			_, err := Parse([]byte(src))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, f := range tc.fields {
				if !strings.Contains(err.Error(), f+":") {
					t.Errorf("refusal does not name %s: %v", f, err)
				}
			}
		})
	}
	if _, err := Parse([]byte("name = \"t\"\n[fleet]\nseed = 0\n[[step]]\nat = \"1s\"\naction = \"offline\"\n")); err == nil || !strings.Contains(err.Error(), "fleet.seed") {
		t.Fatalf("seed 0: %v", err)
	}
}

// run tells a shipped scenario headless, twice: the same seed must tell
// the same story (events and final state).
func run(t *testing.T, file string) Result {
	t.Helper()
	sc, err := Load(filepath.Join("..", "..", "testdata", "scenarios", file))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := Headless(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Headless(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	if as, bs := story(a.Events), story(b.Events); !slices.Equal(as, bs) {
		t.Fatalf("the same seed told another story:\n%s\n---\n%s", strings.Join(as, "\n"), strings.Join(bs, "\n"))
	}
	if a.Final.String() != b.Final.String() {
		t.Fatalf("the same seed ended elsewhere:\n%s---\n%s", a.Final, b.Final)
	}
	for _, s := range a.Steps {
		if s.Err != nil {
			t.Fatalf("step %d (%s): %v", s.Index, s.Step.What(), s.Err)
		}
	}
	first, last := a.Events[0], a.Events[len(a.Events)-1]
	if !strings.Contains(first.Message, "begins") || !strings.Contains(last.Message, "ended") {
		t.Fatalf("the story is not framed: %q ... %q", first.Message, last.Message)
	}
	return a
}

// story is the events as text, in time order; events of one instant (an
// op's hosts answer concurrently) in a fixed order.
func story(evs []model.Event) []string {
	evs = slices.Clone(evs)
	slices.SortStableFunc(evs, func(a, b model.Event) int { return a.Time.Compare(b.Time) })
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%s %s %s %s %s", e.Time.Sub(Epoch), e.Kind, e.Host, e.ProcKey, e.Message)
	}
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && evs[j].Time.Equal(evs[i].Time) {
			j++
		}
		if evs[i].Kind != model.EventSimControl {
			slices.SortFunc(out[i:j], cmp.Compare)
		}
		i = j
	}
	return out
}

func count(evs []model.Event, k model.EventKind) int {
	n := 0
	for _, e := range evs {
		if e.Kind == k {
			n++
		}
	}
	return n
}

func TestCrashStorm(t *testing.T) {
	r := run(t, "crash-storm.toml")
	crashed := r.Steps[0].Outcome.Changed + r.Steps[1].Outcome.Changed
	if r.Steps[0].Outcome.Changed < 20 || r.Steps[1].Outcome.Changed < 10 {
		t.Fatalf("a storm crashes many: %+v %+v", r.Steps[0].Outcome, r.Steps[1].Outcome)
	}
	failed := count(r.Events, model.EventRestartFailed)
	if failed == 0 || failed >= crashed {
		t.Fatalf("%d of %d relaunches failed: want some, not all", failed, crashed)
	}
	if got := count(r.Events, model.EventRestartSuccess); got != crashed {
		t.Fatalf("%d came back of %d crashed", got, crashed)
	}
	for _, k := range []string{"web:nginx", "cache:redis-server"} {
		if st := r.Final.States[k]; st[model.ProcBackoff]+st[model.ProcFatal] != 0 || st[model.ProcRunning] == 0 {
			t.Errorf("%s not absorbed: %v", k, st)
		}
	}
	if task := r.Steps[2].Task; task == nil || task.Counts.Success == 0 || task.Counts.Failed+task.Counts.Timeout+task.Counts.Unreachable != 0 {
		t.Fatalf("status at the end: %+v", task)
	}
}

func TestPartitionHeals(t *testing.T) {
	r := run(t, "partition-heal.toml")
	off := r.Steps[0].Outcome
	if off.Changed == 0 || count(r.Events, model.EventAgentOffline) != off.Changed || count(r.Events, model.EventAgentOnline) != off.Changed {
		t.Fatalf("offline %+v; events offline %d online %d", off, count(r.Events, model.EventAgentOffline), count(r.Events, model.EventAgentOnline))
	}
	if len(r.Final.Offline) != 0 {
		t.Fatalf("still offline at the end: %v", r.Final.Offline)
	}
	if task := r.Steps[4].Task; task == nil || task.Counts.Success == 0 || task.Counts.Success != task.Targets {
		t.Fatalf("status after healing: %+v", task)
	}
}

func TestNoisyNight(t *testing.T) {
	r := run(t, "noisy-night.toml")
	if n := count(r.Events, model.EventLimitExceeded); n != 3 {
		t.Fatalf("%d limit breaches, want 3", n)
	}
	// Two agents, four flaps each: offline and back four times.
	if off, on := count(r.Events, model.EventAgentOffline), count(r.Events, model.EventAgentOnline); off != 8 || on != 8 {
		t.Fatalf("flaps: %d offline, %d online", off, on)
	}
	if task := r.Steps[3].Task; task == nil || task.Counts.Failed == 0 || task.Counts.Success == 0 {
		t.Fatalf("restart under a 50%% failure rate: %+v", task)
	}
	if task := r.Steps[4].Task; task == nil || task.Counts.Success < 3 || task.Counts.Failed+task.Counts.Timeout != 0 {
		t.Fatalf("the operator's start: %+v", task)
	}
	if st := r.Final.States["db:mysqld"]; len(st) != 1 || st[model.ProcRunning] == 0 {
		t.Fatalf("mysqld at the end: %v", st)
	}
	if len(r.Final.Offline) != 0 {
		t.Fatalf("offline at the end: %v", r.Final.Offline)
	}
}

func TestRollingRestart(t *testing.T) {
	r := run(t, "rolling-restart.toml")
	if r.Steps[0].Outcome.Changed == 0 {
		t.Fatalf("no host got the broken build: %+v", r.Steps[0].Outcome)
	}
	roll := r.Steps[1]
	if roll.Task == nil || roll.Roll == nil {
		t.Fatalf("the restart was not rolled: task %+v roll %+v", roll.Task, roll.Roll)
	}
	c := roll.Task.Counts
	if roll.Roll.State != model.RollStateStopped || roll.Roll.Stopped == "" {
		t.Fatalf("the roll did not stop at the failing batch: %+v", roll.Roll)
	}
	// Stopped in the first batch that met a bad host: the batches before
	// it restarted every host, the stopping batch has the failures (its
	// hosts are sent at once), the later batches were never sent.
	if c.Failed+c.Timeout+c.Unreachable == 0 || c.Success == 0 {
		t.Fatalf("counts %+v of %d targets: want failures and hosts restarted before them", c, roll.Task.Targets)
	}
	stopped := -1
	for i, b := range roll.Roll.Batches {
		switch {
		case stopped < 0 && b.Bad == 0:
			if b.State != "done" || b.OK != b.Size {
				t.Fatalf("batch %d before the failure: %+v", i+1, b)
			}
		case stopped < 0:
			stopped = i
		case b.State != model.BatchNotSent || b.OK+b.Running != 0:
			t.Fatalf("batch %d after the stopping batch %d was touched: %+v", i+1, stopped+1, b)
		}
	}
	if stopped < 1 || stopped == len(roll.Roll.Batches)-1 {
		t.Fatalf("stopped in batch %d of %d: the scenario wants the canary through and batches left: %+v", stopped+1, len(roll.Roll.Batches), roll.Roll.Batches)
	}
	if st := r.Steps[3].Task; st == nil || st.Counts.Success != st.Targets {
		t.Fatalf("status after the rollback: %+v", st)
	}
}
