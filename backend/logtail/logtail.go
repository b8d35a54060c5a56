// Package logtail serves the pieces of a log a model.TailRequest asks
// for: where to start (a line boundary when counting back from the end;
// from the start again when the file was truncated or replaced), how many
// bytes (whole lines, at most the chunk bound), how long to wait for new
// ones when following, and how fast (each answer is paced so that one
// stream, a chain of requests, gets at most its rate in bytes per
// second). The real agent serves files through it and the simulator its
// simulated logs: one protocol, one implementation.
package logtail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"gseproc/model"
)

// Source is one log: what it holds now and whether its process runs.
type Source interface {
	// Open opens the log as it is now.
	Open() (Reader, error)
	// Running reports whether the log's process is up (the log may grow).
	Running() bool
}

// Reader reads an opened log.
type Reader interface {
	io.ReaderAt
	io.Closer
	// Stat is the log's size and identity (an inode; 0 when it has none).
	Stat() (size int64, inode uint64, err error)
}

// pollEvery is how often a follow request with nothing to read looks
// again, until its wait is over.
const pollEvery = 100 * time.Millisecond

// Serve answers req from src at most at rate bytes per second (0:
// model.DefaultTailRate). The request must be valid (model.TailRequest.
// Validate).
func Serve(ctx context.Context, src Source, req model.TailRequest, rate int) (model.TailChunk, error) {
	if rate <= 0 {
		rate = model.DefaultTailRate
	}
	limit := req.Max
	if limit <= 0 || limit > model.MaxTailChunk {
		limit = model.MaxTailChunk
	}
	limit = min(limit, rate) // one answer is at most a second's worth
	deadline := time.Now().Add(min(req.Wait, model.MaxTailWait))
	for {
		final := !time.Now().Before(deadline) || ctx.Err() != nil
		c, err := read(src, req, limit, final)
		if err != nil {
			return c, err
		}
		if len(c.Data) > 0 || c.Reset || !c.Running || final {
			pace(ctx, len(c.Data), rate)
			return c, nil
		}
		t := time.NewTimer(min(pollEvery, time.Until(deadline)))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// pace waits the time n bytes take at rate bytes per second.
func pace(ctx context.Context, n, rate int) {
	if n <= 0 {
		return
	}
	t := time.NewTimer(time.Duration(int64(n) * int64(time.Second) / int64(rate)))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// read makes one answer. A line still being written (no newline yet) is
// held back while the process runs, unless final (the request's wait is
// over) or it fills the chunk by itself.
func read(src Source, req model.TailRequest, limit int, final bool) (model.TailChunk, error) {
	running := src.Running() // before reading: what an exited process wrote is in the log
	r, err := src.Open()
	if err != nil {
		return model.TailChunk{}, err
	}
	defer r.Close()
	size, ino, err := r.Stat()
	if err != nil {
		return model.TailChunk{}, fmt.Errorf("stat log: %w", err)
	}
	c := model.TailChunk{Size: size, Inode: ino, Running: running}
	start := req.Offset
	switch {
	case start < 0:
		back := req.Back
		if back <= 0 {
			back = model.DefaultTailBack
		}
		start = max(0, size-back)
		if start > 0 {
			if start, err = lineAfter(r, start, size); err != nil {
				return c, err
			}
		}
	case (req.Inode != 0 && ino != 0 && ino != req.Inode) || start > size:
		start, c.Reset = 0, true
	}
	buf := make([]byte, min(int64(limit), size-start))
	n, err := r.ReadAt(buf, start)
	if err != nil && !errors.Is(err, io.EOF) {
		return c, fmt.Errorf("read log at %d: %w", start, err)
	}
	buf = Whole(buf[:n], limit, running && !final)
	c.Offset, c.Next = start, start+int64(len(buf))
	c.Data = strings.ToValidUTF8(string(buf), "\uFFFD")
	return c, nil
}

// Whole cuts b (read with at most limit bytes) after its last newline. A
// piece without one is kept whole when it fills the limit (a line
// longer than a chunk) or when hold is false (nothing more will come, or
// the caller waits no longer); else nothing is kept yet.
func Whole(b []byte, limit int, hold bool) []byte {
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		if !hold && i < len(b)-1 && len(b) < limit {
			return b // the rest of the log, its last line unfinished
		}
		return b[:i+1]
	}
	if len(b) >= limit || !hold {
		return b
	}
	return nil
}

// lineAfter is the first line boundary at or after start (the offset
// just after a newline), looking at most a chunk ahead; start itself when
// it is one, or when no newline is that near (a very long line is shown
// from the middle).
func lineAfter(r io.ReaderAt, start, size int64) (int64, error) {
	buf := make([]byte, min(int64(model.MaxTailChunk), size-start+1))
	n, err := r.ReadAt(buf, start-1)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("read log at %d: %w", start-1, err)
	}
	if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
		return start + int64(i), nil
	}
	return start, nil
}
