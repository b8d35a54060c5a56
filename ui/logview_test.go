package ui

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"gseproc/backend/config"
	"gseproc/model"
)

// TestLogsPageFromHosts: F on selected hosts opens their live log (the
// simulated processes' stdout, through the engine's Logs), interleaved
// with the host as prefix or side by side; / searches with the matches
// highlighted and n/N move between them; f pauses and resumes following.
func TestLogsPageFromHosts(t *testing.T) {
	e, _ := simBackend(t, quietSim(30))
	d := newDriver(t, e, Options{}, 140, 40)
	hp := openHosts(t, d, "app=nginx")
	// Two hosts whose nginx runs: their stdout grows.
	d.keys("/")
	d.typeText("state=running")
	d.keys("enter")
	d.until("running hosts", func() bool { return len(hp.shown) >= 2 && len(hp.shown) < len(hp.rows) })
	first := hp.rows[hp.shown[0]].v.Host
	var lp *logsPage
	d.keys("g", "space", "space", "F")
	d.until("the logs page", func() bool {
		p, ok := d.m.top().(*logsPage)
		lp = p
		return ok
	})
	if len(lp.hosts) != 2 || lp.hosts[0] != first || !strings.HasPrefix(lp.proc, "web:") {
		t.Fatalf("logs page of %s on %v", lp.proc, lp.hosts)
	}
	d.until("lines from both hosts", func() bool { return len(lp.lines[0]) > 3 && len(lp.lines[1]) > 3 })
	if !lp.side || !strings.Contains(d.view(), " │ ") || !strings.Contains(d.view(), lp.hosts[1].AgentID()) {
		t.Fatalf("two hosts side by side:\n%s", d.view())
	}
	d.keys("v")
	// Each line says its host (the last lines may all come from one).
	last := lp.all[len(lp.all)-1]
	prefix := lp.hosts[last.h].AgentID() + " │ "
	if lp.side || !strings.Contains(d.view(), prefix+lp.lines[last.h][last.i][:20]) {
		t.Fatalf("interleaved with the host as prefix (%q):\n%s", prefix, d.view())
	}
	// Search a word every simulated line has: each shown line matches.
	d.keys("/")
	if !lp.Capturing() {
		t.Fatal("/ did not open the search")
	}
	d.typeText("nginx[")
	d.keys("enter")
	if lp.query != "nginx[" || len(lp.matches) < 8 || lp.cur != len(lp.matches)-1 {
		t.Fatalf("search: %q %d matches, current %d", lp.query, len(lp.matches), lp.cur)
	}
	if !strings.Contains(d.view(), "/nginx[ ") {
		t.Fatalf("the header does not say the search:\n%s", d.view())
	}
	d.keys("N", "N")
	if lp.cur != len(lp.matches)-3 {
		t.Fatalf("N N: current %d of %d", lp.cur, len(lp.matches))
	}
	d.keys("n")
	if lp.cur != len(lp.matches)-2 {
		t.Fatalf("n: current %d of %d", lp.cur, len(lp.matches))
	}
	d.keys("f")
	if lp.follow || !strings.Contains(d.view(), "paused") {
		t.Fatalf("f: still following")
	}
	d.keys("G")
	if !lp.follow || lp.off != 0 {
		t.Fatalf("G: not following at the end (off %d)", lp.off)
	}
	d.keys("esc")
	if _, ok := d.m.top().(*logsPage); ok {
		t.Fatal("esc did not close the logs page")
	}
	if lp.ctx.Err() == nil {
		t.Fatal("esc left the log streams open")
	}

	// On a host's page (→ opens it: l is the logs), l follows its process.
	d.send(tea.KeyMsg{Type: tea.KeyRight})
	hpg := topAs[*hostPage](t, d)
	d.until("the host", func() bool { return hpg.found })
	d.keys("F")
	if d.m.palette != nil && len(hpg.v.Procs) > 1 {
		d.keys("enter") // the host whole runs several processes: F asks which
	}
	one := topAs[*logsPage](t, d)
	if len(one.hosts) != 1 || one.hosts[0] != hpg.host || !strings.Contains(one.Title(), "@"+hpg.host.AgentID()) {
		t.Fatalf("logs of the host page: %s on %v", one.Title(), one.hosts)
	}
	d.until("its lines", func() bool { return len(one.lines[0]) > 3 && one.status[0] == "following" })
	d.keys("esc")
	topAs[*hostPage](t, d)
	if one.ctx.Err() == nil {
		t.Fatal("esc left the log stream open")
	}
}

