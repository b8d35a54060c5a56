package model

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// ClipText keeps the head, ClipOutput the tail, each within its bound, at
// a character boundary, marked "..." when clipped, and the text itself
// when it fits.
func TestClipTextAndOutput(t *testing.T) {
	if s := strings.Repeat("a", 10); ClipText(s, 10) != s {
		t.Errorf("ClipText changed a text at its bound")
	}
	if got := ClipText("aé€x", 6); got != "aé..." { // é is 2 bytes, € 3
		t.Errorf("ClipText = %q", got)
	}
	if got := ClipText("ab€cdef", 6); got != "ab..." {
		t.Errorf("ClipText = %q, want the head to a character boundary", got)
	}
	if s := strings.Repeat("o", MaxOutput); ClipOutput(s) != s {
		t.Errorf("ClipOutput changed an output at its bound")
	}
	long := strings.Repeat("€", MaxOutput) + "end"
	got := ClipOutput(long)
	if len(got) > MaxOutput || !strings.HasPrefix(got, "...€") || !strings.HasSuffix(got, "€end") || !utf8.ValidString(got) {
		t.Errorf("ClipOutput: %d bytes, %.8q...", len(got), got)
	}
}

// PlainStatus cleans and clips an agent's status, names the first field
// it changed, and leaves a usual one as it is, without allocation.
func TestPlainStatus(t *testing.T) {
	usual := ProcStatus{ProcKey: "web:nginx", ProcName: "nginx", State: ProcRunning, Version: "1.2", Cmdline: "nginx -g daemon off;", Message: "ok\tfine"}
	st := usual
	if n := testing.AllocsPerRun(100, func() {
		if f := PlainStatus(&st); f != "" {
			t.Fatalf("a usual status changed: %s", f)
		}
	}); n != 0 {
		t.Errorf("%v allocations a usual status", n)
	}
	if st != usual {
		t.Errorf("a usual status changed: %+v", st)
	}
	st = ProcStatus{ProcKey: "web:nginx", State: "running\x1b[2J", Cmdline: strings.Repeat("c", MaxCmdline+1), Message: "\x1b]52;c;eA==\ahi"}
	if f := PlainStatus(&st); f != "state" || st.State != ProcRunning || len(st.Cmdline) != MaxCmdline || st.Message != "hi" {
		t.Errorf("PlainStatus: %q, %+v", f, st)
	}
}
