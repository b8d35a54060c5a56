package ui

import (
	"fmt"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"gseproc/model"
)

// c copies what the cursor is on (a host's IP, a task id, a result's
// message, an event's or a log entry's text) to the clipboard of the
// operator's terminal with the OSC 52 escape sequence, which works over SSH
// and in tmux (with `set -g set-clipboard on`): Options.Copy is the
// terminal's termenv.Output.Copy, which also wraps it for GNU screen.

// copier is a page with something under the cursor to copy.
type copier interface {
	// copyText is what to copy and its name ("IP 10.0.0.1"); false when
	// there is nothing.
	copyText() (what, text string, ok bool)
}

// copyCmd copies text through the terminal (Options.Copy), without the
// escape sequences and controls it may hold (clipSafe).
func (s *shared) copyCmd(what, text string) tea.Cmd {
	if s.copy == nil {
		return s.post(flashMsg{"cannot copy: the console has no terminal to copy through"})
	}
	cp, text := s.copy, clipSafe(text)
	return func() tea.Msg {
		cp(text)
		return flashMsg{fmt.Sprintf("copied %s (through the terminal: OSC 52)", what)}
	}
}

// short cuts a copied text's name for the status bar.
func short(s string) string {
	s = oneLine(s)
	if r := []rune(s); len(r) > 40 {
		return string(r[:39]) + "…"
	}
	return s
}

func (p *hostsPage) copyText() (string, string, bool) {
	r, ok := p.cursorRow()
	if !ok {
		return "", "", false
	}
	return "IP " + r.v.Host.IP, r.v.Host.IP, true
}

func (p *hostPage) copyText() (string, string, bool) { return "IP " + p.host.IP, p.host.IP, true }

func (p *tasksPage) copyText() (string, string, bool) {
	tk, ok := p.cursorTask()
	return "task id " + tk.ID, tk.ID, ok
}

func (p *watchPage) copyText() (string, string, bool) {
	if p.list.cursor >= len(p.shown) {
		return "task id " + p.task.ID, p.task.ID, p.task.ID != ""
	}
	h := p.res.host(p.shown[p.list.cursor])
	return "IP " + h.IP, h.IP, true
}

func (p *resultPage) copyText() (string, string, bool) { return resultText(p.r) }

// resultText is a result's message, or its content when it has none.
func resultText(r model.Result) (string, string, bool) {
	if r.Message != "" {
		return "the message of " + r.Host.AgentID(), r.Message, true
	}
	return "the result of " + r.Host.AgentID(), r.Host.AgentID() + " " + r.ProcKey + " " + string(r.State), true
}

func (p *eventsPage) copyText() (string, string, bool) {
	if p.list.cursor >= len(p.tb.shown) {
		return "", "", false
	}
	ev := p.event(p.tb.shown[p.list.cursor])
	return "the event's message", eventText(ev), true
}

func (p *eventPage) copyText() (string, string, bool) {
	return "the event's message", eventText(p.ev), true
}

func eventText(ev model.Event) string {
	return strings.Join(strings.Fields(ev.Time.UTC().Format("2006-01-02T15:04:05Z")+" "+ev.Host.AgentID()+" "+ev.ProcKey+" "+string(ev.Kind)), " ") +
		": " + ev.Message
}

func (p *messagesPage) copyText() (string, string, bool) {
	e, ok := p.cursorEntry()
	if !ok {
		return "", "", false
	}
	return "“" + short(e.full()) + "”", e.full(), true
}
