package ui

import (
	"context"
	"errors"
	"fmt"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/model"
	"gseproc/theme"
)

// shared is the context every page sees: the backend, the theme, keys,
// config and the window size. Pages never call the backend in Update: they
// return commands built with the helpers below.
type shared struct {
	ctx      context.Context
	be       backend.Backend
	theme    *theme.Theme
	keys     *KeyMap
	cfg      config.ConsoleConfig
	readOnly bool
	operator string
	now      func() time.Time
	guard    time.Duration // how long a fresh dialog ignores keys
	batchMax int           // results per batch message
	batchWin time.Duration // how long a batch waits for more results
	static   bool          // no live clocks (golden files)
	copy     func(string)  // copies to the terminal's clipboard (nil: none)
	release  func()        // gives unused memory back (Options.ReleaseMemory; nil: none)

	width, height int
	topID         int // the page on top (only it runs a clock)
	nextID        int
	pending       []tea.Msg     // posted by pages, handled by the root in the same Update
	events        []model.Event // newest last, capped
	eventsLive    bool          // the live event subscription is in place
	lastEventSeen time.Time
	log           []logEntry // every error, warning and notice shown, oldest first
	logged        int        // messages ever logged (log keeps the last maxLog)
	infoSeq       int        // Info calls issued
}

const maxEvents = 500

func (s *shared) newID() int { s.nextID++; return s.nextID }

// page is one screen of the stack.
type page interface {
	// ID identifies the page so that answers to its commands reach it.
	ID() int
	Init() tea.Cmd
	Update(msg tea.Msg) tea.Cmd
	View() string
	SetSize(w, h int)
	// Title is the page's breadcrumb part.
	Title() string
	// Help lists the page's own bindings (the root adds the global ones).
	Help() keyHelp
	// Capturing reports whether a text input has the focus, so printable
	// keys belong to the page and not to global bindings.
	Capturing() bool
	// Resume is called when the page is on top again after the one above closed.
	Resume() tea.Cmd
	// Close cancels the page's subscriptions.
	Close()
}

// Messages.
type (
	// pageMsg is a message for one page, routed by id.
	pageMsg interface{ pageID() int }

	// errMsg reports a failed backend call in the status bar.
	errMsg struct {
		what string
		err  error
	}
	// infoMsg refreshes the status bar; infoFailedMsg says the backend
	// could not be asked.
	// seq orders the answers: an older call answering late is dropped.
	infoMsg struct {
		info backend.Info
		seq  int
	}
	infoFailedMsg struct {
		err error
		seq int
	}
	// resolvedMsg says what failed before has now worked: its error
	// banner goes (the message log keeps it).
	resolvedMsg struct{ what string }
	// pushMsg opens a page on top of the stack.
	pushMsg struct{ p page }
	// popMsg closes the top page.
	popMsg struct{}
	// replaceMsg closes the top page and opens p instead.
	replaceMsg struct{ p page }
	// confirmMsg opens the confirmation dialog.
	confirmMsg struct{ d *dialog }
	// eventsMsg is a batch of host events.
	eventsMsg struct {
		events []model.Event
		ch     <-chan model.Event
		closed bool
	}
	// taskStartedMsg: an operation was accepted by the backend.
	taskStartedMsg struct {
		from int
		task model.Task
	}
	// flashMsg shows a short notice in the status bar.
	flashMsg struct{ text string }
)

func (e errMsg) Error() string { return e.what + ": " + e.err.Error() }

func errCmd(what string, err error) tea.Cmd {
	return func() tea.Msg { return errMsg{what, err} }
}

// post queues a message for the root to handle right after the current
// Update (navigation, dialogs, notices): no goroutine, no frame in between.
// It returns nil so pages can write `return p.s.post(...)`.
func (s *shared) post(m tea.Msg) tea.Cmd {
	s.pending = append(s.pending, m)
	return nil
}

// change returns b, disabled (so help does not offer it) when the console
// is read-only: for the keys that edit definitions.
func (s *shared) change(b binding) binding {
	if s.readOnly {
		b.SetEnabled(false)
	}
	return b
}

// notReady answers an action key on a page that has not loaded yet: the key
// does nothing (keys typed ahead never act on a list the operator has not
// seen), and the status bar says why.
func (s *shared) notReady(what string) tea.Cmd {
	return s.post(flashMsg{"still loading " + what + ": key ignored"})
}

