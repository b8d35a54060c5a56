package ui

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"gseproc/theme"
)

// Every list page sorts by any column (s picks the next column, S reverses)
// and filters with `/`: the hosts page with its own structured filter
// (filter.go), the other lists with the same syntax over their columns:
// column:value matches part of a cell, column=value all of it (column is
// the header's title, lower case), a bare word matches part of any cell.

// sortState is the column a list is sorted by (col < 0: the list's own order).
type sortState struct {
	col  int
	desc bool
}

func unsorted() sortState { return sortState{col: -1} }

// next moves to the next column, and after the last back to the list's own
// order (n columns).
func (s *sortState) next(n int) {
	s.col++
	if s.col >= n {
		s.col = -1
	}
	s.desc = false
}

// reverse flips the direction (sorting by the first column when unsorted).
func (s *sortState) reverse() {
	if s.col < 0 {
		s.col = 0
	}
	s.desc = !s.desc
}

// apply orders a comparison by the direction.
func (s sortState) apply(c int) int {
	if s.desc {
		return -c
	}
	return c
}

// describe says how the list is sorted ("" in its own order).
func (s sortState) describe(cols []column) string {
	if s.col < 0 || s.col >= len(cols) {
		return ""
	}
	dir := "▲"
	if s.desc {
		dir = "▼"
	}
	return "sorted by " + strings.ToLower(strings.TrimRight(cols[s.col].title, "▲▼")) + " " + dir
}

// mark puts the sort arrow on the sorted column's title (widening it to
// fit): lay the table out with the marked columns.
func (s sortState) mark(cols []column) []column {
	if s.col < 0 || s.col >= len(cols) {
		return cols
	}
	out := append([]column(nil), cols...)
	c := &out[s.col]
	if s.desc {
		c.title += "▼"
	} else {
		c.title += "▲"
	}
	c.width = max(c.width, ansi.StringWidth(c.title))
	c.min = max(c.min, ansi.StringWidth(c.title))
	return out
}

// compareCells compares two cells' text: as numbers when both are (a
// "done/total" cell by its first number, a "12.5%" cell by its number),
// else as text.
func compareCells(a, b string) int {
	na, okA := cellNumber(a)
	nb, okB := cellNumber(b)
	if okA && okB {
		return cmp.Compare(na, nb)
	}
	return strings.Compare(strings.ToLower(a), strings.ToLower(b))
}

// cellNumber reads a cell as a number: "12", "3/40" (its first number),
// "12.5%".
func cellNumber(s string) (float64, bool) {
	s = strings.TrimSpace(strings.SplitN(s, "/", 2)[0])
	s = strings.TrimSuffix(s, "%")
	if s == "" || strings.Trim(s, "0123456789.-") != "" {
		return 0, false // not "inf", "nan", "1e5": words sort as text
	}
	n, err := strconv.ParseFloat(s, 64)
	return n, err == nil
}

// listFilter is a list's `/` input.
type listFilter struct {
	input  textinput.Model
	typing bool
}

func newListFilter(hint string) listFilter {
	f := textinput.New()
	f.Prompt = "/"
	f.Placeholder = hint
	f.CharLimit = 200
	return listFilter{input: f}
}

func (f *listFilter) value() string { return f.input.Value() }

// filterTyper is a page whose / input has the keys: the footer shows the
// input's keys then, not the page's (which type into it).
type filterTyper interface{ filterTyping() bool }

func (p *tableList) filterTyping() bool { return p.tb.filter.typing }
func (p *hostsPage) filterTyping() bool { return p.filter.typing }
func (p *watchPage) filterTyping() bool { return p.filter.typing }
func (p *logsPage) filterTyping() bool  { return p.search.typing }

// filterTypingKeys are the keys of a / input being typed (listFilter.key).
func filterTypingKeys() []binding {
	return []binding{
		key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "keep it")),
		key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear it")),
		key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit")),
	}
}

// start focuses the input.
func (f *listFilter) start() tea.Cmd {
	f.typing = true
	return f.input.Focus()
}

// key handles a key while typing: enter keeps the filter, esc clears it,
// anything else edits it. changed reports the text changed.
func (f *listFilter) key(msg tea.KeyMsg) (changed bool, cmd tea.Cmd) {
	before := f.input.Value()
	switch msg.Type {
	case tea.KeyEnter:
		f.typing = false
		f.input.Blur()
	case tea.KeyEsc:
		f.typing = false
		f.input.Blur()
		f.input.SetValue("")
	default:
		f.input, cmd = f.input.Update(msg)
	}
	return f.input.Value() != before, cmd
}

// clear empties the filter.
func (f *listFilter) clear() { f.input.SetValue("") }

// cellMatcher tests rows given as their cells' text against a filter over
// columns (see the top of this file).
type cellMatcher struct {
	terms []filterTerm
	index []int // terms[i]'s column, -1 for any column, -2 for none such
}

