package ui

import (
	"context"
	"errors"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"gseproc/backend"
	"gseproc/model"
)

// openPal opens the palette and waits for its namespaces and tasks.
func openPal(t *testing.T, d *driver) *palette {
	t.Helper()
	d.keys(":")
	p := d.m.palette
	if p == nil {
		t.Fatalf("`:` did not open the palette; screen:\n%s", d.view())
	}
	d.until("the palette's lists", func() bool { return !p.loading })
	return p
}

func names(p *palette) []string {
	var out []string
	for _, mt := range p.matches {
		out = append(out, mt.e.Name)
	}
	return out
}

func TestPaletteJumps(t *testing.T) {
	e, _ := simBackend(t, quietSim(40, "web", "db"))
	d := newDriver(t, e, Options{}, 100, 30)
	d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })

	// Fuzzy: a few letters in order find the screen; enter opens it.
	p := openPal(t, d)
	d.typeText("evnts")
	if got := names(p); len(got) == 0 || got[0] != "events" {
		t.Fatalf("evnts matches %v, want events first", got)
	}
	if !strings.Contains(d.view(), "events") || !strings.Contains(d.view(), ":evnts") {
		t.Fatalf("the palette is not drawn:\n%s", d.view())
	}
	d.keys("enter")
	if d.m.palette != nil {
		t.Fatal("the palette stayed open after enter")
	}
	topAs[*eventsPage](t, d)

	// A namespace: the stack becomes namespaces › web.
	openPal(t, d)
	d.typeText("ns web")
	if v := d.view(); !strings.Contains(v, " processes on ") || strings.Contains(v, "processs") {
		t.Fatalf("the namespace's help does not count its processes in English:\n%s", v)
	}
	d.keys("enter")
	lp := topAs[*labelsPage](t, d)
	if len(d.m.stack) != 2 || lp.ns.Name != "web" {
		t.Fatalf("stack %d pages, top %s", len(d.m.stack), lp.Title())
	}
	d.until("labels", func() bool { return lp.loaded })

	// A label of a namespace opens its hosts.
	p = openPal(t, d)
	d.typeText("label web app=nginx")
	if mt, ok := p.selected(); !ok || mt.e.Name != "label web app=nginx" {
		t.Fatalf("selected %+v of %v", mt, names(p))
	}
	d.keys("enter")
	hp := topAs[*hostsPage](t, d)
	if hp.q.Namespace != "web" || hp.q.Labels["app"] != "nginx" || len(d.m.stack) != 3 {
		t.Fatalf("hosts page %+v, %d pages", hp.q, len(d.m.stack))
	}
	d.until("hosts", func() bool { return hp.loaded })

	// An op by name opens the picker on the page's target, pointed at the
	// op: nothing runs before the operator confirms.
	openPal(t, d)
	d.typeText("op stop")
	d.keys("enter")
	op := topAs[*opPage](t, d)
	if got := op.ops[op.list.cursor]; got != model.OpStop {
		t.Fatalf("picker on %s, want stop", got)
	}
	if !op.tg.cursor || op.tg.hosts != 1 {
		t.Fatalf("target %+v, want the host under the cursor", op.tg)
	}
	if ts, _ := e.Tasks(context.Background(), 10); len(ts) != 0 {
		t.Fatalf("the palette ran a task: %+v", ts)
	}

	// A host by address, completed with tab.
	host := hp.rows[0].v.Host
	p = openPal(t, d)
	d.typeText("hos")
	d.keys("tab")
	if got := p.input.Value(); got != "host " {
		t.Fatalf("tab completed %q, want %q", got, "host ")
	}
	d.typeText(host.AgentID())
	d.keys("enter")
	hpg := topAs[*hostPage](t, d)
	if hpg.host != host {
		t.Fatalf("host page of %v, want %v", hpg.host, host)
	}
}

func TestPaletteRecentTask(t *testing.T) {
	e, _ := simBackend(t, quietSim(20))
	ctx := context.Background()
	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, e, Options{}, 100, 30)
	p := openPal(t, d)
	d.typeText("task " + task.ID[len(task.ID)-6:])
	if mt, ok := p.selected(); !ok || mt.e.Name != "task "+task.ID || !strings.Contains(mt.e.Help, "status") {
		t.Fatalf("selected %+v of %v", mt, names(p))
	}
	d.keys("enter")
	w := topAs[*watchPage](t, d)
	if w.task.ID != task.ID {
		t.Fatalf("watch of %s, want %s", w.task.ID, task.ID)
	}
}

