package ui

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/huh"
	"github.com/charmbracelet/x/ansi"

	"gseproc/model"
)

// formVals are the editable fields of a definition as text.
type formVals struct {
	Namespace, Name, Labels, Hosts                    string
	ProcName, SetupPath, PidPath, User                string
	ConfigPath, LogPath                               string
	StartCmd, StopCmd, RestartCmd, ReloadCmd, KillCmd string
	AutoType                                          model.AutoType
	CycleTime, InstanceNum, CheckBegin, CheckEnd      string
	OpTimeout, CPU, Mem                               string
}

func valsFrom(d model.ProcessDef) formVals {
	p := d.Process
	id, c, pol := p.Spec.Identity, p.Spec.Control, p.Spec.Policy
	num := func(n int) string {
		if n == 0 {
			return ""
		}
		return strconv.Itoa(n)
	}
	// A field with a default other than 0 shows its value, 0 included
	// (empty would mean the default when saved).
	given := func(n int) string { return strconv.Itoa(n) }
	fl := func(f float64) string {
		if f == 0 {
			return ""
		}
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	hosts := make([]string, len(d.Hosts))
	for i, h := range d.Hosts {
		hosts[i] = h.AgentID()
	}
	at := pol.AutoType
	if p.Meta.Name == "" && at == model.AutoPeriodic && pol.CycleTime == 0 {
		at = model.AutoResident // a new definition starts resident
	}
	return formVals{
		Namespace: p.Meta.Namespace, Name: p.Meta.Name, Labels: strings.Join(model.SortedLabels(p.Meta.Labels), ","),
		Hosts: strings.Join(hosts, ","), ProcName: id.ProcName, SetupPath: id.SetupPath, PidPath: id.PidPath,
		User: id.User, ConfigPath: id.ConfigPath, LogPath: id.LogPath,
		StartCmd: c.StartCmd, StopCmd: c.StopCmd, RestartCmd: c.RestartCmd, ReloadCmd: c.ReloadCmd, KillCmd: c.KillCmd,
		AutoType: at, CycleTime: num(pol.CycleTime), InstanceNum: given(pol.InstanceNum),
		CheckBegin: given(pol.StartCheckSecs), CheckEnd: num(pol.StartCheckEndSecs), OpTimeout: given(pol.OpTimeout),
		CPU: fl(p.Spec.Resource.CPU), Mem: fl(p.Spec.Resource.Mem),
	}
}

// toDef builds the definition on top of base (so fields the form does not
// show are kept). Text that does not parse is reported under the field's
// API name, like every other validation error.
func (v formVals) toDef(base model.ProcessDef) (model.ProcessDef, model.ValidationError) {
	var errs model.Validator
	d := base
	d.Process = base.Process.Clone()
	p := &d.Process
	p.Meta.Namespace, p.Meta.Name = strings.TrimSpace(v.Namespace), strings.TrimSpace(v.Name)
	p.Meta.Labels = nil
	for _, l := range splitList(v.Labels) {
		k, val, err := model.ParseLabel(l)
		if err != nil {
			errs.Add("process.meta.labels", fmt.Sprintf("want key=value, got %q", l))
			continue
		}
		if p.Meta.Labels == nil {
			p.Meta.Labels = map[string]string{}
		}
		p.Meta.Labels[k] = val
	}
	d.Hosts = nil
	for i, h := range splitList(v.Hosts) {
		host, err := model.ParseAgentID(h)
		if err != nil {
			errs.Add(fmt.Sprintf("hosts[%d]", i), err.Error())
			continue
		}
		d.Hosts = append(d.Hosts, host)
	}
	id := &p.Spec.Identity
	id.ProcName, id.SetupPath, id.PidPath, id.User = v.ProcName, v.SetupPath, v.PidPath, v.User
	id.ConfigPath, id.LogPath = v.ConfigPath, v.LogPath
	c := &p.Spec.Control
	c.StartCmd, c.StopCmd, c.RestartCmd, c.ReloadCmd, c.KillCmd = v.StartCmd, v.StopCmd, v.RestartCmd, v.ReloadCmd, v.KillCmd
	pol := &p.Spec.Policy
	pol.AutoType = v.AutoType
	// An empty field is a field left out: its documented default
	// (model.DefaultPolicy); a number typed, 0 included, is that number.
	atoiOr := func(field, s string, def int) int {
		s = strings.TrimSpace(s)
		if s == "" {
			return def
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			errs.Add(field, fmt.Sprintf("%q is not a whole number", s))
		}
		return n
	}
	atof := func(field, s string) float64 {
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%"))
		if s == "" {
			return 0
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			errs.Add(field, fmt.Sprintf("%q is not a number", s))
		}
		return f
	}
	dp := model.DefaultPolicy()
	pol.CycleTime = atoiOr("process.spec.monitor_policy.cycle_time", v.CycleTime, dp.CycleTime)
	pol.InstanceNum = atoiOr("process.spec.monitor_policy.instance_num", v.InstanceNum, dp.InstanceNum)
	pol.StartCheckSecs = atoiOr("process.spec.monitor_policy.start_check_secs", v.CheckBegin, dp.StartCheckSecs)
	pol.StartCheckEndSecs = atoiOr("process.spec.monitor_policy.start_check_end_secs", v.CheckEnd, dp.StartCheckEndSecs)
	pol.OpTimeout = atoiOr("process.spec.monitor_policy.op_timeout", v.OpTimeout, dp.OpTimeout)
	p.Spec.Resource.CPU = atof("process.spec.resource.cpu", v.CPU)
	p.Spec.Resource.Mem = atof("process.spec.resource.mem", v.Mem)
	return d, errs.Errors()
}

func splitList(s string) []string {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })
	return f
}