// TestLogsPageFromTaskResult: F on a task's result follows the log of that
// result's process on that result's host.
func TestLogsPageFromTaskResult(t *testing.T) {
	e, _ := simBackend(t, quietSim(6))
	cfg := config.Default().Console
	cfg.ConfirmThreshold = 1000
	d := newDriver(t, e, Options{Guard: time.Nanosecond, Config: cfg, Namespace: "web"}, 120, 40)
	lbl := topAs[*labelsPage](t, d)
	d.until("labels", func() bool { return lbl.loaded })
	d.keys("o")
	op := topAs[*opPage](t, d)
	d.until("processes", func() bool { return op.loaded })
	d.keys("enter", "y")
	d.until("watch", func() bool { w, ok := d.m.top().(*watchPage); return ok && w.loaded && len(w.shown) > 0 })
	w := topAs[*watchPage](t, d)
	d.until("task done", func() bool { return taskFinal(w.task.Status) })
	r := w.res.result(w.shown[w.list.cursor])
	d.keys("F")
	lp := topAs[*logsPage](t, d)
	if lp.proc != r.ProcKey || len(lp.hosts) != 1 || lp.hosts[0] != r.Host {
		t.Fatalf("logs of %s on %v, the result is %s on %s", lp.proc, lp.hosts, r.ProcKey, r.Host.AgentID())
	}
	d.until("the stream answers", func() bool { return lp.status[0] != "opening" })
	if strings.HasPrefix(lp.status[0], "error") {
		t.Fatalf("the stream: %s", lp.status[0])
	}
	d.keys("esc")
	topAs[*watchPage](t, d)
	if lp.ctx.Err() == nil {
		t.Fatal("esc left the log stream open")
	}
}

// TestLogsPageScrubsAndHighlights: escape sequences and control characters
// from a log never reach the frame; a match is highlighted.
func TestLogsPageScrubsAndHighlights(t *testing.T) {
	e, _ := simBackend(t, quietSim(4))
	d := newDriver(t, e, Options{}, 100, 30)
	h := model.Host{IP: "10.0.0.1"}
	p := newLogsPage(d.m.s, "web:nginx", []model.Host{h})
	p.SetSize(100, 28)
	p.lines, p.status = make([][]string, 1), []string{"following"}
	p.add(0, model.TailChunk{Data: "boot \x1b]52;c;aGk=\x07ok\n\x1b[2Jcleared\tTAB\nplain\n", Running: true})
	view := p.View()
	for _, bad := range []string{"\x1b]52", "\x1b[2J", "\x07", "\t"} {
		if strings.Contains(view, bad) {
			t.Fatalf("the view holds %q:\n%q", bad, view)
		}
	}
	if !strings.Contains(view, "boot ok") || !strings.Contains(view, "cleared    TAB") {
		t.Fatalf("the lines are not kept as text:\n%s", view)
	}
	p.setQuery("TAB")
	if len(p.matches) != 1 || p.cur != 0 {
		t.Fatalf("matches %v", p.matches)
	}
	p.s.pending = nil
	p.setQuery("no such words")
	if len(p.matches) != 0 || len(p.s.pending) != 1 || p.s.pending[0] != (flashMsg{"no line has no such words"}) {
		t.Fatalf("a search without match: %d matches, posted %v", len(p.matches), p.s.pending)
	}
	p.setQuery("TAB")
	// A stream that ends stops the follow: no further read.
	p.status[0] = "following"
	if cmd := p.Update(logChunksMsg{id: p.id, gen: p.gen, h: 0, closed: true}); cmd != nil || p.status[0] != "ended" {
		t.Fatalf("after the stream ended: %q, another read %v", p.status[0], cmd != nil)
	}
	if cmd := p.Update(logChunksMsg{id: p.id, gen: p.gen, h: 0, chunks: []model.TailChunk{{Data: "more\n", Running: true}}}); cmd == nil {
		t.Fatal("an open stream is not read on")
	}
	p.add(0, model.TailChunk{Data: "last\n", Running: false, Next: 10, Size: 10})
	if p.status[0] != "exited" {
		t.Fatalf("status after the process exited: %q", p.status[0])
	}
	p.add(0, model.TailChunk{Error: "agent unreachable"})
	if !strings.HasPrefix(p.status[0], "error: agent unreachable") {
		t.Fatalf("status after an error: %q", p.status[0])
	}
}

// A search whose lower case is shorter than itself (the Kelvin sign is
// three bytes, its lower case "k" one) highlights the match and does
// not cut the line past its end.
func TestMarkMatchesFoldShorter(t *testing.T) {
	st := lipgloss.NewStyle()
	if got := markMatches("ok", "\u212a", st); got != "ok" {
		t.Fatalf("markMatches(ok, K) = %q, want %q", got, "ok")
	}
	if got := markMatches("kkk", "\u212a\u212a", st); got != "kkk" {
		t.Fatalf("markMatches(kkk, KK) = %q", got)
	}
}