// Registered commands: run with their argument; their messages reach the
// status bar and the log; changing ones are not offered read-only.
func TestPaletteRegisteredCommands(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	var got []string
	cmds := []Command{
		{Name: "sim latency", Arg: "MS", Help: "set the fleet's latency", Changes: true, Run: func(arg string) tea.Cmd {
			got = append(got, arg)
			return func() tea.Msg { return Notice("latency set to " + arg + " ms") }
		}},
		{Name: "sim broken", Help: "fails", Run: func(string) tea.Cmd {
			return func() tea.Msg { return Failure{What: "break the fleet", Err: errors.New("refused")} }
		}},
	}
	d := newDriver(t, e, Options{Commands: cmds}, 100, 30)
	p := openPal(t, d)
	d.typeText("sim lat")
	if mt, ok := p.selected(); !ok || mt.e.Name != "sim latency" {
		t.Fatalf("selected %+v of %v", mt, names(p))
	}
	d.keys("enter") // completes: the argument comes next
	if d.m.palette == nil || p.input.Value() != "sim latency " || len(got) != 0 {
		t.Fatalf("enter without the argument: input %q, ran %v", p.input.Value(), got)
	}
	d.typeText("250")
	if !strings.Contains(d.view(), "sim latency 250") {
		t.Fatalf("the argument is not shown:\n%s", d.view())
	}
	d.keys("enter")
	d.until("the command's notice", func() bool { return d.m.flash == "latency set to 250 ms" })
	if len(got) != 1 || got[0] != "250" {
		t.Fatalf("ran with %v", got)
	}
	openPal(t, d)
	d.typeText("sim broken")
	d.keys("enter")
	d.until("the failure banner", func() bool { return d.m.banner != nil })
	if !strings.Contains(d.view(), "break the fleet: refused") {
		t.Fatalf("failure not shown:\n%s", d.view())
	}

	ro := newDriver(t, e, Options{Commands: cmds, ReadOnly: true}, 100, 30)
	p = openPal(t, ro)
	for _, n := range names(p) {
		if n == "sim latency" || n == "op stop" || n == "new process" {
			t.Errorf("read-only palette offers %q", n)
		}
	}
	if !strings.Contains(strings.Join(names(p), ","), "op status") {
		t.Errorf("read-only palette lacks op status: %v", names(p))
	}
}

// The palette takes keys before the screen; a confirmation takes them
// before the palette; enter typed ahead of the lists does not guess.
func TestPaletteLayers(t *testing.T) {
	e, _ := simBackend(t, quietSim(20))
	d := newDriver(t, e, Options{}, 100, 30)
	d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })

	d.keys(":")
	p := d.m.palette
	if !p.loading {
		t.Fatal("the lists are applied only when the driver pumps messages")
	}
	d.typeText("web")
	d.keys("enter")
	if d.m.palette == nil || !strings.Contains(p.note, "still loading") || len(d.m.stack) != 1 {
		t.Fatalf("enter before the lists: palette %v, note %q, %d pages", d.m.palette != nil, p.note, len(d.m.stack))
	}
	// j and G type into the palette, not move the list below.
	ns := d.m.stack[0].(*nsPage)
	d.keys("j", "G")
	if ns.list.cursor != 0 || !strings.HasSuffix(p.input.Value(), "jG") {
		t.Fatalf("cursor %d, input %q", ns.list.cursor, p.input.Value())
	}
	d.keys("esc")
	if d.m.palette != nil || len(d.m.stack) != 1 {
		t.Fatal("esc did not close the palette (or went back)")
	}

	// A dialog open: `:` answers nothing and opens no palette.
	d.send(confirmMsg{newDialog("Sure?", nil, "", "", false, nil)})
	d.keys(":")
	if d.m.palette != nil || d.m.dialog == nil {
		t.Fatalf("palette %v, dialog %v", d.m.palette != nil, d.m.dialog != nil)
	}

	// An op with no target on the screen says so.
	d.m.dialog = nil
	openPal(t, d)
	d.typeText("op restart")
	d.keys("enter")
	if _, ok := d.m.top().(*opPage); ok || !strings.Contains(d.m.flash, "open a namespace") {
		t.Fatalf("op from the namespaces: top %T, flash %q", d.m.top(), d.m.flash)
	}
}
