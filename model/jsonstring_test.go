package model

import (
	"encoding/json"
	"strings"
	"testing"
)

func checkJSONString(t *testing.T, s string) {
	t.Helper()
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
		t.Fatalf("AppendJSONString(%q) = %s, json.Marshal %s", s, got[1:], want)
	}
}

func TestAppendJSONString(t *testing.T) {
	checkJSONString(t, "")
	for c := range 256 {
		checkJSONString(t, string([]byte{byte(c)}))
		checkJSONString(t, "a"+string([]byte{byte(c)})+"b")
	}
	for _, s := range []string{"a<b>&c", `{"value":[{"procName":"x"}]}`, "\u2028\u2029\u2027", "中文 ü", "\xe2\x80", "\xed\xa0\x80", "\U0001F600", "\xf4\x90\x80\x80"} {
		checkJSONString(t, s)
	}
}

// TestAppendJSONStringBytesLinear: AppendJSONString over bytes outside ASCII
// allocates nothing into a buffer large enough (it had copied the rest of
// its bytes into a string at every such rune: 1,000 runes, 990 allocations
// and 1.6 MB; an agent's long non-ASCII message or cmdline in a --json
// line's content was quadratic), and writes what it writes over the string.
func TestAppendJSONStringBytesLinear(t *testing.T) {
	s := []byte(strings.Repeat("中文 \xff\u2028", 1000))
	buf := make([]byte, 0, 8*len(s))
	if n := testing.AllocsPerRun(10, func() { buf = AppendJSONString(buf[:0], s) }); n != 0 {
		t.Fatalf("AppendJSONString of %d bytes: %v allocations, want 0", len(s), n)
	}
	checkJSONString(t, string(s))
	if got, want := string(AppendJSONString(nil, s)), string(AppendJSONString(nil, string(s))); got != want {
		t.Fatalf("AppendJSONString of bytes %s, of the string %s", got, want)
	}
}

// FuzzAppendJSONString: AppendJSONString writes what json.Marshal writes.
func FuzzAppendJSONString(f *testing.F) {
	f.Add("plain")
	f.Add("<&>\u2028\xff\"\\\x00\b\f\n\r\t\x7f")
	f.Fuzz(checkJSONString)
}
