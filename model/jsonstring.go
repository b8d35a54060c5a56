package model

import "unicode/utf8"

// The one JSON string writer: the result and reply appenders here, the
// server's result contents and the op client's --json lines
// (backend/server/wire, backend/cli) all quote strings by it.

const jsonHex = "0123456789abcdef"

// jsonPlain tells the bytes a JSON string holds as they are: ASCII from
// 0x20 up but '"', '\\' and the HTML characters '<', '>' and '&'.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendJSONString appends s (a string or its bytes) as a JSON string exactly as json.Marshal writes
// it: '"' and '\\' escaped, control characters as \b \f \n \r \t or
// \u00XX, the HTML characters '<', '>' and '&' as \u003c \u003e \u0026,
// U+2028 and U+2029 as \u2028 \u2029, and each byte of invalid UTF-8 as
// \ufffd (FuzzAppendJSONString compares the two). No byte of s reaches b
// unescaped where JSON would end or change the string.
func AppendJSONString[S ~string | ~[]byte](b []byte, s S) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Up to the next byte that needs a look, by a table. (Eight bytes
		// at a time by bit tricks was no faster on words and paths, and
		// slower on a result's content, JSON with a quote every few bytes.)
		for i < len(s) && jsonPlain[s[i]] {
			i++
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', jsonHex[c>>4], jsonHex[c&0xf])
			}
			i++
			start = i
			continue
		}
		// At most a rune's bytes converted: string(s[i:]) of bytes would
		// copy the whole rest of s for every rune outside ASCII.
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', jsonHex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendJSONStringInString appends s quoted by AppendJSONString as it
// reads inside another JSON string: what
// AppendJSONString(AppendJSONString(s)) holds between its own quotes
// (checkJSONString, FuzzAppendJSONString). A JSON text written straight into a
// string (a result's content in an op client's --json line) quotes its
// strings so, without the text being made first and escaped again.
func AppendJSONStringInString[S ~string | ~[]byte](b []byte, s S) []byte {
	i := 0
	for i < len(s) && jsonPlain[s[i]] {
		i++
	}
	if i == len(s) { // as most are: the quotes escaped, nothing else
		b = append(b, '\\', '"')
		b = append(b, s...)
		return append(b, '\\', '"')
	}
	var buf [256]byte
	return AppendJSONInString(b, AppendJSONString(buf[:0], s))
}

// AppendJSONInString appends text, JSON text as AppendJSONString or
// json.Marshal write it, as the inside of a JSON string (without its
// quotes). Such text holds no control character, no invalid UTF-8, no
// U+2028 or U+2029 and no HTML character: quoted again, only its '"' and
// '\\' are escaped.
func AppendJSONInString(b, text []byte) []byte {
	for len(text) > 0 {
		j := 0
		for j < len(text) && text[j] != '"' && text[j] != '\\' {
			j++
		}
		b = append(b, text[:j]...)
		if j == len(text) {
			break
		}
		b = append(b, '\\', text[j])
		text = text[j+1:]
	}
	return b
}