// operable is a page with a target for an operation (o, and the palette's
// op commands).
type operable interface {
	// opTarget is the page's target; false when it has none, and then the
	// page has said why in the status bar.
	opTarget() (target, bool)
}

// openOp opens the op picker on o's target, pointing at op when given
// (nothing runs before the operator confirms in the picker).
func (s *shared) openOp(o operable, op *model.OpType) tea.Cmd {
	tg, ok := o.opTarget()
	if !ok {
		return nil
	}
	p := newOpPage(s, tg)
	if op != nil {
		p.point(*op)
	}
	return s.post(pushMsg{p})
}

// fresh is when a live list last loaded; the root shows its age next to the
// breadcrumb.
type fresh struct{ at time.Time }

func (f *fresh) refreshedAt() time.Time { return f.at }

// refresher is a page that loads from the backend (see fresh).
type refresher interface{ refreshedAt() time.Time }

// streamed is a page kept current by the host event stream alone (no load
// of its own to date it): the root says whether the stream is live.
type streamed interface{ streamed() }

func (p *eventsPage) streamed()   {}
func (p *fleetMapPage) streamed() {}

// age says how long ago t was, in steps the status tick keeps true (the
// clock time when nothing ticks, for golden files).
func (s *shared) age(t time.Time) string {
	if s.static {
		return "at " + t.Local().Format("15:04:05")
	}
	d := s.now().Sub(t)
	switch {
	case d < 10*time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds())/10*10)
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	}
	return "at " + t.Local().Format("15:04")
}

// resolved tells the root that what failed before (an errMsg's what) worked.
func (s *shared) resolved(what string) { s.post(resolvedMsg{what}) }

// refreshInfo fetches the backend's Info for the status bar.
func (s *shared) refreshInfo() tea.Cmd {
	ctx, be := s.ctx, s.be
	s.infoSeq++
	seq := s.infoSeq
	return func() tea.Msg {
		info, err := be.Info(ctx)
		if err != nil {
			return infoFailedMsg{err, seq}
		}
		return infoMsg{info, seq}
	}
}

// operate sends req and reports taskStartedMsg (or errMsg).
func (s *shared) operate(from int, req backend.OperateRequest) tea.Cmd {
	ctx, be := s.ctx, s.be
	req.Source = "console"
	req.Operator = s.operator
	return func() tea.Msg {
		t, err := be.Operate(ctx, req)
		if err != nil {
			return errMsg{req.Op.String(), err}
		}
		return taskStartedMsg{from: from, task: t}
	}
}

// drainEvents reads the event channel in batches: it blocks for the first
// event (so nothing ticks while nothing happens), then takes what else is
// already there up to batchMax or for batchWin.
func (s *shared) drainEvents(ch <-chan model.Event) tea.Cmd {
	max, win := s.batchMax, s.batchWin
	return func() tea.Msg {
		evs, closed := drain(ch, max, win)
		return eventsMsg{events: evs, ch: ch, closed: closed}
	}
}

// drain reads one batch from ch: blocking for the first item, then whatever
// arrives within win, up to max items. closed reports the channel closed.
func drain[T any](ch <-chan T, max int, win time.Duration) ([]T, bool) {
	return drainInto(nil, ch, max, win)
}

// drainInto is drain, the batch read into buf's room (buf[:0]): a reader
// done with its batch before it asks for the next reads each into the
// same room (a watch of 228,000 results allocated 220 MB of batches, the
// embedded console's most, each read once and dropped).
func drainInto[T any](buf []T, ch <-chan T, max int, win time.Duration) ([]T, bool) {
	first, ok := <-ch
	if !ok {
		return nil, true
	}
	out := append(buf[:0], first)
	var timer <-chan time.Time
	for len(out) < max {
		select {
		case v, ok := <-ch:
			if !ok {
				return out, true
			}
			out = append(out, v)
			continue
		default:
		}
		if timer == nil {
			if win <= 0 {
				return out, false
			}
			t := time.NewTimer(win)
			defer t.Stop()
			timer = t.C
		}
		select {
		case v, ok := <-ch:
			if !ok {
				return out, true
			}
			out = append(out, v)
		case <-timer:
			return out, false
		}
	}
	return out, false
}

// isReadOnly reports whether err says the backend refused a change.
func isReadOnly(err error) bool { return errors.Is(err, model.ErrReadOnly) }
