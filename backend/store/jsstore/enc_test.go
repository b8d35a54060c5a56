package jsstore

import (
	"fmt"
	"strings"
	"testing"
)

// TestEnc: a key token keeps [A-Za-z0-9_-] and writes every other byte as
// =XX; the empty string is "="; a token past maxToken is its hash.
func TestEnc(t *testing.T) {
	// byByte is the rule written out one byte at a time.
	byByte := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
				b.WriteByte(c)
			} else {
				fmt.Fprintf(&b, "=%02X", c)
			}
		}
		return b.String()
	}
	var all strings.Builder
	for c := range 256 {
		all.WriteByte(byte(c))
	}
	for _, s := range []string{"GSETASK:20260101000000:7", "plain-key_09", "a.b c", "日本", "=", ":", all.String()} {
		if got, want := enc(s), byByte(s); got != want {
			t.Errorf("enc(%q) = %q, want %q", s, got, want)
		}
	}
	if got := enc("GSETASK:20260101000000:7"); got != "GSETASK=3A20260101000000=3A7" {
		t.Errorf("the documented example: %q", got)
	}
	if got := enc(""); got != "=" {
		t.Errorf("enc of nothing: %q", got)
	}
	long := enc(strings.Repeat(":", maxToken))
	if !strings.HasPrefix(long, "=H") || len(long) != 2+64 {
		t.Errorf("a token past %d bytes: %q", maxToken, long)
	}
}

func BenchmarkEncTaskID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = enc("GSETASK:20261123224758:123456")
	}
}
