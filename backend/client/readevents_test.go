package client

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// legacyEvent and legacyReadEvents are the event reader as it was before
// it read lines in place, kept verbatim as the reference readEvents is
// tested against.
type legacyEvent struct {
	id    string
	name  string
	data  string
	hasID bool
}

// legacyReadEvents parses an event stream, calling fn for every event until the
// stream ends (io.EOF) or fn returns false.
func legacyReadEvents(r io.Reader, fn func(legacyEvent) bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var ev legacyEvent
	var data strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" {
				return io.EOF
			}
			if err != io.EOF {
				return err
			}
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if data.Len() > 0 || ev.name != "" {
				ev.data = strings.TrimSuffix(data.String(), "\n")
				if ev.name == "" {
					ev.name = "message"
				}
				if !fn(ev) {
					return nil
				}
			}
			ev, data = legacyEvent{}, strings.Builder{}
		case strings.HasPrefix(line, ":"):
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				ev.name = value
			case "data":
				data.WriteString(value)
				data.WriteByte('\n')
			case "id":
				ev.id, ev.hasID = value, true
			}
		}
		if err == io.EOF {
			return io.EOF
		}
	}
}

// eventsOf is what a reader gives for s, read whole or a byte at a time,
// stopping after stop events: each event, then the reader's error.
func eventsOf(s string, stop int, oneByte bool, legacy bool) []string {
	var r io.Reader = strings.NewReader(s)
	if oneByte {
		r = iotest.OneByteReader(r)
	}
	var got []string
	var err error
	if legacy {
		err = legacyReadEvents(r, func(ev legacyEvent) bool {
			got = append(got, fmt.Sprintf("%q %q %q %v", ev.id, ev.name, ev.data, ev.hasID))
			return len(got) < stop
		})
	} else {
		err = readEvents(r, func(ev sseEvent) bool {
			got = append(got, fmt.Sprintf("%q %q %q %v", ev.id, ev.name, ev.data, ev.hasID))
			return len(got) < stop
		})
	}
	return append(got, fmt.Sprint(err))
}

func checkReadEvents(t *testing.T, s string, stop int) {
	t.Helper()
	for _, one := range []bool{false, true} {
		want, got := eventsOf(s, stop, one, true), eventsOf(s, stop, one, false)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("readEvents(%q) differs from the former reader:\n got %q\nwant %q", s, got, want)
		}
	}
}

// TestReadEventsAsBefore: readEvents gives the events, and stops, as the
// former reader did: long lines past the buffer, CRLF, comments, fields
// without a value, a stream cut mid-event, fn stopping early.
func TestReadEventsAsBefore(t *testing.T) {
	long := strings.Repeat("x", 70000)
	for _, s := range []string{
		"", "\n", "retry: 1000\n: request r1\n\nid: 3\nevent: result\ndata: {\"seq\":3}\n\nevent: end\ndata: {}\n\n",
		"data: a\ndata: b\n\n", "event: x\r\n\r\n", ": ping\n\n", "id: 7\nid\ndata\n\n", "data:no-space\n\n",
		"event: result\ndata: {\"task_id\":\"GSETASK:20200101000000:1\"}", "\n\n\n", "data: " + long + "\n\n",
		"event: chunk\ndata: " + long + long + "\r\ndata: y\n\nevent: end\n\n", "data: a\n\ndata: b\n\ndata: c\n\n", "event:  two spaces\n\n",
		"data: \xff\u2028\n\n", "id: " + long + "\nevent: " + long + "\n\n",
	} {
		for _, stop := range []int{1, 2, 1000} {
			checkReadEvents(t, s, stop)
		}
	}
}

// FuzzReadEvents: readEvents gives what the former reader gave.
func FuzzReadEvents(f *testing.F) {
	f.Add("id: 3\nevent: result\ndata: {\"seq\":3}\n\nevent: end\ndata: {}\n\n", 2)
	f.Add("data: a\r\ndata\n: c\n\nevent:x\n", 1000)
	f.Fuzz(func(t *testing.T, s string, stop int) {
		checkReadEvents(t, s, max(1, min(stop, 1000)))
	})
}
