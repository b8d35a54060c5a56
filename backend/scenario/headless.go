package scenario

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/simulator"
	"gseproc/backend/store"
	"gseproc/model"
)

// Epoch is when a headless story begins on its scenario clock.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Result is a headless run: what each step did, every event in the order
// the fleet emitted it, and the fleet's final state.
type Result struct {
	Steps  []StepResult
	Events []model.Event
	Final  Final
}

// Final is the fleet at the end of a story.
type Final struct {
	Hosts   int
	Offline []model.Host // agents not answering, in host order
	// States counts, per process key, the hosts in each state.
	States map[string]map[model.ProcState]int
}

// String is the final state in lines, sorted (for comparing runs).
func (f Final) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "hosts %d, offline %d\n", f.Hosts, len(f.Offline))
	keys := make([]string, 0, len(f.States))
	for k := range f.States {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s", k)
		for _, st := range []model.ProcState{model.ProcRunning, model.ProcStopped, model.ProcBackoff, model.ProcFatal} {
			if n := f.States[k][st]; n > 0 {
				fmt.Fprintf(&b, " %s=%d", st, n)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Headless tells sc on a fresh embedded engine and simulated fleet, on a
// scenario clock: no sleeping, the same seed the same story. Background
// crashes (the fleet's crash_rate) are left out: only the steps happen.
func Headless(ctx context.Context, sc Scenario) (Result, error) {
	clock := NewManualClock(Epoch)
	fleetCfg := sc.Fleet
	fleetCfg.CrashRate = 0
	fleet, err := simulator.NewChecked(fleetCfg)
	if err != nil {
		return Result{}, fmt.Errorf("scenario %q: %w", sc.Name, err)
	}
	defer fleet.Close()
	fleet.SetClock(clock.Now)
	st := store.NewMemory()
	defer st.Close()
	e := engine.New(config.Default().Engine, fleet, fleet, st, engine.WithSimulator(fleet), engine.WithClock(clock.Now))
	if err := e.Start(ctx); err != nil {
		return Result{}, fmt.Errorf("scenario %q: start engine: %w", sc.Name, err)
	}
	defer e.Close()
	if err := e.Seed(ctx, fleet.Definitions()); err != nil {
		return Result{}, fmt.Errorf("scenario %q: seed registry: %w", sc.Name, err)
	}

	// Every event in the fleet's order, up to the story's last.
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var evs []model.Event
	ended := make(chan struct{})
	endMsg := fmt.Sprintf("sim: scenario %q ended", sc.Name)
	fleet.SubscribeEvents(subCtx, func(ev model.Event) {
		mu.Lock()
		evs = append(evs, ev)
		mu.Unlock()
		if ev.Kind == model.EventSimControl && ev.Message == endMsg {
			close(ended)
		}
	})
	r := Runner{Backend: e, Clock: clock, Advance: fleet.Advance, Announce: fleet.Announce}
	steps, err := r.Run(ctx, sc)
	if err != nil {
		return Result{Steps: steps}, fmt.Errorf("scenario %q: %w", sc.Name, err)
	}
	select {
	case <-ended:
	case <-ctx.Done():
		return Result{Steps: steps}, fmt.Errorf("scenario %q: waiting for its events: %w", sc.Name, ctx.Err())
	}
	cancel()
	mu.Lock()
	out := Result{Steps: steps, Events: slices.Clone(evs)}
	mu.Unlock()
	out.Final, err = final(ctx, fleet)
	return out, err
}

func final(ctx context.Context, fleet *simulator.Fleet) (Final, error) {
	his, err := fleet.Hosts(ctx)
	if err != nil {
		return Final{}, err
	}
	f := Final{Hosts: len(his), States: map[string]map[model.ProcState]int{}}
	for _, hi := range his {
		if hi.State != model.AgentOnline { // taken offline, or drawn offline or unreachable
			f.Offline = append(f.Offline, hi.Host)
			continue
		}
		s, _ := fleet.Host(hi.Host)
		for _, p := range s.Procs {
			m := f.States[p.ProcKey]
			if m == nil {
				m = map[model.ProcState]int{}
				f.States[p.ProcKey] = m
			}
			m[p.State]++
		}
	}
	slices.SortFunc(f.Offline, model.CompareHosts)
	return f, nil
}
