package ui

import (
	"context"
	"slices"

	"gseproc/backend"
	"gseproc/model"
)

// Free text from the fleet (a result's or an event's message, a
// process's status message, command line and version, an agent's
// version and host labels) is made plain where it enters the console: the guarded
// backend. termSafe, at the frame's exit, must keep SGR (our own styling,
// which it cannot tell from the fleet's), so a message holding ESC[8m
// would otherwise hide the rest of its row, and ESC[30;40m blank it.
//
// What the backend hands out may be shared with it (a lending store, the
// simulator's buffers): nothing is written in place; a value that needs
// cleaning is cleaned in a copy, and a slice is copied only when one of
// its elements changed. Clean text (nearly all of it) costs one scan and
// no allocation.

// plainText is s without escape sequences or controls but newline and
// tab, and whether that changed it.
func plainText(s string) (string, bool) {
	p := model.PlainText(s)
	return p, len(p) != len(s)
}

// plainStatus cleans a process status's free text (a copy).
func plainStatus(st model.ProcStatus) (model.ProcStatus, bool) {
	var a, b, c bool
	st.Message, a = plainText(st.Message)
	st.Cmdline, b = plainText(st.Cmdline)
	st.Version, c = plainText(st.Version)
	return st, a || b || c
}

func plainResult(r model.Result) (model.Result, bool) {
	var a, b bool
	r.Message, a = plainText(r.Message)
	if r.Status != nil {
		var st model.ProcStatus
		if st, b = plainStatus(*r.Status); b {
			r.Status = &st // a new status: the one pointed at may be shared
		}
	}
	return r, a || b
}

func plainEvent(e model.Event) (model.Event, bool) {
	var a bool
	e.Message, a = plainText(e.Message)
	return e, a
}

func plainHost(h backend.HostView) (backend.HostView, bool) {
	var dirty, d bool
	h.Version, dirty = plainText(h.Version)
	h.Labels, d = plainLabels(h.Labels)
	dirty = dirty || d
	if statusesPlain(h.Procs) {
		// Nothing to clean (a list's statuses carry no free text):
		// plainAll's copies of each process (~230 bytes, twice) were
		// ~15 ms of a 100,000-host open.
		return h, dirty
	}
	h.Procs, _ = plainAll(h.Procs, func(p backend.ProcView) (backend.ProcView, bool) {
		var d bool
		p.Status, d = plainStatus(p.Status)
		dirty = dirty || d
		return p, d
	})
	return h, dirty
}

// statusesPlain reports whether the statuses of ps need no cleaning
// (plainStatus would change none), read in place.
func statusesPlain(ps []backend.ProcView) bool {
	for i := range ps {
		st := &ps[i].Status
		if _, d := plainText(st.Message); d {
			return false
		}
		if _, d := plainText(st.Cmdline); d {
			return false
		}
		if _, d := plainText(st.Version); d {
			return false
		}
	}
	return true
}

// plainLabels is a host's labels (its agent's heartbeat reports them:
// the fleet's text) with keys and values made plain: a new map when one
// changed (m may be the backend's own, or its reader's to reuse).
func plainLabels(m map[string]string) (map[string]string, bool) {
	clean := true
	for k, v := range m {
		_, dk := plainText(k)
		_, dv := plainText(v)
		if clean = !dk && !dv; !clean {
			break
		}
	}
	if clean {
		return m, false
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[model.PlainText(k)] = model.PlainText(v)
	}
	return out, true
}

// plainAll is xs with clean applied, copied only when an element changed.
func plainAll[T any](xs []T, clean func(T) (T, bool)) ([]T, bool) {
	var out []T
	for i := range xs {
		if x, changed := clean(xs[i]); changed {
			if out == nil {
				out = slices.Clone(xs)
			}
			out[i] = x
		}
	}
	if out == nil {
		return xs, false
	}
	return out, true
}

// plainChan forwards in's values cleaned until in closes; once ctx ends
// it drops them but still drains in, so its producer is never left
// blocked. Its owner is in's producer, which closes in when ctx ends.
func plainChan[T any](ctx context.Context, in <-chan T, clean func(T) (T, bool)) <-chan T {
	out := make(chan T, cap(in))
	go func() {
		defer close(out)
		for v := range in {
			v, _ = clean(v)
			select {
			case out <- v:
			case <-ctx.Done():
			}
		}
	}()
	return out
}
