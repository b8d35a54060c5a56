package cli

import (
	"strings"
	"testing"
	"time"

	"gseproc/model"
)

// TestResultMessagePlain: a result's message (an agent's text, a
// command's output in it) is printed without its escape sequences and
// control characters: an OSC 52 in it wrote the operator's clipboard, an
// ESC[8m hid the rest of the line.
func TestResultMessagePlain(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC)
	msg := "start failed: \x1b]52;c;ZXZpbA==\a exit 1 \x1b[8mhidden\x1b[0m\r\x07done"
	r := model.Result{Host: model.Host{IP: "10.0.0.1"}, ProcKey: "web:nginx", Op: model.OpStart, State: model.StateFailed,
		Message: msg, Started: t0, Finished: t0.Add(time.Second)}
	for _, status := range []bool{false, true} {
		var out strings.Builder
		p := &resultPrinter{out: &out, status: status}
		if status {
			r.Op = model.OpStatus
		}
		p.widths([]model.Result{r})
		if err := p.print(&r, nil); err != nil {
			t.Fatal(err)
		}
		if err := p.flush(); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		if strings.ContainsAny(got, "\x1b\a\r") || !strings.Contains(got, "start failed:") || !strings.Contains(got, "hidden") || !strings.Contains(got, "done") {
			t.Fatalf("status %v: printed %q", status, got)
		}
	}
}
