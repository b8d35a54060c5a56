package ui

import (
	"strings"
	"sync"
	"testing"
)

func TestScrub(t *testing.T) {
	for _, c := range []struct{ in, frame, clip string }{
		{"plain web:nginx 10.0.0.1", "plain web:nginx 10.0.0.1", "plain web:nginx 10.0.0.1"},
		{"\x1b[1;38;5;42mok\x1b[0m\n\tnext", "\x1b[1;38;5;42mok\x1b[0m\n\tnext", "ok\n\tnext"},
		{"a\x1b]52;c;ZXZpbA==\ab", "ab", "ab"},                // OSC 52: sets the clipboard
		{"a\x1b]0;title\x1b\\b", "ab", "ab"},                  // OSC ended by ST
		{"a\x1b]8;;http://x\nb", "a\nb", "a\nb"},              // unterminated: to the end of its line
		{"a\x1b[2Jb\x1b[?1049lc\x1b[6nd", "abcd", "abcd"},     // clear, alt screen off, cursor query
		{"a\x1b[201~rm -rf /\rb", "arm -rf /b", "arm -rf /b"}, // ends a bracketed paste; CR
		{"a\x1bcb\x1b(Bc\x1bPq#0\x1b\\d", "abcd", "abcd"},     // reset, charset, DCS
		{"a\u009b2Jb\x07\x08\x7fc", "a2Jbc", "a2Jbc"},         // C1 CSI, BEL, BS, DEL
		{"a\xffb ünï €", "ab ünï €", "ab ünï €"},              // a stray byte goes, UTF-8 stays
		{"a\x1b[3", "a", "a"},
		{"a\x1b", "a", "a"},
	} {
		if got := termSafe(c.in); got != c.frame {
			t.Errorf("termSafe(%q) = %q, want %q", c.in, got, c.frame)
		}
		if got := clipSafe(c.in); got != c.clip {
			t.Errorf("clipSafe(%q) = %q, want %q", c.in, got, c.clip)
		}
	}
}

// evil is text from the fleet that would drive the terminal if drawn or
// pasted raw.
const evil = "evil\x1b]52;c;cm0gLXJmIH4=\a\x1b[2J\x1b[201~zone\r"

// A host label on the fleet map (grouped by it) reaches the frame without
// its escape sequences.
func TestFleetMapLabelEscapes(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	d := newDriver(t, e, Options{}, 100, 30)
	views := synthFleet(40)
	views[7].Labels["zone"] = evil
	p := openMapWith(d, views)
	d.send(mapLoaded(p.id, views, "zone", p.w, p.h))
	for range 3 { // onto the evil group's cell: the cursor line names it too
		d.keys("down")
	}
	v := d.view()
	if !strings.Contains(v, "evilzone") {
		t.Fatalf("the label's group is not drawn:\n%s", v)
	}
	for _, bad := range []string{"\x1b]", "\a", "\x1b[2J", "\x1b[201~", "\r"} {
		if strings.Contains(v, bad) {
			t.Fatalf("the frame holds %q from a label:\n%q", bad, v)
		}
	}
}

// c copies a message without the escapes and controls it holds.
func TestCopyDropsEscapes(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	var mu sync.Mutex
	var copied []string
	d := newDriver(t, e, Options{Copy: func(s string) { mu.Lock(); copied = append(copied, s); mu.Unlock() }}, 100, 30)
	d.m.s.addLog(levelError, "list hosts", evil)
	d.keys("L")
	topAs[*messagesPage](t, d)
	d.keys("G", "c")
	d.until("the copy", func() bool { mu.Lock(); defer mu.Unlock(); return len(copied) > 0 })
	mu.Lock()
	defer mu.Unlock()
	if copied[0] != "list hosts: evilzone" {
		t.Fatalf("copied %q", copied[0])
	}
}

// BenchmarkTermSafe is the filter over a 120x40 frame styled in every
// cell run (the cost added to each View).
func BenchmarkTermSafe(b *testing.B) {
	line := strings.Repeat("\x1b[38;5;42m● running\x1b[0m ", 12)
	frame := strings.Repeat(line+"\n", 40)
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if termSafe(frame) != frame {
			b.Fatal("a clean frame changed")
		}
	}
}
