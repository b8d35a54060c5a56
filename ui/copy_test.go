package ui

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/muesli/termenv"

	"gseproc/backend"
	"gseproc/model"
)

// syncBuf is a terminal the copy command writes to from its goroutine.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func osc52(text string) string {
	return "\x1b]52;c;" + base64.StdEncoding.EncodeToString([]byte(text)) + "\a"
}

// c copies the IP under the cursor, a task's id, a result's message with
// an OSC 52 sequence written to the terminal.
func TestCopyOSC52(t *testing.T) {
	e, _ := simBackend(t, quietSim(30))
	task, err := e.Operate(context.Background(), backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	term := &syncBuf{}
	d := newDriver(t, e, Options{Copy: termenv.NewOutput(term).Copy}, 100, 30)
	hp := openHosts(t, d, "app=nginx")
	d.keys("j", "c")
	ip := hp.rows[hp.shown[1]].v.Host.IP
	d.until("the copy", func() bool { return strings.Contains(d.m.flash, "copied IP "+ip) })
	if !strings.Contains(term.String(), osc52(ip)) {
		t.Fatalf("terminal got %q", term.String())
	}
	d.keys("t")
	tp := topAs[*tasksPage](t, d)
	d.until("tasks", func() bool { return tp.loaded })
	d.keys("c")
	d.until("the task id", func() bool { return strings.Contains(d.m.flash, "copied task id") })
	if !strings.Contains(term.String(), osc52(task.ID)) {
		t.Fatalf("terminal got %q", term.String())
	}

	// Without a terminal to copy through, c says so.
	d2 := newDriver(t, e, Options{}, 100, 30)
	openHosts(t, d2, "app=nginx")
	d2.keys("c")
	if !strings.Contains(d2.m.flash, "cannot copy") {
		t.Fatalf("flash %q", d2.m.flash)
	}
}

// With the mouse on: a click on a row moves the cursor there, a click in
// the hosts' selection column selects, the wheel scrolls.
func TestMouseClickAndWheel(t *testing.T) {
	e, _ := simBackend(t, quietSim(60))
	d := newDriver(t, e, Options{}, 100, 30)
	hp := openHosts(t, d, "app=nginx")
	d.view() // lays the rows out
	click := func(x, y int) {
		d.send(tea.MouseMsg{X: x, Y: y, Button: tea.MouseButtonLeft, Action: tea.MouseActionPress})
	}
	first := 1 + hp.list.first // the breadcrumb is line 0
	click(20, first+3)
	if hp.list.cursor != 3 || len(hp.sel) != 0 {
		t.Fatalf("cursor %d, %d selected after a click on the 4th row", hp.list.cursor, len(hp.sel))
	}
	click(0, first+1)
	if hp.list.cursor != 1 || !hp.sel[hp.rows[hp.shown[1]].v.Host] {
		t.Fatalf("cursor %d, selection %v after a click in the selection column", hp.list.cursor, hp.sel)
	}
	click(20, 0) // the breadcrumb: no row
	if hp.list.cursor != 1 {
		t.Fatalf("a click above the rows moved the cursor to %d", hp.list.cursor)
	}
	d.send(tea.MouseMsg{X: 20, Y: first, Button: tea.MouseButtonWheelDown, Action: tea.MouseActionPress})
	if hp.list.cursor != 2 {
		t.Fatalf("wheel down: cursor %d", hp.list.cursor)
	}
	// The namespaces list (through its vlist).
	d.keys("esc", "esc")
	ns := topAs[*nsPage](t, d)
	d.view()
	click(10, 1+ns.list.first)
	if ns.list.cursor != 0 {
		t.Fatalf("namespaces cursor %d", ns.list.cursor)
	}
}