// TestLogsTrimKeepsCurrentMatch: when a host's oldest lines are dropped
// (logKeep), the current match stays on the line it was on, not on the
// match that moved into its place, and a current match dropped leaves none.
func TestLogsTrimKeepsCurrentMatch(t *testing.T) {
	s := benchShared(t, 100, 30)
	hs := []model.Host{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}}
	p := newLogsPage(s, "web:nginx", hs)
	p.SetSize(100, 28)
	p.lines, p.status = make([][]string, 2), []string{"following", "following"}
	p.query = "hit"
	for i := range 2*logKeep - 10 {
		p.push(0, fmt.Sprintf("host 0 line %d hit", i))
		if i%1000 == 0 {
			p.push(1, fmt.Sprintf("host 1 line %d hit", i))
		}
	}
	// The current match: one of host 0 past the lines to be dropped.
	p.cur = len(p.matches) - 3
	want := p.lines[p.matches[p.cur].h][p.matches[p.cur].i]
	for i := range 20 { // host 0 passes 2*logKeep: its first lines go
		p.push(0, fmt.Sprintf("host 0 more %d hit", i))
	}
	if len(p.lines[0]) > 2*logKeep {
		t.Fatalf("host 0 keeps %d lines", len(p.lines[0]))
	}
	if p.cur < 0 || p.cur >= len(p.matches) {
		t.Fatalf("current match %d of %d", p.cur, len(p.matches))
	}
	if m := p.matches[p.cur]; p.lines[m.h][m.i] != want {
		t.Fatalf("current match is %q, was %q", p.lines[m.h][m.i], want)
	}
	// A current match among the dropped lines: none is current.
	p.cur = slices.IndexFunc(p.matches, func(l logLine) bool { return l.h == 0 })
	for i := range logKeep + 1 {
		p.push(0, fmt.Sprintf("host 0 again %d hit", i))
	}
	if p.cur != -1 {
		m := p.matches[p.cur]
		t.Fatalf("current match %d (%q) after its line was dropped", p.cur, p.lines[m.h][m.i])
	}
}

// TestOpenLogsBounded: F on more hosts than a page follows (a selection of
// the whole fleet) opens no stream and says why; up to the bound it opens
// the page.
func TestOpenLogsBounded(t *testing.T) {
	s := benchShared(t, 100, 30)
	on := make([]procOn, logMaxHosts+1)
	for i := range on {
		on[i] = procOn{"web:nginx", model.Host{IP: fmt.Sprintf("10.0.0.%d", i+1)}}
	}
	s.pending = nil
	s.openLogs(on)
	want := flashMsg{fmt.Sprintf("the logs of web:nginx on %d hosts: at most %d at once, select fewer", logMaxHosts+1, logMaxHosts)}
	if len(s.pending) != 1 || s.pending[0] != want {
		t.Fatalf("l on %d hosts posted %v", len(on), s.pending)
	}
	s.pending = nil
	s.openLogs(on[:logMaxHosts])
	if len(s.pending) != 1 {
		t.Fatalf("l on %d hosts posted %v", logMaxHosts, s.pending)
	}
	if pm, ok := s.pending[0].(pushMsg); !ok || len(pm.p.(*logsPage).hosts) != logMaxHosts {
		t.Fatalf("l on %d hosts posted %v", logMaxHosts, s.pending)
	}
}

// TestLogsScrollFillsTheScreen: g (the top), a search's match near the
// top, and paging up show a screen of lines, the first at the top, not
// the first line alone over an empty screen; j then moves at once.
func TestLogsScrollFillsTheScreen(t *testing.T) {
	s := benchShared(t, 100, 30)
	for _, hosts := range [][]model.Host{{{IP: "10.0.0.1"}}, {{IP: "10.0.0.1"}, {IP: "10.0.0.2"}}} {
		p := newLogsPage(s, "web:nginx", hosts)
		p.SetSize(100, 22) // 20 rows of body
		p.lines, p.status = make([][]string, len(hosts)), make([]string, len(hosts))
		for i := range 100 {
			for h := range hosts {
				p.push(h, fmt.Sprintf("line %03d of %d", i, h))
			}
		}
		rows := func() (first string, n int) {
			for _, l := range strings.Split(p.View(), "\n")[1:] {
				if strings.Contains(l, "line ") {
					if n == 0 {
						first = l
					}
					n++
				}
			}
			return first, n
		}
		full := p.bodyHeight()
		if p.side {
			full-- // the hosts' header
		}
		p.Update(keyMsg("g"))
		if first, n := rows(); n != full || !strings.Contains(first, "line 000") {
			t.Fatalf("%d hosts, g: %d lines from %q, want %d from line 000:\n%s", len(hosts), n, first, full, p.View())
		}
		p.Update(keyMsg("j"))
		if first, _ := rows(); !strings.Contains(first, "line 001") {
			t.Fatalf("%d hosts, g j: first line %q, want line 001", len(hosts), first)
		}
		p.setQuery("line 002 of 0")
		if first, n := rows(); n != full || !strings.Contains(first, "line 000") {
			t.Fatalf("%d hosts, a match at the top: %d lines from %q, want %d:\n%s", len(hosts), n, first, full, p.View())
		}
		// Paused at the top while the log grows past logKeep: its first
		// lines go, the screen shows the first kept ones, full.
		p.setQuery("")
		p.Update(keyMsg("g"))
		for i := range 2 * logKeep {
			for h := range hosts {
				p.push(h, fmt.Sprintf("line %05d more of %d", i, h))
			}
		}
		if _, n := rows(); n != full || p.follow {
			t.Fatalf("%d hosts, paused at the top after a trim: %d lines, want %d (follow %v):\n%s", len(hosts), n, full, p.follow, p.View())
		}
	}
}
