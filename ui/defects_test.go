package ui

import (
	"context"
	"strings"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/model"
)

// gatedBackend holds Processes and Hosts calls until the test opens the
// gate: a page that is still loading.
type gatedBackend struct {
	backend.Backend
	gate chan struct{}
}

func (g *gatedBackend) wait(ctx context.Context) error {
	select {
	case <-g.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gatedBackend) Processes(ctx context.Context, q backend.ProcQuery) ([]model.ProcessDef, error) {
	if err := g.wait(ctx); err != nil {
		return nil, err
	}
	return g.Backend.Processes(ctx, q)
}

func (g *gatedBackend) Hosts(ctx context.Context, q backend.HostQuery) ([]backend.HostView, error) {
	if err := g.wait(ctx); err != nil {
		return nil, err
	}
	return g.Backend.Hosts(ctx, q)
}

// Defect 6: keys typed while the op picker loads its processes do nothing:
// "o g j enter" opened "Confirm restart" on a list the operator had not seen.
func TestKeysWhileLoadingDoNothing(t *testing.T) {
	e, _ := simBackend(t, quietSim(20))
	g := &gatedBackend{Backend: e, gate: make(chan struct{})}
	d := newDriver(t, g, Options{Guard: time.Nanosecond}, 100, 30)
	d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })
	// The labels page is loading: enter, o and e do nothing.
	d.keys("enter")
	lp := topAs[*labelsPage](t, d)
	d.keys("o", "enter", "e")
	topAs[*labelsPage](t, d)
	if !strings.Contains(d.m.flash, "still loading") {
		t.Fatalf("flash %q", d.m.flash)
	}
	close(g.gate)
	d.until("labels", func() bool { return lp.loaded })
	// The op picker, still loading (a new gate), takes no op.
	g.gate = make(chan struct{})
	d.keys("o")
	op := topAs[*opPage](t, d)
	d.keys("g", "j", "enter")
	if d.m.dialog != nil {
		t.Fatalf("a dialog opened on a picker that had not loaded: %s", d.m.dialog.title)
	}
	if !strings.Contains(d.view(), "checking the selected processes") {
		t.Fatalf("ops not shown disabled while loading:\n%s", d.view())
	}
	close(g.gate)
	d.until("processes", func() bool { return op.loaded })
	d.keys("enter")
	d.until("dialog", func() bool { return d.m.dialog != nil })
	if d.m.dialog.title != "Confirm "+op.ops[op.list.cursor].String() {
		t.Fatalf("dialog %q with the cursor on %s", d.m.dialog.title, op.ops[op.list.cursor])
	}
}

// Defect 9: o with nothing selected names the host under the cursor in the
// picker and the confirmation.
func TestOpOnCursorHostNamesIt(t *testing.T) {
	e, _ := simBackend(t, quietSim(20))
	d := newDriver(t, e, Options{Guard: time.Nanosecond}, 120, 40)
	hp := openHosts(t, d, "app=nginx")
	d.keys("j")
	id := hp.rows[hp.shown[hp.list.cursor]].v.Host.AgentID()
	d.keys("o")
	op := topAs[*opPage](t, d)
	d.until("processes", func() bool { return op.loaded })
	if !strings.Contains(d.view(), "host "+id+" (under the cursor") {
		t.Fatalf("picker does not name %s:\n%s", id, d.view())
	}
	d.keys("enter")
	d.until("dialog", func() bool { return d.m.dialog != nil })
	if !strings.Contains(d.view(), id) {
		t.Fatalf("confirmation does not name %s:\n%s", id, d.view())
	}
}

// Defect 10: a restart or reload over the threshold asks for the typed
// host count like stop and kill do; status asks nothing.
func TestTypedConfirmationForEveryChange(t *testing.T) {
	e, _ := simBackend(t, quietSim(30))
	cfg := config.Default().Console
	cfg.ConfirmThreshold = 2
	d := newDriver(t, e, Options{Guard: time.Nanosecond, Config: cfg}, 120, 40)
	openHosts(t, d, "app=nginx")
	d.keys("a", "o")
	op := topAs[*opPage](t, d)
	d.until("processes", func() bool { return op.loaded })
	for _, o := range []model.OpType{model.OpRestart, model.OpReload, model.OpStart, model.OpRegister} {
		for op.ops[op.list.cursor] != o {
			d.keys("j")
			if op.list.cursor == len(op.ops)-1 && op.ops[op.list.cursor] != o {
				d.keys("g")
			}
		}
		d.keys("enter")
		d.until("dialog", func() bool { return d.m.dialog != nil })
		if d.m.dialog.require == "" {
			t.Fatalf("%s over %d hosts (threshold 2) asks only y/N", o, op.tg.hosts)
		}
		d.keys("esc")
	}
}