// validateDef runs the API's own validation (model.Process.ValidateDefInto,
// the same rules, field names and messages as the engine's SaveProcess)
// plus the form's parse errors.
func validateDef(v formVals, base model.ProcessDef) (model.ProcessDef, model.ValidationError) {
	d, errs := v.toDef(base)
	// As the engine's SaveProcess checks a definition: the process under
	// "process", at least one host, each host.
	var val model.Validator
	d.Process.ValidateDefInto(&val, "process", nil)
	if len(d.Hosts) == 0 && !hasField(errs, "hosts") {
		val.Add("hosts", "required: at least one host")
	}
	for i, h := range d.Hosts {
		h.Validate(&val, fmt.Sprintf("hosts[%d]", i))
	}
	return d, append(errs, val.Errors()...)
}

func hasField(errs model.ValidationError, prefix string) bool {
	for _, e := range errs {
		if e.Field == prefix || strings.HasPrefix(e.Field, prefix+"[") {
			return true
		}
	}
	return false
}

// fieldErr returns the error of one field (matching the field path or a
// sub-path of it, e.g. meta.labels[app]).
func fieldErr(errs model.ValidationError, field string) error {
	var out []string
	for _, e := range errs {
		if e.Field == field || strings.HasPrefix(e.Field, field+"[") || strings.HasPrefix(e.Field, field+".") {
			out = append(out, e.Error())
		}
	}
	if len(out) == 0 {
		return nil
	}
	return errors.New(strings.Join(out, "; "))
}

// ---- the form page --------------------------------------------------------

type formPage struct {
	s     *shared
	id    int
	base  model.ProcessDef
	isNew bool
	vals  *formVals
	orig  *formVals
	form  *huh.Form
	w, h  int

	// huh moves the focus through messages of its own, after the key that
	// asked for it: keys that arrive in between (fast typing, a paste
	// right after tab) would land in the field being left. They wait in
	// held until the focus has moved (or flushAfter passed).
	moving  huh.Field // the focused field when a move was asked, nil when none
	held    []tea.KeyMsg
	moveGen int
}

// flushAfter bounds how long typed keys wait for the focus to move.
const flushAfter = 150 * time.Millisecond

// formFlushMsg releases the held keys of move gen if the focus has not
// moved by then.
type formFlushMsg struct{ id, gen int }

func (m formFlushMsg) pageID() int { return m.id }

// readOnlyEdit says why a definition cannot be edited.
const readOnlyEdit = "editing is disabled: read-only mode"

// openForm opens the editor, unless the console is read-only.
func openForm(s *shared, d model.ProcessDef, isNew bool) tea.Cmd {
	if s.readOnly {
		return s.post(flashMsg{readOnlyEdit})
	}
	return s.post(pushMsg{newFormPage(s, d, isNew)})
}

