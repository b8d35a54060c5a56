package bench

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Measures of `gseproc bench compare`.
const (
	MeasureRestart = "restart" // kill -9 of a hosted process to its replacement exec'ing
	MeasureFanout  = "fanout"  // one command on N hosts, end to end
)

// CompareOptions sets up `gseproc bench compare`: gseproc's agent against
// supervisord, s6 and pm2 (kill -9 to running again), and gseproc's
// fan-out over real agents against Ansible ad-hoc over local hosts, each
// external tool driven for real when it is installed.
type CompareOptions struct {
	// Samples of kill -9 to running per supervisor (default 20).
	Samples int
	// Settle is how long each new process stays up before the next kill
	// (default 1.5 s: past s6's 1 s between spawns, supervisord's
	// startsecs, pm2's min_uptime and the agent's stable_after, all 1 s,
	// so that every kill is a fresh failure restarted at once).
	Settle time.Duration
	// Hosts of the fan-out (default 10) and Runs of it (default 5).
	Hosts, Runs int
	// Only, when not empty, names the tools to run (gseproc always runs).
	Only []string
	// Out receives progress and the table.
	Out io.Writer
}

func (o *CompareOptions) defaults() {
	if o.Samples <= 0 {
		o.Samples = 20
	}
	if o.Settle <= 0 {
		o.Settle = 1500 * time.Millisecond
	}
	if o.Hosts <= 0 {
		o.Hosts = 10
	}
	if o.Runs <= 0 {
		o.Runs = 5
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
}

// MaxFanoutHosts is the most hosts the compared fan-out runs: in-process
// agents named 127.0.x.y, x in 1..250.
const MaxFanoutHosts = 250 * 250

// CompareTools are the tools compared with gseproc, the names --only
// takes.
var CompareTools = []string{"s6", "supervisord", "pm2", "ansible"}

// ParseOnly reads --only: tool names of CompareTools, comma-separated.
// An unknown name is refused by name (a typo would otherwise run
// gseproc alone and look like a comparison).
func ParseOnly(s string) ([]string, error) {
	var only []string
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		if !slices.Contains(CompareTools, t) {
			return nil, fmt.Errorf("--only: %q is not a tool compared (want some of %s)", t, strings.Join(CompareTools, ","))
		}
		only = append(only, t)
	}
	return only, nil
}

func (o *CompareOptions) wants(tool string) bool {
	return len(o.Only) == 0 || tool == "gseproc" || slices.Contains(o.Only, tool)
}

// Row is one tool's figures for one measure.
type Row struct {
	Measure string // MeasureRestart or MeasureFanout
	Tool    string
	How     string // what the tool runs and how
	Samples []time.Duration
	// Skipped says why the tool was not measured (missing, with how to
	// install it; or what failed); then Samples is empty.
	Skipped string
}

// P50 and P90 of the samples.
func (r Row) P50() time.Duration { return pct(append([]time.Duration(nil), r.Samples...), 50) }
func (r Row) P90() time.Duration { return pct(append([]time.Duration(nil), r.Samples...), 90) }

// Report is what `gseproc bench compare` measured.
type Report struct {
	Rows []Row
	// Method says how the restart figures were taken.
	Method string
	// Hosts and Runs of the fan-out; Samples and Settle of the restarts.
	Hosts, Runs, Samples int
	Settle               time.Duration
	// LoadBefore and LoadAfter are /proc/loadavg at the start and end.
	LoadBefore, LoadAfter string
}

// loadavg is the first three fields of /proc/loadavg ("" when unknown).
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// ratio says how a tool's p50 compares with gseproc's: "1.00" for gseproc
// itself, "4.2x slower", "0.8x (faster)"; "" without both figures.
func ratio(p50, base time.Duration) string {
	if p50 <= 0 || base <= 0 {
		return ""
	}
	r := float64(p50) / float64(base)
	switch {
	case p50 == base:
		return "1.00"
	case r >= 1:
		return fmt.Sprintf("%.2fx gseproc (slower)", r)
	default:
		return fmt.Sprintf("%.2fx gseproc (faster)", r)
	}
}

// fmtDur prints a latency with a precision fit for its size.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

// WriteTable prints the report as one table: per measure, each tool's
// p50 and p90 and its p50 against gseproc's in the same run.
func WriteTable(w io.Writer, r Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "measure\ttool\thow\tn\tp50\tp90\tp50 vs gseproc\n")
	for _, m := range []string{MeasureRestart, MeasureFanout} {
		var base time.Duration
		for _, row := range r.Rows {
			if row.Measure == m && row.Tool == "gseproc" {
				base = row.P50()
			}
		}
		title := "kill -9 to running"
		if m == MeasureFanout {
			title = fmt.Sprintf("`true` on %d hosts", r.Hosts)
		}
		for _, row := range r.Rows {
			if row.Measure != m {
				continue
			}
			if row.Skipped != "" {
				fmt.Fprintf(tw, "%s\t%s\t%s\t0\t-\t-\tnot measured: %s\n", title, row.Tool, row.How, row.Skipped)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", title, row.Tool, row.How, len(row.Samples),
				fmtDur(row.P50()), fmtDur(row.P90()), ratio(row.P50(), base))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "kill -9 to running: %s; %d kills per tool, one every %s (each process up past every tool's 1 s stability rule)\n",
		r.Method, r.Samples, r.Settle)
	fmt.Fprintf(w, "fan-out: wall time of one command on %d hosts, %d runs per tool, from the request to the last host's result\n", r.Hosts, r.Runs)
	_, err := fmt.Fprintf(w, "load average: %s before, %s after (the figures are from the same run, under the same load)\n", r.LoadBefore, r.LoadAfter)
	return err
}
