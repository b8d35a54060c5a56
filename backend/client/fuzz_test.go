package client

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// FuzzSSE: the event-stream parser takes any input without panicking;
// every event it yields has a name, and its data comes from data lines of
// the input: the lines' values joined by newlines (so "data\ndata\n\n",
// two empty data lines, is the data "\n", as the SSE specification says),
// never more newlines than the input has data lines.
func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"retry: 1000\n: request r1\n\nid: 3\nevent: result\ndata: {\"seq\":3}\n\nevent: end\ndata: {}\n\n",
		"data: a\ndata: b\n\n", "event: x\r\n\r\n", ": ping\n\n", "id: 7\nid\ndata\n\n", "data:no-space\n\n",
		"event: result\ndata: {\"task_id\":\"GSETASK:20200101000000:1\"}", "\n\n\n", "data: " + strings.Repeat("x", 70000) + "\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := 0
		err := readEvents(strings.NewReader(s), func(ev sseEvent) bool {
			n++
			if ev.name == "" || strings.Count(string(ev.data), "\n") >= max(1, strings.Count(s, "data")) {
				t.Fatalf("event %+v from %q", ev, s)
			}
			if len(ev.data) != 0 && !strings.Contains(s, "data") {
				t.Fatalf("data %q from no data line in %q", ev.data, s)
			}
			return n < 1000
		})
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("readEvents: %v", err)
		}
	})
}