func newFormPage(s *shared, d model.ProcessDef, isNew bool) *formPage {
	v := valsFrom(d)
	return newFormPageVals(s, d, isNew, &v)
}

func newFormPageVals(s *shared, base model.ProcessDef, isNew bool, v *formVals) *formPage {
	p := &formPage{s: s, id: s.newID(), base: base, isNew: isNew, vals: v}
	orig := valsFrom(base)
	p.orig = &orig
	p.build()
	return p
}

func (p *formPage) build() {
	v := p.vals
	// A field is checked with the whole definition as it would be with s
	// typed in (ptr points into p.vals).
	check := func(field string, ptr *string) func(string) error {
		return func(s string) error {
			old := *ptr
			*ptr = s
			_, errs := validateDef(*p.vals, p.base)
			*ptr = old
			return fieldErr(errs, field)
		}
	}
	in := func(title, field, desc string, ptr *string) *huh.Input {
		return huh.NewInput().Title(title).Description(desc).Value(ptr).Validate(check(field, ptr))
	}
	keyNote := "namespace:name identifies the definition"
	if !p.isNew {
		keyNote = "changing it saves a new definition"
	}
	// The name rule (model.NameChars), said where it is typed: a name it
	// refuses is refused on the field, before a save.
	chars := fmt.Sprintf("1-%d of A-Z a-z 0-9 . _ -", model.MaxName)
	identity := huh.NewGroup(
		in("Namespace", "process.meta.namespace", chars+"; "+keyNote, &v.Namespace),
		in("Name", "process.meta.name", chars+"; the process's name in its namespace", &v.Name),
		in("Labels", "process.meta.labels", "key=value, comma separated", &v.Labels),
		in("Hosts", "hosts", "cloud:ip, comma separated, e.g. 0:10.0.0.1", &v.Hosts),
		in("Process file name (proc_name)", "process.spec.identity.proc_name", "", &v.ProcName),
		in("Setup path", "process.spec.identity.setup_path", "absolute directory", &v.SetupPath),
		in("Pid file", "process.spec.identity.pid_path", "absolute path", &v.PidPath),
		in("Account", "process.spec.identity.user", "empty = root", &v.User),
		in("Config path", "process.spec.identity.config_path", "optional", &v.ConfigPath),
		in("Log path", "process.spec.identity.log_path", "optional", &v.LogPath),
	).Title("Identity")
	commands := huh.NewGroup(
		in("start_cmd", "process.spec.control.start_cmd", "run with sh -c in the setup path", &v.StartCmd),
		in("stop_cmd", "process.spec.control.stop_cmd", "", &v.StopCmd),
		in("restart_cmd", "process.spec.control.restart_cmd", "empty = stop then start", &v.RestartCmd),
		in("reload_cmd", "process.spec.control.reload_cmd", "", &v.ReloadCmd),
		in("kill_cmd", "process.spec.control.kill_cmd", "empty = SIGKILL the process group", &v.KillCmd),
	).Title("Commands")
	policy := huh.NewGroup(
		huh.NewSelect[model.AutoType]().Title("Type").Inline(true).Options(
			huh.NewOption("resident: keep it running", model.AutoResident),
			huh.NewOption("periodic: run every cycle_time", model.AutoPeriodic),
			huh.NewOption("one-shot: run once", model.AutoOneShot),
		).Value(&v.AutoType),
		in("cycle_time (s)", "process.spec.monitor_policy.cycle_time", "required for periodic", &v.CycleTime),
		in("instance_num", "process.spec.monitor_policy.instance_num", fmt.Sprintf("1-%d, empty = 1", model.MaxInstanceNum), &v.InstanceNum),
		in("Start check from (s)", "process.spec.monitor_policy.start_check_secs", fmt.Sprintf("empty = %d, 0 = at once", model.DefaultStartCheckSecs), &v.CheckBegin),
		in("Start check until (s)", "process.spec.monitor_policy.start_check_end_secs", "end of the start check window", &v.CheckEnd),
		in("op_timeout (s)", "process.spec.monitor_policy.op_timeout", fmt.Sprintf("1-%d, empty = %d", model.MaxOpTimeout, model.DefaultOpTimeout), &v.OpTimeout),
		in("CPU limit (%)", "process.spec.resource.cpu", "0-100 of the machine, empty = none", &v.CPU),
		in("Memory limit (%)", "process.spec.resource.mem", "0-100 of the machine, empty = none", &v.Mem),
	).Title("Hosting policy and limits")
	th := huh.ThemeBase()
	switch p.s.theme.Name {
	case "dark":
		th = huh.ThemeCharm()
	case "ansi16":
		th = huh.ThemeBase16()
	}
	p.form = huh.NewForm(identity, commands, policy).WithTheme(th).WithShowHelp(false).WithShowErrors(true)
	if p.w > 0 {
		p.form = p.form.WithWidth(p.w).WithHeight(max(p.h-3, 6))
	}
}

