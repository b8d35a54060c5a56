package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	id    []byte // valid only during the call of readEvents's fn
	name  string
	data  []byte // valid only during the call of readEvents's fn
	hasID bool
}

// maxEvent bounds one line of an event stream and one event's data: the
// server is not trusted to end them (a result is at most a NATS payload,
// 8 MiB, a log chunk 64 KiB; JSON may escape a byte as six).
const maxEvent = 64 << 20

// errEventTooLong is readEvents's error for a line or an event's data
// past its bound; the stream is not read further.
var errEventTooLong = fmt.Errorf("event stream: a line or an event over %d MiB; refused", maxEvent>>20)

// readEvents parses an event stream, calling fn for every event until the
// stream ends (io.EOF) or fn returns false. A line is read in place (a
// line longer than the 64 KB buffer is gathered apart) and an event's
// data is gathered in one buffer the events share: a task's stream is a
// result event per target (100,000 per op over 100,000 hosts), each once
// copied three times (TestReadEventsAsBefore, FuzzReadEvents compare it
// with the former reader). A line or an event's data over maxEvent ends
// the stream with errEventTooLong.
func readEvents(r io.Reader, fn func(sseEvent) bool) error {
	return readEventsMax(r, maxEvent, fn)
}

// readEventsMax is readEvents with lines and events bounded by max (at
// least the reader's 64 KiB buffer).
func readEventsMax(r io.Reader, max int, fn func(sseEvent) bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var ev sseEvent
	var data, long, id []byte
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long[:0], line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				if len(long)+len(line) > max+2 { // past the bound however it ends
					return errEventTooLong
				}
				long = append(long, line...)
			}
			line = long
		}
		if err != nil {
			if err == io.EOF && len(line) == 0 {
				return io.EOF
			}
			if err != io.EOF {
				return err
			}
		}
		line = trimEOL(line)
		if len(line) > max {
			return errEventTooLong
		}
		switch {
		case len(line) == 0:
			if len(data) > 0 || ev.name != "" {
				ev.data = bytes.TrimSuffix(data, []byte("\n"))
				if ev.name == "" {
					ev.name = "message"
				}
				if !fn(ev) {
					return nil
				}
			}
			ev, data = sseEvent{}, data[:0]
		case line[0] == ':':
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				ev.name = eventName(value)
			case "data":
				if len(data)+len(value) > max {
					return errEventTooLong
				}
				data = append(append(data, value...), '\n')
			case "id":
				// Kept in a buffer of its own (a string of it was one
				// allocation per result of a task's stream).
				id = append(id[:0], value...)
				ev.id, ev.hasID = id, true
			}
		}
		if err == io.EOF {
			return io.EOF
		}
	}
}

// trimEOL is line without the '\r' and '\n' it ends with, as
// bytes.TrimRight(line, "\r\n"), which made its set of two bytes on every
// call (four lines per result of a task's stream).
func trimEOL(line []byte) []byte {
	for len(line) > 0 && (line[len(line)-1] == '\n' || line[len(line)-1] == '\r') {
		line = line[:len(line)-1]
	}
	return line
}

// eventName is name as a string, the names the server sends without a
// copy.
func eventName(name []byte) string {
	switch string(name) {
	case "result":
		return "result"
	case "end":
		return "end"
	case "event":
		return "event"
	case "chunk":
		return "chunk"
	}
	return string(name)
}

// openStream GETs an event stream; a non-200 reply is decoded as an error.
// It fails over as any read does: a stream resumes on another server.
func (c *Client) openStream(ctx context.Context, path, lastID string) (*http.Response, error) {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: path, stream: true, lastID: lastID})
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer resp.Body.Close()
		if err := readReply(resp, nil); err != nil {
			return nil, fmt.Errorf("GET %s: %w", path, err)
		}
		return nil, fmt.Errorf("GET %s: %s is not an event stream", path, resp.Status)
	}
	return resp, nil
}

// permanent reports whether reconnecting cannot help.
func permanent(err error) bool {
	var ae *APIError
	var ve model.ValidationError
	return errors.As(err, &ve) || (errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 && ae.Status != http.StatusTooManyRequests)
}

