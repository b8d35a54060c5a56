package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"gseproc/backend/node"
	"gseproc/backend/scenario"
	"gseproc/ui"
)

// runDemo tells a scenario: `gseproc demo FILE` opens the console on a
// simulated fleet and plays the scenario's steps on the wall clock, each
// an event in the event list; --headless tells it at once on a scenario
// clock and prints what each step did and the final state.
func runDemo(ctx context.Context, args []string, sio Stdio) error {
	fs := newFlags("demo", "demo FILE [--headless] [--config FILE] [--theme dark|light|ansi16|mono] [--no-color]", sio)
	var f consoleFlags
	fs.StringVar(&f.config, "config", "", "config file ([console] and [log]; the fleet is the scenario's)")
	fs.StringVar(&f.theme, "theme", "", "colour theme: dark, light, ansi16 or mono (default: [console] theme)")
	fs.BoolVar(&f.noColor, "no-color", false, "no colour at all (NO_COLOR in the environment does the same)")
	headless := fs.Bool("headless", false, "tell the story at once without a console, on a scenario clock, and print what happened")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: gseproc demo FILE [flags]\n\nTell the story of a scenario file (TOML: a [fleet] and timed [[step]]s; see\ntestdata/scenarios/) on a simulated fleet: the console opens on it and the\nsteps happen on time. The same seed tells the same story.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("demo", "want one scenario FILE, got %d arguments", len(pos))
	}
	sc, err := scenario.Load(pos[0])
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	if *headless {
		return demoHeadless(ctx, sc, sio.Out)
	}
	cfg, err := loadConfig(f.config, sio)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	if f.theme != "" {
		cfg.Console.Theme = f.theme
	}
	cfg.Simulator = sc.Fleet
	in, out, err := terminal(sio)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	log := newLogger(cfg.Log, io.Discard)
	e, fleet, closeBackend, err := node.OpenEmbeddedFleet(ctx, cfg, Version, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := closeBackend(); err != nil {
			log.Warn("close backend", "err", err)
		}
	}()
	// The story runs beside the console and stops with it.
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		r := scenario.Runner{Backend: e, Clock: scenario.WallClock{}, Announce: fleet.Announce,
			Step: func(res scenario.StepResult) {
				if res.Err != nil {
					fleet.Announce(fmt.Sprintf("step %d (%s) failed: %v", res.Index+1, res.Step.What(), res.Err))
				}
			}}
		if _, err := r.Run(ctx, sc); err != nil && !errors.Is(err, context.Canceled) {
			log.Warn("scenario", "name", sc.Name, "err", err)
		}
	})
	notice := fmt.Sprintf("demo %q: %d steps over %s; E shows the events as they happen", sc.Name, len(sc.Steps), sc.End)
	return runConsoleOn(ctx, e, cfg, f, in, out, ui.Options{Notice: notice})
}

// demoHeadless tells sc at once and prints each step and the end.
func demoHeadless(ctx context.Context, sc scenario.Scenario, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	r, err := scenario.Headless(ctx, sc)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "scenario %q (seed %d, %d hosts)\n", sc.Name, sc.Fleet.Seed, sc.Fleet.Hosts)
	failed := 0
	for _, s := range r.Steps {
		fmt.Fprintf(w, "%8s  %-40s ", s.Step.At, s.Step.What())
		switch {
		case s.Err != nil:
			failed++
			fmt.Fprintf(w, "FAILED: %v\n", s.Err)
		case s.Task != nil:
			c := s.Task.Counts
			fmt.Fprintf(w, "%s: %d ok, %d failed, %d timeout, %d unreachable\n", s.Task.Status, c.Success, c.Failed, c.Timeout, c.Unreachable)
			if s.Roll != nil {
				fmt.Fprintf(w, "%8s  roll %s: %d of %d batches started; %s\n", "", s.Roll.State, s.Roll.Started, len(s.Roll.Batches), s.Roll.Reason)
			}
		default:
			fmt.Fprintln(w, s.Outcome.Message)
		}
	}
	kinds := map[string]int{}
	for _, e := range r.Events {
		kinds[string(e.Kind)]++
	}
	fmt.Fprintf(w, "events: %d", len(r.Events))
	for _, k := range []string{"sim_control", "agent_offline", "agent_online", "process_restart_success", "process_restart_failed", "process_cancel_restart", "process_resource_limit_exceed"} {
		if kinds[k] > 0 {
			fmt.Fprintf(w, ", %s %d", k, kinds[k])
		}
	}
	fmt.Fprintf(w, "\nfinal:\n%s", r.Final)
	if failed > 0 {
		return &ExitError{Code: 1, Err: fmt.Errorf("%d steps failed", failed)}
	}
	return nil
}