func (p *formPage) ID() int { return p.id }

// changed reports whether any field differs from the definition opened.
func (p *formPage) changed() bool { return *p.vals != *p.orig }
func (p *formPage) Title() string {
	if p.isNew {
		return "new process"
	}
	return "edit " + p.base.Process.Key()
}
func (p *formPage) Capturing() bool { return true }
func (p *formPage) Close()          {}
func (p *formPage) Resume() tea.Cmd { return nil }
func (p *formPage) Init() tea.Cmd   { return p.form.Init() }

func (p *formPage) SetSize(w, h int) {
	p.w, p.h = w, h
	p.form = p.form.WithWidth(w).WithHeight(max(h-3, 6)) // room for the error footer
}

// Form keys: only keys that cannot type text, so none of them is lost
// to a field (? and q are letters here).
var (
	formNext    = key.NewBinding(key.WithKeys("tab", "enter"), key.WithHelp("tab", "next field"))
	formPrev    = key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "previous"))
	formReview  = key.NewBinding(key.WithKeys("ctrl+s"), key.WithHelp("ctrl+s", "review and save"))
	formDiscard = key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "discard"))
	formQuit    = key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit"))
)

func (p *formPage) Help() keyHelp {
	next := formNext
	next.SetHelp("tab/enter", "next field (enter on the last one reviews)")
	return keyHelp{short: []binding{formNext, formPrev, formReview, formDiscard, formQuit},
		full: [][]binding{{next, formPrev, formReview, formDiscard, formQuit}}}
}

func (p *formPage) Update(msg tea.Msg) tea.Cmd {
	km, isKey := msg.(tea.KeyMsg)
	switch {
	case isKey && p.moving != nil:
		p.held = append(p.held, km)
		return nil
	case isKey && key.Matches(km, formReview):
		// Review what is typed so far, from any field.
		return p.s.post(replaceMsg{newReviewPage(p.s, p.base, p.isNew, *p.vals)})
	}
	if fm, ok := msg.(formFlushMsg); ok {
		if fm.gen == p.moveGen && p.moving != nil {
			return p.release()
		}
		return nil
	}
	before := p.form.GetFocusedField()
	m, cmd := p.form.Update(msg)
	if f, ok := m.(*huh.Form); ok {
		p.form = f
	}
	switch p.form.State {
	case huh.StateCompleted:
		return p.s.post(replaceMsg{newReviewPage(p.s, p.base, p.isNew, *p.vals)})
	case huh.StateAborted:
		return p.s.post(popMsg{})
	}
	switch {
	case isKey && cmd != nil && key.Matches(km, formNext, formPrev):
		// A move was asked: hold what is typed next until it happened.
		p.moving = before
		p.moveGen++
		id, gen := p.id, p.moveGen
		return tea.Batch(cmd, tea.Tick(flushAfter, func(time.Time) tea.Msg { return formFlushMsg{id, gen} }))
	case p.moving != nil && p.form.GetFocusedField() != p.moving:
		return tea.Batch(cmd, p.release())
	}
	return cmd
}

// release replays the keys held during a focus move into the form.
func (p *formPage) release() tea.Cmd {
	held := p.held
	p.moving, p.held = nil, nil
	cmds := make([]tea.Cmd, 0, len(held))
	for i, k := range held {
		cmds = append(cmds, p.Update(k))
		if p.moving != nil { // a held tab moved again: the rest waits for it
			p.held = append(p.held, held[i+1:]...)
			break
		}
	}
	return tea.Batch(cmds...)
}

func (p *formPage) View() string { return p.form.View() }

// ---- the review page: what changes, then save -----------------------------

