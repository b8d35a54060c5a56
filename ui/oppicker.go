package ui

import (
	"fmt"
	"sort"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"gseproc/backend"
	"gseproc/model"
)

// opPage lists the op types with what each does, says why a disabled one
// is disabled, and shows the target before anything runs.
type opPage struct {
	s        *shared
	id       int
	tg       target
	ops      []model.OpType
	disabled map[model.OpType]string
	list     vlist
	loaded   bool
	err      error // the processes could not be listed
	// roll, when set, rolls the op batch by batch (b toggles it, with
	// consoleRollout's defaults; p cycles its pause).
	roll *model.RolloutSpec
	w, h int
}

// consoleRollout is what "roll in batches" starts from: a tenth of the
// hosts a batch after a canary of one, stopping at the second failure of
// a batch, no pause.
func consoleRollout() model.RolloutSpec {
	return model.RolloutSpec{Batch: "10%", Canary: "1", MaxFail: "1"}
}

// rollPauses are the pauses p cycles through.
var rollPauses = []string{"", "30s", model.PauseManual}

type opProcsMsg struct {
	id   int
	defs []model.ProcessDef
	err  error
}

func (m opProcsMsg) pageID() int { return m.id }

func newOpPage(s *shared, tg target) *opPage {
	p := &opPage{s: s, id: s.newID(), tg: tg, ops: model.AllOps(), disabled: map[model.OpType]string{}}
	p.list.setLen(len(p.ops))
	p.setDisabled(nil)
	// Start on restart, the op operators come for most (status when
	// read-only: never on an op that is disabled).
	p.point(model.OpRestart)
	return p
}

// point puts the cursor on op, or on status when op is disabled.
func (p *opPage) point(op model.OpType) {
	if _, off := p.disabled[op]; off && p.s.readOnly {
		op = model.OpStatus
	}
	for i, x := range p.ops {
		if x == op {
			p.list.cursor = i
		}
	}
}

func (p *opPage) ID() int         { return p.id }
func (p *opPage) Title() string   { return "operate" }
func (p *opPage) Capturing() bool { return false }
func (p *opPage) Close()          {}
func (p *opPage) Resume() tea.Cmd { return nil }

func (p *opPage) Init() tea.Cmd {
	ctx, be, id, sel := p.s.ctx, p.s.be, p.id, p.tg.sel
	return func() tea.Msg {
		defs, err := be.Processes(ctx, backend.ProcQuery{Namespace: sel.Namespace, Name: sel.Name, Labels: sel.Labels})
		return opProcsMsg{id: id, defs: defs, err: err}
	}
}

func (p *opPage) SetSize(w, h int) { p.w, p.h = w, h; p.list.setHeight(len(p.ops)) }

func (p *opPage) Help() keyHelp {
	k := p.s.keys
	run := k.Open
	run.SetHelp(k.Open.Help().Key, "run")
	return keyHelp{short: []binding{run, k.Rolling}, full: [][]binding{{k.Up, k.Down, run}, {k.Rolling, k.PauseRoll}}}
}

// setDisabled works out which ops cannot run and why.
func (p *opPage) setDisabled(defs []model.ProcessDef) {
	clear(p.disabled)
	for _, op := range p.ops {
		if p.s.readOnly && op.Mutating() {
			p.disabled[op] = "read-only mode"
		}
	}
	if !p.loaded || p.err != nil {
		// Nothing runs before the target is known: an op chosen now would
		// act on processes the operator has not seen.
		why := "checking the selected processes…"
		if p.err != nil {
			why = "could not list the selected processes (R retries)"
		}
		for _, op := range p.ops {
			if _, ok := p.disabled[op]; !ok {
				p.disabled[op] = why
			}
		}
		return
	}
	if len(defs) == 0 {
		for _, op := range p.ops {
			if _, ok := p.disabled[op]; !ok {
				p.disabled[op] = "no process matches the selection"
			}
		}
		return
	}
	for _, op := range []model.OpType{model.OpStart, model.OpReload} {
		if _, ok := p.disabled[op]; ok {
			continue
		}
		has := false
		for _, d := range defs {
			if _, ok := d.Process.Command(op); ok {
				has = true
				break
			}
		}
		if !has {
			p.disabled[op] = fmt.Sprintf("no %s_cmd in the selected processes", op)
		}
	}
}

