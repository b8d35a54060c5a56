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

func TestCheckTailChunk(t *testing.T) {
	for _, c := range []struct {
		name string
		c    TailChunk
		ok   bool
	}{
		{"empty", TailChunk{}, true},
		{"usual", TailChunk{Offset: 100, Next: 112, Data: "hello world\n"}, true},
		{"a whole chunk", TailChunk{Offset: 1 << 30, Next: 1<<30 + MaxTailChunk, Data: strings.Repeat("x", MaxTailChunk)}, true},
		{"invalid UTF-8 replaced", TailChunk{Offset: 0, Next: 3, Data: strings.ToValidUTF8("\xffa\xfe", "\uFFFD")}, true},
		{"all replaced, thrice as long", TailChunk{Offset: 0, Next: 2, Data: "\uFFFD\uFFFD"}, true},
		{"one byte past the chunk", TailChunk{Offset: 0, Next: MaxTailChunk + 1, Data: strings.Repeat("x", MaxTailChunk+1)}, false},
		{"8 MiB", TailChunk{Offset: 0, Next: 8 << 20, Data: strings.Repeat("x", 8<<20)}, false},
		{"data longer than its bytes", TailChunk{Offset: 10, Next: 11, Data: "abcd"}, false},
		{"data with no bytes", TailChunk{Offset: 10, Next: 10, Data: "a"}, false},
		{"8 MiB of data for a chunk", TailChunk{Offset: 0, Next: MaxTailChunk, Data: strings.Repeat("x", 8<<20)}, false},
		{"next before offset", TailChunk{Offset: 10, Next: 9}, false},
		{"negative offset", TailChunk{Offset: -5, Next: 0}, false},
	} {
		err := CheckTailChunk(&c.c)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}
}

func TestBoundReplyTail(t *testing.T) {
	usual := AgentReply{Code: CodeSuccess, Message: "success", Tail: &TailChunk{Path: "app.log", Offset: 5, Next: 9, Data: "abc\n", Size: 9}}
	if f := BoundReply(&usual); f != "" || usual.Tail == nil || usual.Tail.Data != "abc\n" || usual.Tail.Path != "app.log" || usual.Code != CodeSuccess {
		t.Errorf("usual tail reply changed (%q): %+v", f, usual)
	}
	big := AgentReply{Code: CodeSuccess, Tail: &TailChunk{Offset: 0, Next: 8 << 20, Data: strings.Repeat("x", 8<<20)}}
	if f := BoundReply(&big); f != "tail" || big.Tail != nil || big.Code != CodeCommandFailed || !strings.Contains(big.Message, "65536 (model.MaxTailChunk)") {
		t.Errorf("8 MiB chunk: changed %q, code %d, tail kept %v, message %q", f, big.Code, big.Tail != nil, big.Message)
	}
	path := AgentReply{Code: CodeSuccess, Tail: &TailChunk{Path: "a\x1b]52;c;eA==\a" + strings.Repeat("p", 1<<20)}}
	if f := BoundReply(&path); f != "tail.path" || len(path.Tail.Path) > MaxStatusText || strings.ContainsRune(path.Tail.Path, 0x1b) {
		t.Errorf("path: changed %q, %d bytes", f, len(path.Tail.Path))
	}
}