// Watch streams a task's final results (Seq > after, in Seq order) through
// /api/v1/tasks/{id}/stream. When the connection drops before the task is
// complete it reconnects with Last-Event-ID = the last Seq received, so no
// result is lost or repeated. The channel closes when the task is
// complete, ctx ends, the client is closed, or reconnecting failed
// maxFailures times in a row (logged).
func (c *Client) Watch(ctx context.Context, id string, after int64) (<-chan model.Result, error) {
	resp, err := c.openStream(ctx, taskPath(id)+"/stream", strconv.FormatInt(after, 10))
	if err != nil {
		return nil, err
	}
	out := make(chan model.Result, 64)
	c.goStream(ctx, func(ctx context.Context) {
		defer close(out)
		c.watch(ctx, id, after, resp, func(r *model.Result, _ []byte) bool {
			select {
			case out <- *r:
				return true
			case <-ctx.Done():
				return false
			}
		}, nil)
	})
	return out, nil
}

// maxBatch bounds the results WatchBatches sends at once.
const maxBatch = 256

// maxBatchText bounds the text a ResultBatch holds: a batch is sent once
// its texts reach it (results may be large; a batch of them is not).
const maxBatchText = 1 << 20

// WatchBatches is Watch with the results sent in batches (in Seq order,
// each batch at most maxBatch): those read from the connection while no
// read waits, up to the first that would. The op client reads 100,000
// results an op; handed over one by one, its reading and printing
// goroutines woke each other for every result (a tenth of its CPU).
func (c *Client) WatchBatches(ctx context.Context, id string, after int64) (<-chan []model.Result, error) {
	return watchBatched(ctx, c, id, after, func(b *[]model.Result, r *model.Result, _ []byte) bool {
		if *b == nil {
			*b = make([]model.Result, 0, maxBatch)
		}
		*b = append(*b, *r)
		return len(*b) >= maxBatch
	}, func() []model.Result { return nil })
}

// ResultBatch is a batch of a task's results (WatchResultBatches) and,
// of each, the JSON text the server sent when it is exactly what
// model.AppendResultJSON writes of the result (ResultDecoder.DecodeExact
// read it so: it was parsed, not taken on trust).
type ResultBatch struct {
	Results []model.Result
	text    []byte
	spans   []textSpan         // Results[i]'s text, when exact
	free    chan<- ResultBatch // where Done hands the batch's room back
}

// textSpan is where a result's text is in its batch's; end < 0: none.
type textSpan struct{ start, end int }

// Text is the text the server sent of Results[i], exactly what
// model.AppendResultJSON writes of it, or nil when it is not that.
func (b *ResultBatch) Text(i int) []byte {
	if sp := b.spans[i]; sp.end >= 0 {
		return b.text[sp.start:sp.end:sp.end]
	}
	return nil
}

// Done hands the batch's room back to its watch, which reads a later
// batch into it: the caller keeps nothing of the batch (its results, the
// texts) after. A batch per read of the connection, each with room for
// 256 results and their text, was most of the op client's allocations.
func (b *ResultBatch) Done() {
	if b.free == nil {
		return
	}
	select {
	case b.free <- ResultBatch{Results: b.Results[:0], text: b.text[:0], spans: b.spans[:0], free: b.free}:
	default: // enough room waits
	}
	*b = ResultBatch{}
}

// add appends r and its exact text (nil: none); true when the batch is
// full.
func (b *ResultBatch) add(r *model.Result, text []byte) bool {
	if b.Results == nil {
		b.Results = make([]model.Result, 0, maxBatch)
		b.spans = make([]textSpan, 0, maxBatch)
	}
	b.Results = append(b.Results, *r)
	sp := textSpan{end: -1}
	if text != nil {
		sp.start = len(b.text)
		b.text = append(b.text, text...)
		sp.end = len(b.text)
	}
	b.spans = append(b.spans, sp)
	return len(b.Results) >= maxBatch || len(b.text) >= maxBatchText
}

// WatchResultBatches is WatchBatches with each result's text as the
// server sent it when it is exact (ResultBatch.Text): the op client's
// --json line holds the result as AppendResultJSON writes it, and
// keeping the text it read spares writing it again. The caller hands
// each batch's room back by its Done when it is through with it.
func (c *Client) WatchResultBatches(ctx context.Context, id string, after int64) (<-chan ResultBatch, error) {
	free := make(chan ResultBatch, 4)
	return watchBatched(ctx, c, id, after, func(b *ResultBatch, r *model.Result, text []byte) bool {
		return b.add(r, text)
	}, func() ResultBatch {
		select {
		case b := <-free:
			return b
		default:
			return ResultBatch{free: free}
		}
	})
}

