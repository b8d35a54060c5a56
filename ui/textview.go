package ui

import (
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
)

// textView is the shared body of the read-only detail pages (one host, one
// result): a wrapped, scrollable text that is rebuilt on resize.
type textView struct {
	s       *shared
	id      int
	vp      viewport.Model
	w, h    int
	content func() string
}

func newTextView(s *shared, content func() string) textView {
	return textView{s: s, id: s.newID(), vp: viewport.New(80, 20), content: content}
}

func (p *textView) ID() int         { return p.id }
func (p *textView) Capturing() bool { return false }
func (p *textView) Close()          {}
func (p *textView) Init() tea.Cmd   { return nil }
func (p *textView) Resume() tea.Cmd { return nil }
func (p *textView) View() string    { return p.vp.View() }

func (p *textView) SetSize(w, h int) {
	p.w, p.h = w, h
	p.vp.Width, p.vp.Height = w, h
	p.vp.SetContent(ansi.Wrap(p.content(), max(w-1, 20), " ,"))
}

func (p *textView) Help() keyHelp {
	k := p.s.keys
	return keyHelp{short: []binding{k.Up, k.Down}, full: [][]binding{k.nav()}}
}

func (p *textView) Update(msg tea.Msg) tea.Cmd {
	km, ok := msg.(tea.KeyMsg)
	if !ok {
		return nil
	}
	k := p.s.keys
	switch {
	case keyIs(km, k.Up):
		p.vp.ScrollUp(1)
	case keyIs(km, k.Down):
		p.vp.ScrollDown(1)
	case keyIs(km, k.PageUp):
		p.vp.PageUp()
	case keyIs(km, k.PageDown):
		p.vp.PageDown()
	case keyIs(km, k.Top):
		p.vp.GotoTop()
	case keyIs(km, k.Bottom):
		p.vp.GotoBottom()
	}
	return nil
}
