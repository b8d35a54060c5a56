package ui

import (
	"strings"
	"unicode/utf8"
)

// Text from the fleet (host labels, process names, messages, events,
// errors) is drawn into the console's frame and copied to the clipboard
// as it came: a label holding "\x1b]52;c;…\a" or "\x1b[2J" would drive
// the operator's terminal (set its clipboard, its title, clear it,
// answer queries into the input). One filter, at the two places text
// leaves for the terminal, makes that impossible whatever path the text
// took: the frame keeps only our own styling (SGR: ESC [ digits m), the
// clipboard only text. Layout is not disturbed: the widths were counted
// with ansi.StringWidth, which gives escape sequences and controls none.

// termSafe is frame without any escape sequence but SGR, and without
// control characters but newline and tab.
func termSafe(frame string) string { return scrub(frame, true) }

// clipSafe is text without any escape sequence or control character but
// newline and tab: what may go on the clipboard (a paste of it cannot end
// a bracketed paste or type keys).
func clipSafe(text string) string { return scrub(text, false) }

// PlainText is text from the fleet made safe to print on a terminal: no
// escape sequence, no control character but newline and tab (what
// `gseproc logs` prints of a log, unless told --raw).
func PlainText(text string) string { return clipSafe(text) }

func scrub(s string, keepSGR bool) string {
	var b strings.Builder
	kept := 0 // s[kept:i] is to keep, not written yet
	for i := 0; i < len(s); {
		c, n, keep := s[i], 1, true
		switch {
		case c == 0x1b:
			var sgr bool
			n, sgr = escLen(s[i:])
			keep = sgr && keepSGR
		case c == '\n' || c == '\t':
		case c < 0x20 || c == 0x7f:
			keep = false
		case c >= utf8.RuneSelf:
			var r rune
			r, n = utf8.DecodeRuneInString(s[i:])
			keep = !(r == utf8.RuneError && n == 1) && (r < 0x80 || r > 0x9f) // C1 controls go too
		}
		if !keep {
			b.WriteString(s[kept:i])
			kept = i + n
		}
		i += n
	}
	if kept == 0 { // nothing dropped: the common case, no copy
		return s
	}
	b.WriteString(s[kept:])
	return b.String()
}

// escLen is the length of the escape sequence at s[0] (an ESC), and
// whether it is SGR (ESC [ params m, params only digits, ';' and ':').
// A string sequence (OSC, DCS, APC, PM, SOS) runs to its terminator (BEL
// or ESC \), or to the end of its line when it has none.
func escLen(s string) (int, bool) {
	if len(s) < 2 {
		return len(s), false
	}
	switch s[1] {
	case '[': // CSI: parameters, intermediates, a final byte
		plain := true
		for j := 2; j < len(s); j++ {
			c := s[j]
			switch {
			case c >= '0' && c <= '9' || c == ';' || c == ':':
			case c >= 0x3c && c <= 0x3f || c >= 0x20 && c <= 0x2f: // private markers, intermediates
				plain = false
			case c >= 0x40 && c <= 0x7e:
				return j + 1, plain && c == 'm'
			default: // not a CSI after all: drop what was read
				return j, false
			}
		}
		return len(s), false
	case ']', 'P', '_', '^', 'X':
		for j := 2; j < len(s); j++ {
			switch s[j] {
			case 0x07:
				return j + 1, false
			case '\n':
				return j, false
			case 0x1b:
				if j+1 < len(s) && s[j+1] == '\\' {
					return j + 2, false
				}
				return j, false
			}
		}
		return len(s), false
	}
	j := 1
	for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f { // intermediates (ESC ( B)
		j++
	}
	if j < len(s) && s[j] >= 0x30 && s[j] <= 0x7e {
		j++
	}
	return j, false
}