// watchBatched streams a task's results (Watch) in batches of B: add
// adds a result and its exact text (valid during the call alone) to a
// batch, true when it is full; fresh is an empty batch. A batch is sent
// when it is full and when the next read of the connection would wait.
func watchBatched[B any](ctx context.Context, c *Client, id string, after int64,
	add func(b *B, r *model.Result, text []byte) bool, fresh func() B) (<-chan B, error) {
	resp, err := c.openStream(ctx, taskPath(id)+"/stream", strconv.FormatInt(after, 10))
	if err != nil {
		return nil, err
	}
	out := make(chan B, 4)
	c.goStream(ctx, func(ctx context.Context) {
		defer close(out)
		batch, n := fresh(), 0
		send := func() bool {
			if n == 0 {
				return true
			}
			select {
			case out <- batch:
				batch, n = fresh(), 0
				return true
			case <-ctx.Done():
				return false
			}
		}
		c.watch(ctx, id, after, resp, func(r *model.Result, text []byte) bool {
			n++
			return !add(&batch, r, text) || send()
		}, send)
		send()
	})
	return out, nil
}

// watch reads the task stream resp (opened after Seq after) until the
// task is complete, ctx ends or resuming it failed, giving each result
// to emit (false: stop) with the text it was read from when that is
// exact (model.ResultDecoder.DecodeExact; nil when not; both valid
// during the call alone). idle, when not nil, is called before every read
// of the connection and before reconnecting (false: stop).
func (c *Client) watch(ctx context.Context, id string, after int64, resp *http.Response, emit func(*model.Result, []byte) bool, idle func() bool) {
	path := taskPath(id) + "/stream"
	last := after
	fails := 0
	// The results of one task repeat most of their strings (its id, the
	// process, the message): decoded shared, not made again.
	var rd model.ResultDecoder
	var r model.Result // emit's, one for the watch (a result's own was one allocation per result)
	for {
		ended := false
		var body io.Reader = resp.Body
		if idle != nil {
			body = idleReader{r: resp.Body, idle: idle}
		}
		err := readEventsMax(body, c.maxEvent, func(ev sseEvent) bool {
			switch ev.name {
			case "result":
				var exact bool
				var err error
				r, exact, err = rd.DecodeExact(ev.data)
				if err != nil {
					c.log.Warn("task stream: bad result event", "task", id, "err", err)
					return true
				}
				if r.Seq <= last {
					return true // already delivered
				}
				var text []byte
				if exact {
					text = ev.data
				}
				if !emit(&r, text) {
					return false
				}
				last = r.Seq
				fails = 0
			case "end":
				ended = true
				return false
			}
			return true
		})
		resp.Body.Close()
		if ended || ctx.Err() != nil {
			return
		}
		if errors.Is(err, errEventTooLong) { // the same would come again
			c.log.Warn("task stream: not resumed", "task", id, "last_seq", last, "err", err)
			return
		}
		// The results read with the drop (up to a batch) are handed over
		// now, not after the reopen's backoff.
		if idle != nil && !idle() {
			return
		}
		c.log.Debug("task stream dropped; resuming", "task", id, "last_seq", last, "err", err)
		if resp = c.reopen(ctx, path, strconv.FormatInt(last, 10), &fails, false, "task", id); resp == nil {
			return
		}
	}
}

// idleReader calls idle before every read of r: false ends the reading
// (errStopped).
type idleReader struct {
	r    io.Reader
	idle func() bool
}

// errStopped ends a read idleReader's idle stopped.
var errStopped = errors.New("event stream: stopped")

func (ir idleReader) Read(p []byte) (int, error) {
	if !ir.idle() {
		return 0, errStopped
	}
	return ir.r.Read(p)
}

// goStream runs fn in a goroutine the client owns (Close waits for it);
// fn's ctx also ends when the client is closed.
func (c *Client) goStream(ctx context.Context, fn func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer cancel()
		defer stop()
		fn(ctx)
	}()
}