func (p *opPage) Update(msg tea.Msg) tea.Cmd {
	k := p.s.keys
	switch msg := msg.(type) {
	case opProcsMsg:
		p.loaded = true
		if msg.err != nil {
			p.err = msg.err
			p.setDisabled(nil)
			return errCmd("list processes", msg.err)
		}
		p.err = nil
		names := map[string]bool{}
		nss := map[string]bool{}
		for _, d := range msg.defs {
			names[d.Process.Meta.Name] = true
			nss[d.Process.Meta.Namespace] = true
		}
		p.tg.procs = sortedKeys(names)
		if len(p.tg.sel.Hosts) == 0 {
			p.tg.hosts = uniqueHosts(msg.defs)
		}
		if len(nss) > 1 || (len(nss) == 1 && p.tg.sel.Namespace == "") {
			p.tg.nsAll = sortedKeys(nss)
		}
		p.setDisabled(msg.defs)
	case tea.KeyMsg:
		if p.list.navigate(k, msg) {
			return nil
		}
		switch {
		case keyIs(msg, k.Open):
			return p.choose(p.ops[p.list.cursor])
		case keyIs(msg, k.Reload):
			p.loaded, p.err = false, nil
			p.setDisabled(nil)
			return p.Init()
		case keyIs(msg, k.Rolling):
			if p.roll != nil {
				p.roll = nil
				return nil
			}
			r := consoleRollout()
			p.roll = &r
		case keyIs(msg, k.PauseRoll) && p.roll != nil:
			for i, x := range rollPauses {
				if x == p.roll.Pause {
					p.roll.Pause = rollPauses[(i+1)%len(rollPauses)]
					break
				}
			}
		}
	}
	return nil
}

// choose runs status straight away and asks before anything else.
func (p *opPage) choose(op model.OpType) tea.Cmd {
	if why, ok := p.disabled[op]; ok {
		return p.s.post(flashMsg{fmt.Sprintf("%s is disabled: %s", op, why)})
	}
	req := backend.OperateRequest{Op: op, Selector: p.tg.sel}
	if p.roll != nil && op.Mutating() {
		r := *p.roll
		req.Rollout = &r
	}
	run := p.s.operate(p.id, req)
	if !op.Mutating() {
		return run
	}
	d := confirmOp(p.s, op, p.tg, run)
	if req.Rollout != nil {
		d.body = append(d.body, "rolled in batches: "+rollText(*req.Rollout))
	}
	return p.s.post(confirmMsg{d})
}

func (p *opPage) View() string {
	t := p.s.theme
	var b strings.Builder
	head := t.Title.Render("Target: ") + p.tg.summary()
	switch {
	case !p.loaded:
		head += t.Muted.Render("  (loading processes…)")
	case p.err != nil:
		head += "\n" + t.Error.Render("✗ could not list the selected processes: "+oneLine(p.err.Error())) +
			t.Muted.Render(" · "+p.s.keys.Reload.Help().Key+" retries")
	}
	b.WriteString(ansi.Wrap(head, max(p.w, 20), " ,") + "\n\n")
	nameW := 12
	p.list.first = strings.Count(b.String(), "\n") // where a click finds the rows
	for i, op := range p.ops {
		cur := i == p.list.cursor
		mark := "  "
		if cur {
			mark = "› "
		}
		danger := " "
		if op.Destructive() {
			danger = "!"
		}
		name := cell(op.String(), nameW, false)
		desc := op.Describe()
		why, off := p.disabled[op]
		if off {
			desc = "disabled: " + why
		}
		desc = cell(desc, max(p.w-nameW-6, 10), false)
		line := mark + danger + " " + name + " " + desc
		switch {
		case cur:
			line = t.Cursor.Render(line)
		case off:
			line = t.Muted.Render(line)
		case op.Destructive():
			line = mark + t.Danger.Render(danger) + " " + t.Base.Render(name) + " " + t.Muted.Render(desc)
		default:
			line = mark + danger + " " + t.Base.Render(name) + " " + t.Muted.Render(desc)
		}
		b.WriteString(line + "\n")
	}
	b.WriteString("\n" + t.Muted.Render("! takes a running process away · status runs at once, every other op asks first"))
	k := p.s.keys
	if p.roll == nil {
		b.WriteString("\n" + t.Muted.Render(fmt.Sprintf("all hosts at once · %s rolls the op in batches", k.Rolling.Help().Key)))
	} else {
		b.WriteString("\n" + t.Title.Render("rolling: ") + rollText(*p.roll) +
			t.Muted.Render(fmt.Sprintf(" · %s all at once · %s changes the pause", k.Rolling.Help().Key, k.PauseRoll.Help().Key)))
	}
	return b.String()
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (p *opPage) listPtr() *vlist { return &p.list }

// rollText is a rollout in words (its own words when it is invalid: the
// engine names the bad field).
func rollText(r model.RolloutSpec) string {
	ro, err := model.ParseRollout(r)
	if err != nil {
		return fmt.Sprintf("batch %s, canary %s, pause %s, max-fail %s", r.Batch, r.Canary, r.Pause, r.MaxFail)
	}
	return ro.String()
}