type reviewPage struct {
	s      *shared
	id     int
	base   model.ProcessDef
	isNew  bool
	vals   formVals
	def    model.ProcessDef
	errs   model.ValidationError
	diff   []diffLine
	lines  []string // the diff as rendered lines
	saving bool
	list   vlist
	w, h   int
}

type diffLine struct {
	field, old, new string
}

type savedMsg struct {
	id  int
	key string
	err error
}

func (m savedMsg) pageID() int { return m.id }

func newReviewPage(s *shared, base model.ProcessDef, isNew bool, v formVals) *reviewPage {
	p := &reviewPage{s: s, id: s.newID(), base: base, isNew: isNew, vals: v}
	p.def, p.errs = validateDef(v, base)
	var old map[string]string
	if !isNew {
		old = flatten(base)
	}
	p.diff = diffDefs(old, flatten(p.def))
	return p // SetSize lays the diff out
}

// flatten lists a definition's fields by their API names.
func flatten(d model.ProcessDef) map[string]string {
	p := d.Process
	id, c, pol := p.Spec.Identity, p.Spec.Control, p.Spec.Policy
	hosts := make([]string, len(d.Hosts))
	for i, h := range d.Hosts {
		hosts[i] = h.AgentID()
	}
	m := map[string]string{
		"process.meta.namespace": p.Meta.Namespace, "process.meta.name": p.Meta.Name,
		"process.meta.labels": strings.Join(model.SortedLabels(p.Meta.Labels), ","), "hosts": strings.Join(hosts, ","),
		"process.spec.identity.proc_name": id.ProcName, "process.spec.identity.setup_path": id.SetupPath,
		"process.spec.identity.pid_path": id.PidPath, "process.spec.identity.user": id.User,
		"process.spec.identity.config_path": id.ConfigPath, "process.spec.identity.log_path": id.LogPath,
		"process.spec.control.start_cmd": c.StartCmd, "process.spec.control.stop_cmd": c.StopCmd,
		"process.spec.control.restart_cmd": c.RestartCmd, "process.spec.control.reload_cmd": c.ReloadCmd,
		"process.spec.control.kill_cmd":                    c.KillCmd,
		"process.spec.monitor_policy.auto_type":            fmt.Sprintf("%d (%s)", int(pol.AutoType), pol.AutoType),
		"process.spec.monitor_policy.cycle_time":           strconv.Itoa(pol.CycleTime),
		"process.spec.monitor_policy.instance_num":         strconv.Itoa(pol.InstanceNum),
		"process.spec.monitor_policy.start_check_secs":     strconv.Itoa(pol.StartCheckSecs),
		"process.spec.monitor_policy.start_check_end_secs": strconv.Itoa(pol.StartCheckEndSecs),
		"process.spec.monitor_policy.op_timeout":           strconv.Itoa(pol.OpTimeout),
		"process.spec.resource.cpu":                        strconv.FormatFloat(p.Spec.Resource.CPU, 'f', -1, 64),
		"process.spec.resource.mem":                        strconv.FormatFloat(p.Spec.Resource.Mem, 'f', -1, 64),
	}
	return m
}

