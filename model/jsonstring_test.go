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
	// Inside another string: json.Marshal's quoting of the quoted text,
	// without its own quotes.
	twice, err := json.Marshal(string(want))
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendJSONStringInString([]byte("x"), s); string(got) != "x"+string(twice[1:len(twice)-1]) {
		t.Fatalf("AppendJSONStringInString(%q) = %s, json.Marshal twice %s", s, got[1:], twice[1:len(twice)-1])
	}
}

func TestAppendJSONString(t *testing.T) {
	checkJSONString(t, "")
	for c := range 256 {
		checkJSONString(t, string([]byte{byte(c)}))
		checkJSONString(t, "a"+string([]byte{byte(c)})+"b")
	}
	for _, s := range []string{"a<b>&c", `{"value":[{"procName":"x"}]}`, "\u2028\u2029\u2027", "中文 ü", "\xe2\x80", "\xed\xa0\x80", "\U0001F600", "\xf4\x90\x80\x80",
		strings.Repeat(`a "quoted" \ path <&>\n`, 40)} {
		checkJSONString(t, s)
	}
}

// TestAppendJSONStringWords: every byte at every place of a longer string
// is written as json.Marshal writes it.
func TestAppendJSONStringWords(t *testing.T) {
	plain := []byte("abcdefghijklmnopq")
	for c := range 256 {
		for i := range plain {
			s := append([]byte(nil), plain...)
			s[i] = byte(c)
			checkJSONString(t, string(s))
		}
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

// BenchmarkAppendJSONString: the strings a result and an op client's
// --json line quote most: short words and paths, and a result's content
// (JSON in a string, its quotes escaped).
func BenchmarkAppendJSONString(b *testing.B) {
	content := `{"value":[{"meta":{"namespace":"gse","name":"bkmonitorbeat","labels":{"app":"bkmonitorbeat"}},"host":{"bk_cloud_id":0,"bk_host_innerip":"10.0.12.34"},"procInfo":{"pid":1940825,"cpuUsage":1.22,"memUsage":0.44,"startTime":"2026-11-06T04:50:25Z","version":"3.40.1911","cmdline":"/usr/local/gse2_bkte/plugins/bin/bkmonitorbeat -c /usr/local/gse2_bkte/plugins/etc/bkmonitorbeat.conf"}}]}`
	for _, c := range []struct {
		name string
		s    string
	}{
		{"word", "bkmonitorbeat"},
		{"path", "/usr/local/gse2_bkte/plugins/bin/bkmonitorbeat"},
		{"content", content},
	} {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 0, 4*len(c.s)+2)
			b.SetBytes(int64(len(c.s)))
			for b.Loop() {
				buf = AppendJSONString(buf[:0], c.s)
			}
		})
	}
}
