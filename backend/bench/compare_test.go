package bench

import (
	"strings"
	"testing"
	"time"
)

func TestWriteTableRatiosAndSkips(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	rep := Report{
		Method: "exit to exec (kernel timestamps)", Hosts: 10, Runs: 3, Samples: 4, Settle: 1500 * time.Millisecond,
		LoadBefore: "20.1 18.0 9.5", LoadAfter: "22.0 19.0 10.1",
		Rows: []Row{
			{Measure: MeasureRestart, Tool: "gseproc", How: "agent", Samples: ms(4, 2, 3, 5)},
			{Measure: MeasureRestart, Tool: "s6", How: "s6-supervise", Samples: ms(1000, 1010, 1020, 1030)},
			{Measure: MeasureRestart, Tool: "pm2", How: "pm2", Samples: ms(1, 1, 1, 1)},
			{Measure: MeasureRestart, Tool: "supervisord", How: "supervisord", Skipped: "supervisord not installed (apt-get install -y supervisor)"},
			{Measure: MeasureFanout, Tool: "ansible", How: "ansible", Samples: ms(30000, 31000, 32000)},
			{Measure: MeasureFanout, Tool: "gseproc", How: "engine", Samples: ms(200, 100, 300)},
		},
	}
	var b strings.Builder
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log("\n" + out)
	lines := strings.Split(out, "\n")
	row := func(tool, measure string) string {
		t.Helper()
		for _, l := range lines {
			if strings.Contains(l, measure) && strings.Contains(l, "  "+tool+"  ") {
				return l
			}
		}
		t.Fatalf("no %s row for %s in:\n%s", measure, tool, out)
		return ""
	}
	restart, fan := "kill -9 to running", "`true` on 10 hosts"
	// p50 of 2, 3, 4, 5 ms is the upper middle: 4 ms; p90 5 ms.
	if l := row("gseproc", restart); !strings.Contains(l, "4.00 ms") || !strings.Contains(l, "5.00 ms") || !strings.HasSuffix(strings.TrimSpace(l), "1.00") {
		t.Errorf("gseproc restart row: %q", l)
	}
	if l := row("s6", restart); !strings.Contains(l, "1.02 s") || !strings.Contains(l, "255.00x gseproc (slower)") {
		t.Errorf("s6 row: %q", l)
	}
	if l := row("pm2", restart); !strings.Contains(l, "1.00 ms") || !strings.Contains(l, "0.25x gseproc (faster)") {
		t.Errorf("pm2 row: %q", l)
	}
	if l := row("supervisord", restart); !strings.Contains(l, "not measured: supervisord not installed (apt-get install -y supervisor)") {
		t.Errorf("skipped row: %q", l)
	}
	if l := row("ansible", fan); !strings.Contains(l, "31.00 s") || !strings.Contains(l, "155.00x gseproc (slower)") {
		t.Errorf("ansible row: %q", l)
	}
	if l := row("gseproc", fan); !strings.Contains(l, "200.0 ms") {
		t.Errorf("gseproc fan-out row: %q", l)
	}
	for _, want := range []string{"exit to exec (kernel timestamps)", "4 kills per tool, one every 1.5s",
		"load average: 20.1 18.0 9.5 before, 22.0 19.0 10.1 after"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

func TestRatioAndDurations(t *testing.T) {
	for _, c := range []struct {
		p50, base time.Duration
		want      string
	}{
		{0, time.Millisecond, ""},
		{time.Millisecond, 0, ""},
		{time.Millisecond, time.Millisecond, "1.00"},
		{3 * time.Millisecond, time.Millisecond, "3.00x gseproc (slower)"},
		{time.Millisecond, 2 * time.Millisecond, "0.50x gseproc (faster)"},
	} {
		if got := ratio(c.p50, c.base); got != c.want {
			t.Errorf("ratio(%s, %s) = %q, want %q", c.p50, c.base, got, c.want)
		}
	}
	for d, want := range map[time.Duration]string{
		0: "-", 2500 * time.Microsecond: "2.50 ms", 25 * time.Millisecond: "25.0 ms", 1500 * time.Millisecond: "1.50 s",
	} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestParseOnly: --only takes the tools compared, spaces around a name
// dropped; an unknown or empty name is refused by name.
func TestParseOnly(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "s6", want: "s6"},
		{in: "s6, pm2,ansible", want: "s6 pm2 ansible"},
		{in: "supervisord,ansible", want: "supervisord ansible"},
		{in: "s6,supervisor", err: `"supervisor" is not a tool compared`},
		{in: "gseproc", err: `"gseproc" is not a tool compared`},
		{in: "s6,", err: `"" is not a tool compared`},
	} {
		got, err := ParseOnly(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseOnly(%q): %v %v, want the error %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || strings.Join(got, " ") != tc.want):
			t.Errorf("ParseOnly(%q): %v %v, want %s", tc.in, got, err, tc.want)
		}
	}
}