// diffDefs lists the fields that differ, in field order; with old nil every
// set field is listed as added.
func diffDefs(old, cur map[string]string) []diffLine {
	var keys []string
	for k := range cur {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []diffLine
	for _, k := range keys {
		o, n := old[k], cur[k]
		if old == nil && (n == "" || n == "0") {
			continue
		}
		if o != n {
			out = append(out, diffLine{k, o, n})
		}
	}
	return out
}

func (p *reviewPage) ID() int         { return p.id }
func (p *reviewPage) Title() string   { return "review" }
func (p *reviewPage) Capturing() bool { return false }
func (p *reviewPage) Close()          {}
func (p *reviewPage) Init() tea.Cmd   { return nil }
func (p *reviewPage) Resume() tea.Cmd { return nil }
func (p *reviewPage) SetSize(w, h int) {
	p.w, p.h = w, h
	p.layoutLines()
	p.list.setHeight(h - 4 - min(len(p.errs), 6))
}

// layoutLines renders the diff as lines: the field, then its old value
// (-) and new value (+), wrapped to the width.
func (p *reviewPage) layoutLines() {
	t := p.s.theme
	w := max(p.w-4, 20)
	wrap := func(mark, v string, st func(...string) string) []string {
		var out []string
		for _, l := range strings.Split(ansi.Hardwrap(v, w, true), "\n") {
			out = append(out, "  "+st(mark+" "+l))
			mark = " "
		}
		return out
	}
	plain := func(s ...string) string { return strings.Join(s, "") }
	var lines []string
	for _, d := range p.diff {
		switch {
		case p.isNew || d.old == "":
			lines = append(lines, t.OK.Render("+ ")+d.field)
			lines = append(lines, wrap("+", d.new, plain)...)
		case d.new == "":
			lines = append(lines, t.Error.Render("- ")+d.field)
			lines = append(lines, wrap("-", d.old, t.Muted.Render)...)
		default:
			lines = append(lines, t.Warn.Render("~ ")+d.field)
			lines = append(lines, wrap("-", d.old, t.Muted.Render)...)
			lines = append(lines, wrap("+", d.new, plain)...)
		}
	}
	p.lines = lines
	p.list.setLen(len(lines))
}

func (p *reviewPage) Help() keyHelp {
	k := p.s.keys
	save := k.Confirm
	save.SetHelp(k.Confirm.Help().Key, "save")
	edit := k.Edit
	edit.SetHelp(k.Edit.Help().Key, "edit again")
	return keyHelp{short: []binding{save, edit}, full: [][]binding{{save, edit, k.Back}, k.nav()}}
}

func (p *reviewPage) Update(msg tea.Msg) tea.Cmd {
	k := p.s.keys
	switch msg := msg.(type) {
	case savedMsg:
		p.saving = false
		if msg.err != nil {
			var ve model.ValidationError
			if errors.As(msg.err, &ve) {
				p.errs = ve
			}
			return errCmd("save "+msg.key, msg.err)
		}
		p.s.post(popMsg{})
		return p.s.post(flashMsg{"saved " + msg.key})
	case tea.KeyMsg:
		if p.list.navigate(k, msg) {
			return nil
		}
		switch {
		case keyIs(msg, k.Confirm):
			if len(p.errs) > 0 {
				return p.s.post(flashMsg{"fix the errors first (e edits again)"})
			}
			if len(p.diff) == 0 {
				return p.s.post(flashMsg{"nothing changed"})
			}
			if p.saving {
				return nil
			}
			p.saving = true
			ctx, be, id, def := p.s.ctx, p.s.be, p.id, p.def
			return func() tea.Msg {
				return savedMsg{id: id, key: def.Process.Key(), err: be.SaveProcess(ctx, def)}
			}
		case keyIs(msg, k.Edit):
			v := p.vals
			return p.s.post(replaceMsg{newFormPageVals(p.s, p.base, p.isNew, &v)})
		}
	}
	return nil
}

func (p *reviewPage) View() string {
	t := p.s.theme
	var b strings.Builder
	what := "Changes to " + p.base.Process.Key()
	if p.isNew {
		what = "New definition " + p.def.Process.Key()
	}
	b.WriteString(t.Title.Render(what) + "\n")
	if len(p.errs) > 0 {
		b.WriteString(t.Error.Render(fmt.Sprintf("✗ %s — not saved:", plural(len(p.errs), "error"))) + "\n")
		for i, e := range p.errs {
			if i == 6 {
				b.WriteString(t.Error.Render(fmt.Sprintf("  … %d more", len(p.errs)-6)) + "\n")
				break
			}
			b.WriteString(t.Error.Render("  "+e.Error()) + "\n")
		}
	} else if len(p.diff) == 0 {
		b.WriteString(t.Muted.Render("Nothing changed.") + "\n")
	} else {
		b.WriteString(t.Muted.Render(fmt.Sprintf("%s · y saves, e edits again, esc discards", plural(len(p.diff), "change"))) + "\n")
	}
	s, e := p.list.window()
	for i := s; i < e; i++ {
		b.WriteString(p.lines[i] + "\n")
	}
	if p.saving {
		b.WriteString(t.Pending.Render("saving…"))
	}
	return b.String()
}

// newDef is a new definition in namespace ns for the form: the documented
// policy defaults for what the form does not show (start_retries,
// start_interval) and for what it shows until changed.
func newDef(ns string) model.ProcessDef {
	d := model.NewProcessDef()
	d.Process.Meta.Namespace = ns
	d.Process.Spec.Policy.AutoType = model.AutoResident
	return d
}
