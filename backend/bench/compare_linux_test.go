//go:build linux

package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestArgvMatch(t *testing.T) {
	m := argvMatch{prog: "sleep", args: []string{"86400.123456"}}
	for cmdline, want := range map[string]bool{
		"sleep\x0086400.123456\x00":                true,
		"/usr/bin/sleep\x0086400.123456\x00":       true,
		"sleep\x0086400.123456":                    true,
		"sleep\x0086400.123457\x00":                false,
		"sleep\x0086400.123456\x00x\x00":           false,
		"/bin/sh\x00-c\x00exec sleep 86400.123456": false,
		"sh\x00./run\x00":                          false,
		"":                                         false,
	} {
		if got := m.matches([]byte(cmdline)); got != want {
			t.Errorf("matches(%q) = %v, want %v", cmdline, got, want)
		}
	}
	if m.String() != "sleep 86400.123456" {
		t.Errorf("String() = %q", m.String())
	}
	if a := sleepMatch(); len(a.args) != 1 || !strings.HasPrefix(a.args[0], "86400.") || a.prog != "sleep" {
		t.Errorf("sleepMatch: %v", a)
	}
}

// TestRestartsAgainstAgent times kills of a sleep hosted by gseproc's
// real agent, with the clock the machine allows (the kernel's process
// events as root) and with the /proc poll every machine has.
func TestRestartsAgainstAgent(t *testing.T) {
	clocks := []restartClock{pollClock{every: time.Millisecond}}
	if c, err := openProcEvents(); err == nil {
		clocks = append(clocks, c)
		defer c.close()
	} else {
		t.Logf("process events unavailable (%v): /proc poll only", err)
	}
	for _, clock := range clocks {
		t.Run(strings.Fields(clock.method())[0], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			s := supervisors()[0]
			if s.tool != "gseproc" {
				t.Fatalf("first supervisor %q, want gseproc", s.tool)
			}
			dir := t.TempDir()
			m := sleepMatch()
			stop, err := s.start(ctx, dir, m)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				stop()
				killProcs(m)
			}()
			first, err := waitProc(ctx, m, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			lat, err := measureRestarts(ctx, clock, m, 3, 1100*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if len(lat) != 3 {
				t.Fatalf("%d samples, want 3", len(lat))
			}
			for i, d := range lat {
				if d <= 0 || d > 30*time.Second {
					t.Fatalf("sample %d: %s", i, d)
				}
			}
			now, err := waitProc(ctx, m, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if now == first {
				t.Fatalf("pid %d after three kills: not restarted", now)
			}
			// The pid file names the agent's own child, the sleep itself.
			b, err := os.ReadFile(filepath.Join(dir, "sleep.pid"))
			if err != nil || strings.TrimSpace(string(b)) == "" {
				t.Fatalf("pid file: %q, %v", b, err)
			}
			t.Logf("%s: %v", clock.method(), lat)
		})
	}
}

// TestCompareToolsAreTheSupervisors: the names --only takes are the
// supervisors compared and ansible, so a tool --only accepts is one
// Compare runs.
func TestCompareToolsAreTheSupervisors(t *testing.T) {
	var runs []string
	for _, s := range supervisors() {
		if s.tool != "gseproc" {
			runs = append(runs, s.tool)
		}
	}
	runs = append(runs, "ansible")
	if strings.Join(runs, ",") != strings.Join(CompareTools, ",") {
		t.Fatalf("Compare runs %v, --only takes %v", runs, CompareTools)
	}
}

// TestCompareNamesMissingTools runs the whole comparison on a PATH
// without any of the other tools: gseproc is measured (restarts and the
// fan-out over real agents), each other tool is named with how to
// install it, and nothing fails.
func TestCompareNamesMissingTools(t *testing.T) {
	bin := t.TempDir()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep on PATH")
	}
	if err := os.Symlink(sleep, filepath.Join(bin, "sleep")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	var out strings.Builder
	rep, err := Compare(ctx, CompareOptions{Samples: 2, Settle: 1100 * time.Millisecond, Hosts: 3, Runs: 2, Out: &out})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	got := map[string]Row{}
	for _, r := range rep.Rows {
		got[r.Measure+"/"+r.Tool] = r
	}
	for key, n := range map[string]int{MeasureRestart + "/gseproc": 2, MeasureFanout + "/gseproc": 2} {
		if r := got[key]; len(r.Samples) != n || r.Skipped != "" || r.P50() <= 0 {
			t.Errorf("%s: %+v, want %d samples", key, r, n)
		}
	}
	for key, how := range map[string]string{
		MeasureRestart + "/s6":          "s6-svscan not installed (apt-get install -y s6)",
		MeasureRestart + "/supervisord": "supervisord not installed (apt-get install -y supervisor)",
		MeasureRestart + "/pm2":         "pm2 not installed (npm install -g pm2)",
		MeasureFanout + "/ansible":      "ansible not installed (apt-get install -y ansible)",
	} {
		if r := got[key]; r.Skipped != how || len(r.Samples) != 0 {
			t.Errorf("%s: %+v, want skipped %q", key, r, how)
		}
		if !strings.Contains(out.String(), "not measured: "+how) {
			t.Errorf("table does not say %q", how)
		}
	}
	if rep.LoadBefore == "" || rep.Method == "" {
		t.Errorf("report without load or method: %+v", rep)
	}
}
