// Package logging holds slog handlers shared by gseproc's commands.
package logging

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// RateLimit wraps h so that a message repeated within window is written
// once: records of level min and above are keyed by level and message with
// every run of digits masked ("attempt 12", "127.0.0.1:4222" and a port
// are the same message), the first of a key passes, the repeats within
// window are counted and dropped, and the next one after window passes
// with "repeated" = the number dropped. Lower levels pass untouched.
func RateLimit(h slog.Handler, min slog.Level, window time.Duration) slog.Handler {
	return &rateLimit{h: h, min: min, st: &limitState{window: window, seen: map[string]*seen{}}}
}

type rateLimit struct {
	h   slog.Handler
	min slog.Level
	st  *limitState
}

type limitState struct {
	window time.Duration
	mu     sync.Mutex
	seen   map[string]*seen
}

type seen struct {
	first   time.Time // start of the current window
	dropped int
}

// maxKeys bounds the remembered messages; beyond it the memory is reset.
const maxKeys = 4096

func (r *rateLimit) Enabled(ctx context.Context, l slog.Level) bool { return r.h.Enabled(ctx, l) }

func (r *rateLimit) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level < r.min {
		return r.h.Handle(ctx, rec)
	}
	key := rec.Level.String() + " " + maskDigits(rec.Message)
	now := rec.Time
	if now.IsZero() {
		now = time.Now()
	}
	r.st.mu.Lock()
	s := r.st.seen[key]
	switch {
	case s == nil:
		if len(r.st.seen) >= maxKeys {
			clear(r.st.seen)
		}
		r.st.seen[key] = &seen{first: now}
	case now.Sub(s.first) < r.st.window:
		s.dropped++
		r.st.mu.Unlock()
		return nil
	default:
		if s.dropped > 0 {
			rec = rec.Clone()
			rec.AddAttrs(slog.Int("repeated", s.dropped), slog.Duration("within", now.Sub(s.first).Round(time.Second)))
		}
		s.first, s.dropped = now, 0
	}
	r.st.mu.Unlock()
	return r.h.Handle(ctx, rec)
}

func (r *rateLimit) WithAttrs(as []slog.Attr) slog.Handler {
	return &rateLimit{h: r.h.WithAttrs(as), min: r.min, st: r.st}
}

func (r *rateLimit) WithGroup(name string) slog.Handler {
	return &rateLimit{h: r.h.WithGroup(name), min: r.min, st: r.st}
}

func maskDigits(s string) string {
	var b strings.Builder
	digit := false
	for _, c := range s {
		if c >= '0' && c <= '9' {
			if !digit {
				b.WriteByte('#')
			}
			digit = true
			continue
		}
		digit = false
		b.WriteRune(c)
	}
	return b.String()
}
