package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gseproc/model"
)

// xs reads 'x' for ever.
type xs struct{}

func (xs) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestReadEventsBounded: a line or an event's data past the bound ends
// the stream with errEventTooLong once the bound is read (not at the
// stream's end: an endless line, here cut at four times the bound so the
// test ends, was gathered whole), after the events before it; an event at
// the bound is read.
func TestReadEventsBounded(t *testing.T) {
	const max = 256 << 10
	endless := func(prefix string) io.Reader {
		return io.MultiReader(strings.NewReader(prefix), io.LimitReader(xs{}, 4*max))
	}
	manyLines := strings.Repeat("data: "+strings.Repeat("y", 1000)+"\n", 4*max/1000)
	for _, tc := range []struct {
		name   string
		r      io.Reader
		events []string
		err    error
	}{
		{"an endless data line", endless("event: result\ndata: ok\n\ndata: "), []string{"ok"}, errEventTooLong},
		{"an endless comment", endless(": "), nil, errEventTooLong},
		{"an endless event name", endless("data: a\n\nevent: "), []string{"a"}, errEventTooLong},
		{"an event of endless data lines", strings.NewReader(manyLines), nil, errEventTooLong},
		{"a line at the bound", strings.NewReader("data: " + strings.Repeat("z", max-6) + "\r\n\n"), []string{strings.Repeat("z", max-6)}, io.EOF},
		{"a line past the bound", strings.NewReader("data: " + strings.Repeat("z", max-5) + "\r\n\n"), nil, errEventTooLong},
		{"a line past the bound, LF", strings.NewReader("data: " + strings.Repeat("z", max-5) + "\n\n"), nil, errEventTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &countingReader{r: tc.r}
			var got []string
			err := readEventsMax(r, max, func(ev sseEvent) bool {
				got = append(got, string(ev.data))
				return true
			})
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.events) {
				t.Fatalf("events %.40q, want %.40q", got, tc.events)
			}
			if tc.err == errEventTooLong && r.n > max+256<<10 {
				t.Fatalf("read %d bytes before refusing, bound %d", r.n, max)
			}
		})
	}
	if maxEvent < 8<<20 {
		t.Fatalf("maxEvent %d is less than a NATS payload", maxEvent)
	}
}

// TestWatchRefusesAnEndlessLine: a task stream whose server sends a line
// without end is refused at the bound and not resumed (the same line
// would come again): the results before it are delivered, the channel
// closes, the stream was opened once.
func TestWatchRefusesAnEndlessLine(t *testing.T) {
	const max = 256 << 10
	var opens atomic.Int32
	res, err := json.Marshal(model.Result{TaskID: "t1", Seq: 1, Host: model.Host{IP: "10.0.0.1"}, ProcKey: "web:nginx", Op: model.OpStatus, State: model.StateSuccess})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/tasks/t1/stream" {
			http.NotFound(w, r)
			return
		}
		opens.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "id: 1\nevent: result\ndata: %s\n\nevent: result\ndata: ", res)
		chunk := []byte(strings.Repeat("x", 32<<10))
		for range 4 * max / len(chunk) { // bounded: the test ends without the bound too
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer hs.Close()
	c := New(hs.URL, WithReconnect(time.Millisecond, 10*time.Millisecond, 5))
	defer c.Close()
	c.maxEvent = max
	ch, err := c.Watch(context.Background(), "t1", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []model.Result
	timeout := time.After(60 * time.Second)
	for done := false; !done; {
		select {
		case r, ok := <-ch:
			if !ok {
				done = true
				break
			}
			got = append(got, r)
		case <-timeout:
			t.Fatalf("the stream did not end within 60s; %d results, %d opens", len(got), opens.Load())
		}
	}
	if len(got) != 1 || got[0].Seq != 1 || opens.Load() != 1 {
		t.Fatalf("%d results, stream opened %d times; want the one result, opened once", len(got), opens.Load())
	}
}
