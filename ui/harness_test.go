package ui

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/simulator"
	"gseproc/backend/store"
	"gseproc/model"
	"gseproc/theme"
)

// updating reports -update: rewrite the golden files under testdata/. The
// flag itself is defined by charmbracelet/x/exp/golden (through teatest).
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

func TestMain(m *testing.M) {
	// Golden files and timestamps must not depend on the machine: the
	// local zone is UTC. The time package reads TZ when local time is
	// first used, which an init of a dependency does before TestMain, so
	// the test binary runs itself again with TZ empty (UTC). Assigning
	// time.Local instead raced with nats-server's process sampler (a
	// timer its package init starts), as the race detector reported.
	if tz, ok := os.LookupEnv("TZ"); !ok || tz != "" {
		exe, err := os.Executable()
		if err == nil {
			env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "TZ=") })
			err = syscall.Exec(exe, os.Args, append(env, "TZ="))
		}
		fmt.Fprintf(os.Stderr, "ui tests: run again with TZ empty (UTC): %v\n", err)
		os.Exit(2)
	}
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

// simBackend is the real engine over a simulated fleet: quiet (no random
// failures) unless cfg says otherwise.
func simBackend(tb testing.TB, sc config.SimulatorConfig) (*engine.Engine, *simulator.Fleet) {
	tb.Helper()
	return simBackendEngine(tb, sc, config.Default().Engine)
}

func simBackendEngine(tb testing.TB, sc config.SimulatorConfig, ec config.EngineConfig) (*engine.Engine, *simulator.Fleet) {
	tb.Helper()
	fleet := simulator.New(sc)
	e := engine.New(ec, fleet, fleet, store.NewMemory(), engine.WithSimulator(fleet))
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = e.Close(); _ = fleet.Close() })
	if err := e.Seed(ctx, fleet.Definitions()); err != nil {
		tb.Fatal(err)
	}
	return e, fleet
}

func quietSim(hosts int, nss ...string) config.SimulatorConfig {
	if len(nss) == 0 {
		nss = []string{"web"}
	}
	return config.SimulatorConfig{Hosts: hosts, Seed: 7, Clouds: 1, Namespaces: nss,
		LatencyMedian: config.Duration(time.Millisecond), LatencyP99: config.Duration(5 * time.Millisecond)}
}

// clock is a settable clock for the dialog guard and elapsed times.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func monoTheme(tb testing.TB) *theme.Theme {
	r := lipgloss.NewRenderer(os.Stdout)
	r.SetColorProfile(termenv.Ascii)
	th, err := theme.New("mono", r, false)
	if err != nil {
		tb.Fatal(err)
	}
	return th
}

// driver runs a Model the way bubbletea does, but in the test's goroutine:
// commands run in goroutines, their messages are applied one at a time.
type driver struct {
	t    testing.TB
	m    *Model
	msgs chan tea.Msg
	done chan struct{}
	quit bool
	wg   sync.WaitGroup // command goroutines
}

func newDriver(t testing.TB, be backend.Backend, o Options, w, h int) *driver {
	t.Helper()
	o.Backend = be
	if o.Theme == nil {
		o.Theme = monoTheme(t)
	}
	o.Static = true // no elapsed-time tick: commands end when the test does
	if o.Config.Theme == "" {
		o.Config = config.Default().Console
	}
	if o.Operator == "" {
		o.Operator = "test"
	}
	m, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	d := &driver{t: t, m: m, msgs: make(chan tea.Msg, 4096), done: make(chan struct{})}
	// Stop the console and wait for its commands before the engine closes
	// (cleanups run last-registered first).
	t.Cleanup(func() { close(d.done); m.Close(); d.wg.Wait() })
	d.send(tea.WindowSizeMsg{Width: w, Height: h})
	d.exec(m.Init())
	return d
}

func (d *driver) exec(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		msg := cmd()
		switch msg := msg.(type) {
		case nil:
			return
		case tea.BatchMsg:
			for _, c := range msg {
				d.exec(c)
			}
			return
		}
		select {
		case d.msgs <- msg:
		case <-d.done:
		}
	}()
}

func (d *driver) send(msg tea.Msg) {
	if _, ok := msg.(tea.QuitMsg); ok {
		d.quit = true
		return
	}
	_, cmd := d.m.Update(msg)
	d.exec(cmd)
}

// keys sends key presses: names like "enter", "esc", "space", "up",
// "ctrl+c"; anything else is typed as runes.
func (d *driver) keys(ks ...string) {
	for _, k := range ks {
		d.send(keyMsg(k))
	}
}

func keyMsg(k string) tea.KeyMsg {
	switch k {
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "space":
		return tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "left":
		return tea.KeyMsg{Type: tea.KeyLeft}
	case "right":
		return tea.KeyMsg{Type: tea.KeyRight}
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "backspace":
		return tea.KeyMsg{Type: tea.KeyBackspace}
	case "ctrl+c":
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

// typeText types s one rune at a time.
func (d *driver) typeText(s string) {
	for _, r := range s {
		if r == ' ' {
			d.send(keyMsg("space"))
			continue
		}
		d.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
}

// until applies messages until cond holds, failing after a generous 30 s
// (a loaded machine running the race detector is slow; a passing test
// never waits that long).
func (d *driver) until(what string, cond func() bool) {
	d.t.Helper()
	deadline := time.After(90 * time.Second) // wide: a pass returns as soon as cond holds
	for !cond() {
		select {
		case msg := <-d.msgs:
			d.send(msg)
		case <-deadline:
			d.t.Fatalf("timed out waiting for %s; screen:\n%s", what, d.m.View())
		}
	}
}

// settle applies messages until none arrives for quiet.
func (d *driver) settle(quiet time.Duration) {
	for {
		select {
		case msg := <-d.msgs:
			d.send(msg)
		case <-time.After(quiet):
			return
		}
	}
}

func (d *driver) view() string { return d.m.View() }

// golden compares got with testdata/name.golden (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if updating() {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./ui -run %s -update to create it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (run with -update if the change is intended)\n--- got:\n%s\n--- want:\n%s", path, got, want)
	}
}

// checkFrame asserts the screen is exactly w x h cells at most.
func checkFrame(t *testing.T, s string, w, h int) {
	t.Helper()
	lines := strings.Split(s, "\n")
	if len(lines) != h {
		t.Errorf("screen has %d lines, want %d", len(lines), h)
	}
	for i, l := range lines {
		if lw := lipgloss.Width(l); lw > w {
			t.Errorf("line %d is %d cells wide, more than %d: %q", i, lw, w, l)
		}
	}
}

var _ = model.OpRestart

// hasProcIn reports a host row has a process in state st.
func hasProcIn(r hostRow, st model.ProcState) bool {
	return slices.ContainsFunc(r.v.Procs, func(pv procView) bool { return pv.State == st })
}
