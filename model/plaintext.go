package model

import (
	"strings"
	"unicode/utf8"
)

// The terminal rule: text from the fleet (an agent's labels, process
// statuses, messages, a command's output) holding "\x1b]52;c;…\a" or
// "\x1b[2J" would drive an operator's terminal if printed as it came (set
// its clipboard, its title, clear it, answer queries into the input). The
// server cleans an agent's statuses by it at the entrance, the console
// its frame and clipboard, the CLI what it prints.

// PlainText is s without any escape sequence and without control
// characters but newline and tab (a C1 control or an invalid UTF-8 byte
// goes too): safe to print on a terminal or put on a clipboard. It is s
// itself, without allocation, when nothing is dropped.
func PlainText(s string) string { return scrub(s, false) }

// StyledText is PlainText keeping SGR sequences (ESC [ digits m: colours
// and attributes), for a frame styled by the program itself.
func StyledText(s string) string { return scrub(s, true) }

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