// reopen reconnects to the stream at path after it dropped, backing off
// between attempts; *fails counts the attempts since the stream last
// delivered. A task stream (persistent false) reconnects at once the first
// time and gives up (nil, logged) after c.maxFail attempts in a row or on
// an error reconnecting cannot help; the event stream (persistent) waits
// before its first attempt and only stops when ctx ends. reopen returns nil
// when ctx ends. logArgs name the stream in the log.
func (c *Client) reopen(ctx context.Context, path, lastID string, fails *int, persistent bool, logArgs ...any) *http.Response {
	what, skip := "task stream", 0
	if persistent {
		what, skip = "event stream", 1
	}
	for {
		if ctx.Err() != nil {
			return nil
		}
		*fails++
		if !persistent && *fails > c.maxFail {
			c.log.Error(what+": giving up after repeated failures", append(logArgs, "path", path, "last_id", lastID, "failures", *fails-1)...)
			return nil
		}
		if !sleep(ctx, c.delay(*fails+skip)) {
			return nil
		}
		resp, err := c.openStream(ctx, path, lastID)
		if err == nil {
			return resp
		}
		if !persistent && ctx.Err() == nil && permanent(err) {
			c.log.Warn(what+": cannot resume", append(logArgs, "err", err)...)
			return nil
		}
		c.log.Debug(what+": reconnect failed", append(logArgs, "err", err)...)
	}
}

// delay is the backoff before the n-th consecutive reconnect (n >= 1);
// the first reconnect after a stream that delivered is immediate.
func (c *Client) delay(n int) time.Duration {
	return model.Backoff{Base: c.backoff[0], Max: c.backoff[1], Immediate: true}.Delay(n-1, 0)
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Events streams host events through /api/v1/events, reconnecting when the
// connection drops (events during the gap are not replayed; RecentEvents
// has them). The channel closes when ctx ends or the client is closed.
func (c *Client) Events(ctx context.Context) (<-chan model.Event, error) {
	const path = "/api/v1/events"
	resp, err := c.openStream(ctx, path, "")
	if err != nil {
		return nil, err
	}
	out := make(chan model.Event, 256)
	c.goStream(ctx, func(ctx context.Context) {
		defer close(out)
		fails := 0
		for {
			err := readEventsMax(resp.Body, c.maxEvent, func(ev sseEvent) bool {
				if ev.name != "event" {
					return true
				}
				var e model.Event
				if err := json.Unmarshal(ev.data, &e); err != nil {
					return true
				}
				fails = 0
				select {
				case out <- e:
					return true
				case <-ctx.Done():
					return false
				}
			})
			resp.Body.Close()
			if errors.Is(err, errEventTooLong) {
				c.log.Warn("event stream: dropped; resuming", "err", err)
			}
			if resp = c.reopen(ctx, path, "", &fails, true); resp == nil {
				return
			}
		}
	})
	return out, nil
}

// Logs streams a process's log on a host through /api/v1/logs (events
// "chunk", then "end"). A stream cut before its end is not resumed: its
// last chunk says so (Error).
func (c *Client) Logs(ctx context.Context, q backend.LogQuery) (<-chan model.TailChunk, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	v := url.Values{"proc": {q.Process}, "host": {q.Host.AgentID()}, "stream": {string(q.Stream)}}
	if q.File != "" {
		v.Set("file", q.File)
	}
	if q.Instance > 0 {
		v.Set("instance", strconv.Itoa(q.Instance))
	}
	if q.Bytes > 0 {
		v.Set("bytes", strconv.FormatInt(q.Bytes, 10))
	}
	if q.Follow {
		v.Set("follow", "true")
	}
	resp, err := c.openStream(ctx, "/api/v1/logs?"+v.Encode(), "")
	if err != nil {
		return nil, err
	}
	out := make(chan model.TailChunk, 16)
	c.goStream(ctx, func(ctx context.Context) {
		defer close(out)
		defer resp.Body.Close()
		ended := false
		err := readEventsMax(resp.Body, c.maxEvent, func(ev sseEvent) bool {
			switch ev.name {
			case "end":
				ended = true
				return false
			case "chunk":
			default:
				return true
			}
			var ch model.TailChunk
			if err := json.Unmarshal(ev.data, &ch); err != nil {
				return true
			}
			select {
			case out <- ch:
				return true
			case <-ctx.Done():
				return false
			}
		})
		if !ended && ctx.Err() == nil {
			why := "the server closed the stream before its end"
			if err != nil {
				why = err.Error()
			}
			select {
			case out <- model.TailChunk{Host: q.Host, Error: "log stream cut: " + why}:
			case <-ctx.Done():
			}
		}
	})
	return out, nil
}