func newCellMatcher(text string, cols []column) cellMatcher {
	m := cellMatcher{}
	for _, tok := range strings.Fields(text) {
		t := filterTerm{value: tok}
		col := -1
		if i := strings.IndexAny(tok, ":="); i > 0 {
			col = -2
			for c, cl := range cols {
				if strings.EqualFold(cl.title, tok[:i]) {
					col, t = c, filterTerm{field: strings.ToLower(tok[:i]), value: tok[i+1:], exact: tok[i] == '='}
				}
			}
			if col == -2 {
				col = -1 // not a column: the whole word is text to find ("10:00", "web:nginx")
			}
		}
		m.terms = append(m.terms, t)
		m.index = append(m.index, col)
	}
	return m
}

func (m cellMatcher) match(cells []string) bool {
	for i, t := range m.terms {
		c := m.index[i]
		if c >= 0 {
			if c >= len(cells) || !t.match(cells[c]) {
				return false
			}
			continue
		}
		found := false
		for _, s := range cells {
			if t.match(s) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// tableList is the frame of a small list page whose rows a table filters
// and sorts (namespaces, labels, tasks, events, messages): the page's id,
// size, cursor and table, and the page methods they make alike. The / input
// has the keys while typed; esc clears a filter before it goes back.
type tableList struct {
	s    *shared
	id   int
	tb   table
	list vlist
	w, h int
}

func newTableList(s *shared, hint string) tableList {
	return tableList{s: s, id: s.newID(), tb: newTable(hint)}
}

func (p *tableList) ID() int            { return p.id }
func (p *tableList) Close()             {}
func (p *tableList) Capturing() bool    { return p.tb.filter.typing }
func (p *tableList) consumesBack() bool { return p.tb.filter.value() != "" }
func (p *tableList) listPtr() *vlist    { return &p.list }

func (p *tableList) SetSize(w, h int) {
	p.w, p.h = w, h
	p.list.setHeight(h - 2)
	p.tb.filter.input.Width = max(w-4, 10)
}

// table is the filter and sort of a small list page (namespaces, tasks,
// events: hundreds of rows): shown is the rows drawn, in order, as indexes
// into the page's own rows.
type table struct {
	filter listFilter
	sort   sortState
	shown  []int
}

func newTable(hint string) table { return table{filter: newListFilter(hint), sort: unsorted()} }

// rebuild recomputes shown over n rows whose cells are given by cells.
func (tb *table) rebuild(cols []column, n int, cells func(i int) []string) {
	m := newCellMatcher(tb.filter.value(), cols)
	all := make([][]string, n)
	tb.shown = tb.shown[:0]
	for i := range n {
		all[i] = cells(i)
		if m.match(all[i]) {
			tb.shown = append(tb.shown, i)
		}
	}
	switch c := tb.sort.col; {
	case c < 0 || c >= len(cols):
	case cols[c].newest: // ascending: oldest first, the rows' order reversed
		slices.SortStableFunc(tb.shown, func(a, b int) int { return tb.sort.apply(cmp.Compare(b, a)) })
	default:
		slices.SortStableFunc(tb.shown, func(a, b int) int { return tb.sort.apply(compareCells(all[a][c], all[b][c])) })
	}
}

// refresh rebuilds shown and sets list to it, putting the cursor back on
// the row whose id is cur (when it is still shown). Take cur before the
// rows change: shown indexes the old rows until then.
func (tb *table) refresh(list *vlist, cols []column, n int, cells func(i int) []string, id func(i int) string, cur string) {
	tb.rebuild(cols, n, cells)
	list.setLen(len(tb.shown))
	if cur == "" {
		return
	}
	for pos, i := range tb.shown {
		if id(i) == cur {
			list.cursor = pos
			list.clamp()
			return
		}
	}
}

// key handles the filter and sort keys; handled reports msg was one.
func (tb *table) key(k *KeyMap, msg tea.KeyMsg, ncols int) (handled bool, cmd tea.Cmd) {
	switch {
	case tb.filter.typing:
		_, cmd = tb.filter.key(msg)
		return true, cmd
	case keyIs(msg, k.Filter):
		return true, tb.filter.start()
	case keyIs(msg, k.Sort):
		tb.sort.next(ncols)
		return true, nil
	case keyIs(msg, k.SortReverse):
		tb.sort.reverse()
		return true, nil
	}
	return false, nil
}

// info is the filter and sort part of a list's first line.
func (tb *table) info(t *theme.Theme, cols []column, total int) string {
	var parts []string
	if len(tb.shown) != total {
		parts = append(parts, strconv.Itoa(len(tb.shown))+" shown")
	}
	if f := tb.filter.value(); f != "" {
		parts = append(parts, "filter "+t.Title.Render(f))
	}
	if s := tb.sort.describe(cols); s != "" {
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return ""
	}
	return " · " + strings.Join(parts, " · ")
}
