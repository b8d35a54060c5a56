package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"gseproc/backend"
	"gseproc/model"
)

// matchDef reports whether a definition matches namespace, name and labels
// (zero values do not filter).
func matchDef(d model.ProcessDef, ns, name string, labels map[string]string) bool {
	m := d.Process.Meta
	return (ns == "" || m.Namespace == ns) && (name == "" || m.Name == name) && model.MatchLabels(m.Labels, labels)
}

func hostSet(hs []model.Host) map[model.Host]bool {
	if len(hs) == 0 {
		return nil
	}
	s := make(map[model.Host]bool, len(hs))
	for _, h := range hs {
		s[h] = true
	}
	return s
}

// Namespaces summarises the registry by namespace. The summary is counted
// again only when a definition changed (nsCounts): counting the distinct
// hosts of namespaces over 100,000 hosts built a host set per namespace on
// every call, 0.15 s of the console's first screen.
func (e *Engine) Namespaces(ctx context.Context) ([]backend.NamespaceSummary, error) {
	defs, err := e.definitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("namespaces: %w", err)
	}
	if out, ok := e.nsCounts.get(defs); ok {
		return out, nil
	}
	out := summarise(defs)
	e.nsCounts.put(defs, out)
	return cloneSummaries(out), nil
}

// summarise counts each namespace's definitions and distinct hosts and
// collects its label values. One map of hosts serves every namespace, taken
// one after the other: a host's entry is the last namespace that counted it.
func summarise(defs []model.ProcessDef) []backend.NamespaceSummary {
	type acc struct {
		procs, hosts int
		labels       map[string]map[string]bool
	}
	byNS := map[string]*acc{}
	var order []string
	of := map[string][]int{} // each namespace's definitions
	most := 0
	for i := range defs {
		ns := defs[i].Process.Meta.Namespace
		if of[ns] == nil {
			order = append(order, ns)
		}
		of[ns] = append(of[ns], i)
		most = max(most, len(defs[i].Hosts))
	}
	seen := make(map[model.Host]int32, most)
	for n, ns := range order {
		a := &acc{labels: map[string]map[string]bool{}}
		byNS[ns] = a
		st := int32(n + 1)
		for _, i := range of[ns] {
			d := &defs[i]
			a.procs++
			for _, h := range d.Hosts {
				if seen[h] != st {
					seen[h] = st
					a.hosts++
				}
			}
			for k, v := range d.Process.Meta.Labels {
				if a.labels[k] == nil {
					a.labels[k] = map[string]bool{}
				}
				a.labels[k][v] = true
			}
		}
	}
	out := make([]backend.NamespaceSummary, 0, len(byNS))
	for _, ns := range order {
		a := byNS[ns]
		s := backend.NamespaceSummary{Name: ns, Processes: a.procs, Hosts: a.hosts}
		if len(a.labels) > 0 {
			s.Labels = make(map[string][]string, len(a.labels))
			for k, vs := range a.labels {
				l := make([]string, 0, len(vs))
				for v := range vs {
					l = append(l, v)
				}
				sort.Strings(l)
				s.Labels[k] = l
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// nsCounts keeps the last namespace summary with what it was counted
// from: each definition's key, revision and host count, in registry
// order. A registry whose definitions all carry a revision (the stores
// set one on every write) and match it is summarised the same; one
// without revisions (inline definitions) is counted every time.
type nsCounts struct {
	mu   sync.Mutex
	from []defRev
	out  []backend.NamespaceSummary
}

type defRev struct {
	key   string
	rev   uint64
	hosts int
}

func (c *nsCounts) get(defs []model.ProcessDef) ([]backend.NamespaceSummary, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.out == nil || len(c.from) != len(defs) {
		return nil, false
	}
	for i := range defs {
		d, f := &defs[i], &c.from[i]
		if d.Rev == 0 || d.Rev != f.rev || len(d.Hosts) != f.hosts || d.Process.Key() != f.key {
			return nil, false
		}
	}
	return cloneSummaries(c.out), true
}

func (c *nsCounts) put(defs []model.ProcessDef, out []backend.NamespaceSummary) {
	from := make([]defRev, len(defs))
	for i := range defs {
		d := &defs[i]
		if d.Rev == 0 {
			return
		}
		from[i] = defRev{key: d.Process.Key(), rev: d.Rev, hosts: len(d.Hosts)}
	}
	c.mu.Lock()
	c.from, c.out = from, out
	c.mu.Unlock()
}

// cloneSummaries copies a summary the caller may keep and change.
func cloneSummaries(in []backend.NamespaceSummary) []backend.NamespaceSummary {
	out := slices.Clone(in)
	for i := range out {
		if out[i].Labels == nil {
			continue
		}
		ls := make(map[string][]string, len(out[i].Labels))
		for k, v := range out[i].Labels {
			ls[k] = slices.Clone(v)
		}
		out[i].Labels = ls
	}
	return out
}

// definitions returns the registry sorted by key, for reading only: the
// store's own slice when it lends one (SharedRegistry), a copy otherwise.
// A caller copies what it keeps or changes.
func (e *Engine) definitions(ctx context.Context) ([]model.ProcessDef, error) {
	if sr, ok := e.st.(SharedRegistry); ok {
		return sr.SharedProcesses(ctx)
	}
	return e.st.Processes(ctx)
}

// Processes lists the definitions matching q, sorted by key.
func (e *Engine) Processes(ctx context.Context, q backend.ProcQuery) ([]model.ProcessDef, error) {
	if q.Host != nil {
		h, err := q.Host.Canonical()
		if err != nil {
			return nil, model.ValidationError{{Field: "host", Reason: err.Error()}}
		}
		q.Host = &h
	}
	defs, err := e.definitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("processes: %w", err)
	}
	out := []model.ProcessDef{} // the matches, copied out of the shared registry
	for _, d := range defs {
		if !matchDef(d, q.Namespace, q.Name, q.Labels) {
			continue
		}
		if q.Host != nil && !slices.Contains(d.Hosts, *q.Host) {
			continue
		}
		// Deep: the caller owns what it gets (the console's form edits
		// labels and hosts), the lent registry is read-only.
		d.Process = d.Process.Clone()
		d.Hosts = slices.Clone(d.Hosts)
		out = append(out, d)
	}
	return out, nil
}

// LendProcess returns the definition of key "namespace:name" as the
// registry holds it, without copying it: read only for the caller (its
// hosts and labels are the registry's). An operate on a registered
// process reads it per request: a copy of a definition deployed on
// 10,000 hosts was most of the request's CPU.
func (e *Engine) LendProcess(ctx context.Context, key string) (model.ProcessDef, bool, error) {
	defs, err := e.definitions(ctx)
	if err != nil {
		return model.ProcessDef{}, false, fmt.Errorf("process %s: %w", key, err)
	}
	i, ok := slices.BinarySearchFunc(defs, key, func(d model.ProcessDef, key string) int {
		return compareKey(d.Process.Meta.Namespace, d.Process.Meta.Name, key)
	})
	if !ok {
		return model.ProcessDef{}, false, nil
	}
	return defs[i], true, nil
}

// compareKey compares namespace+":"+name with key as strings.Compare
// would, without building the first.
func compareKey(ns, name, key string) int {
	if len(key) < len(ns) || key[:len(ns)] != ns {
		// They differ within ns, or key ends inside it (then it is less).
		return strings.Compare(ns, key[:min(len(ns), len(key))])
	}
	rest := key[len(ns):]
	switch {
	case rest == "":
		return 1
	case rest[0] != ':':
		return cmpByte(':', rest[0])
	}
	return strings.Compare(name, rest[1:])
}

func cmpByte(a, b byte) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Hosts joins the inventory with the matching definitions deployed on each
// host and their last known status. With a process filter (namespace, name
// or labels) only hosts carrying a matching process are listed.
//
// An inventory that makes labels (LabelMaker) makes those of the hosts
// listed only: a host's page (one host) made 100,000 label maps.
func (e *Engine) Hosts(ctx context.Context, q backend.HostQuery) ([]backend.HostView, error) {
	inv, lm, err := e.inventory(ctx)
	if err != nil {
		return nil, fmt.Errorf("hosts: inventory: %w", err)
	}
	var out []backend.HostView
	err = e.eachHost(ctx, q, inv, func(size int, _ *hostLister, _ []int32) { out = make([]backend.HostView, 0, size) },
		func(lv *hostLister, k int, hi *model.HostInfo, idx []int32) {
			v := lv.view(*hi, idx)
			if lm != nil {
				v.Labels = map[string]string{}
				if lm.HostLabelsInto(k, v.Labels); len(v.Labels) == 0 {
					v.Labels = nil
				}
			}
			out = append(out, v)
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// inventory lists the inventory's hosts: without their labels when it
// makes them (lm not nil: LabelMaker), for the hosts listed only.
func (e *Engine) inventory(ctx context.Context) (inv []model.HostInfo, lm LabelMaker, err error) {
	if lm, ok := e.inv.(LabelMaker); ok {
		inv, err = lm.HostsUnlabelled(ctx)
		return inv, lm, err
	}
	inv, err = e.inv.Hosts(ctx)
	return inv, nil, err
}

// HostListEach is Hosts for a host list (backend.HostListReader): each
// host passed to fn in Hosts' order, its processes' statuses holding only
// ProcKey, State, PID and Hosted. The view, its processes and its host
// label map are reused after fn returns. A listing of 100,000 hosts
// copied every process's whole status into a slice per host (~85 MB)
// that the list form (and the console) never read.
//
// An inventory that makes labels (LabelMaker) has each host's put into
// the view's one map: the simulator's made for each host of a listing
// (Hosts) cost ~100 ms of 100,000 hosts' listing, and kept, 28 MB.
func (e *Engine) HostListEach(ctx context.Context, q backend.HostQuery, fn func(*backend.HostView)) error {
	inv, lm, err := e.inventory(ctx)
	if err != nil {
		return fmt.Errorf("hosts: inventory: %w", err)
	}
	var v backend.HostView
	var labels map[string]string // the views' (lm)
	return e.eachHost(ctx, q, inv, func(int, *hostLister, []int32) {}, func(lv *hostLister, k int, hi *model.HostInfo, idx []int32) {
		lv.listView(&v, hi, idx)
		if lm != nil {
			if labels == nil {
				labels = map[string]string{}
			}
			lm.HostLabelsInto(k, labels)
			v.Labels = labels
			if len(labels) == 0 {
				v.Labels = nil
			}
		}
		fn(&v)
	})
}

// HostListSets is HostListEach with each host's labels handed over as
// the inventory keeps them, a shared set (backend.HostLabelSetReader),
// when it does (LabelSetInventory); else as HostListEach has them, in
// the view's map (labels nil). The dispatcher made a map of each host's
// set for HostListEach, which the list form's writer took apart again:
// a quarter of a 100,000-host listing's CPU, 200,000 allocations.
//
// head, when not nil and the inventory keeps sets, is called once before
// the first host with all the listing may name: the label set of every
// host of the inventory (sets, repeated as hosts share them) and every
// process the views may carry (key and labels, the rest zero). A list
// form's writer makes its tables of them and writes each host as it
// comes (the reply's first byte no longer waits for the last host).
func (e *Engine) HostListSets(ctx context.Context, q backend.HostQuery, head func(procs []backend.ProcView, sets []model.LabelSet), fn func(v *backend.HostView, labels model.LabelSet)) error {
	si, ok := e.inv.(LabelSetInventory)
	if !ok {
		return e.HostListEach(ctx, q, func(v *backend.HostView) { fn(v, nil) })
	}
	inv, sets, err := si.HostLabelSets(ctx)
	if err != nil {
		return fmt.Errorf("hosts: inventory: %w", err)
	}
	if len(sets) != len(inv) {
		return fmt.Errorf("hosts: inventory: %d label sets for %d hosts", len(sets), len(inv))
	}
	start := func(_ int, lv *hostLister, match []int32) {
		if head == nil {
			return
		}
		// The views' processes are the matching definitions (fill).
		procs := make([]backend.ProcView, len(match))
		for j, i := range match {
			procs[j] = backend.ProcView{Key: lv.keys[i], Labels: lv.defs[i].Process.Meta.Labels}
		}
		head(procs, sets)
	}
	var v backend.HostView
	return e.eachHost(ctx, q, inv, start, func(lv *hostLister, k int, hi *model.HostInfo, idx []int32) {
		lv.listView(&v, hi, idx)
		fn(&v, sets[k])
	})
}

// eachHost finds the hosts q matches among inv (the inventory's), in
// Hosts' order: start is told how many there may be (at most) and the
// definitions q matches (lv.defs[match], their keys lv.keys), then each
// host is passed to emit with its place k in inv and the definitions
// deployed on it that q matches.
func (e *Engine) eachHost(ctx context.Context, q backend.HostQuery, inv []model.HostInfo, start func(size int, lv *hostLister, match []int32), emit func(lv *hostLister, k int, hi *model.HostInfo, idx []int32)) error {
	defs, err := e.definitions(ctx)
	if err != nil {
		return fmt.Errorf("hosts: processes: %w", err)
	}
	if q.Hosts, err = canonicalHosts("hosts", q.Hosts); err != nil {
		return err
	}
	procFilter := q.Namespace != "" || q.Name != "" || len(q.Labels) > 0
	only := hostSet(q.Hosts)
	var byID map[string]bool
	if len(q.AgentIDs) > 0 {
		byID = make(map[string]bool, len(q.AgentIDs))
		for _, id := range q.AgentIDs {
			byID[id] = true
		}
	}
	keys := make([]string, len(defs)) // each matching definition's key, built once
	var match []int32
	for i, d := range defs {
		if matchDef(d, q.Namespace, q.Name, q.Labels) {
			keys[i] = d.Process.Key()
			match = append(match, int32(i))
		}
	}
	lv := hostLister{e: e, defs: defs, keys: keys, src: e.statusSource()}
	lv.app, _ = lv.src.(StatusAppender)
	lv.brief, _ = lv.src.(ListStatusAppender)
	keep := func(hi *model.HostInfo) bool {
		return (only == nil || only[hi.Host]) && (byID == nil || byID[hi.AgentID])
	}
	if q.Limit > 0 && q.Limit < len(inv)/4 {
		// A first page: the matching definitions' host positions (kept
		// per definition revision, e.hosts) answer for each host in turn
		// until the page is full, instead of laying out every host.
		in := make([]*model.HostPositions, len(match))
		for j, i := range match {
			in[j] = e.hosts.Positions(defs[i])
		}
		start(q.Limit, &lv, match)
		var idx []int32
		n := 0
		for k := range inv {
			hi := &inv[k]
			if !keep(hi) {
				continue
			}
			idx = idx[:0]
			for j, i := range match {
				if _, ok := in[j].Find(hi.Host); ok {
					idx = append(idx, i)
				}
			}
			if procFilter && len(idx) == 0 {
				continue
			}
			emit(&lv, k, hi, idx)
			if n++; n >= q.Limit {
				break
			}
		}
		return nil
	}
	// The matching definitions on each host of the inventory, as the
	// last listing of the same hosts and definitions laid them out.
	lay := e.layouts.get(inv, defs, keys, match)
	size := len(inv)
	if procFilter {
		size = lay.used
	}
	start(size, &lv, match)
	n := 0
	for k := range inv {
		hi := &inv[k]
		if !keep(hi) {
			continue
		}
		idx := lay.defs(k, hi.Host)
		if procFilter && len(idx) == 0 {
			continue
		}
		emit(&lv, k, hi, idx)
		if n++; q.Limit > 0 && n >= q.Limit {
			break
		}
	}
	return nil
}

// hostLister makes the views of a listing: a host with the last known
// status of each of its matching definitions (defs[idx]), the newer of
// the engine's (from operations) and the status source's.
type hostLister struct {
	e    *Engine
	defs []model.ProcessDef
	keys []string
	src  StatusSource
	app  StatusAppender
	// brief, when the source has it, gives a host list's statuses (fill
	// with slim) without the rest of each status.
	brief ListStatusAppender
	sts   []model.ProcStatus
	want  []string // the keys asked of brief
	// procs is where the views' processes are laid out, a chunk at a
	// time: each view's Procs is its own part (capacity clipped, an
	// append by the caller copies it out), instead of a slice per host
	// (100,000 allocations a listing).
	procs []backend.ProcView
}

// procChunk is how many processes a chunk of hostLister.procs holds.
const procChunk = 1024

func (l *hostLister) view(hi model.HostInfo, idx []int32) backend.HostView {
	v := backend.HostView{HostInfo: hi}
	if len(idx) == 0 {
		return v
	}
	if cap(l.procs)-len(l.procs) < len(idx) {
		l.procs = make([]backend.ProcView, 0, max(procChunk, len(idx)))
	}
	n := len(l.procs)
	v.Procs = l.fill(l.procs[n:n:n+len(idx)], hi.Host, idx, false)
	l.procs = l.procs[:n+len(v.Procs)]
	return v
}

// listView makes v the view of hi for a host list (Engine.HostListEach):
// of each process's status only ProcKey, State, PID and Hosted, in v's
// own Procs (reused).
func (l *hostLister) listView(v *backend.HostView, hi *model.HostInfo, idx []int32) {
	v.HostInfo = *hi
	v.Procs = l.fill(v.Procs[:0], hi.Host, idx, true)
	if len(v.Procs) == 0 {
		v.Procs = nil
	}
}

// fill appends to procs the view of each definition defs[idx] on h, with
// its last known status (whole, or only what a list shows when slim).
func (l *hostLister) fill(procs []backend.ProcView, h model.Host, idx []int32, slim bool) []backend.ProcView {
	if len(idx) == 0 {
		return procs
	}
	l.sts = l.sts[:0]
	if l.src != nil {
		// Asked outside the statuses' lock: the source has locks of its own.
		if slim && l.brief != nil {
			l.want = l.want[:0]
			for _, i := range idx {
				l.want = append(l.want, l.keys[i])
			}
			l.sts = l.brief.AppendListStatuses(l.sts, h, l.want)
		} else if l.app != nil {
			l.sts = l.app.AppendStatuses(l.sts, h)
		} else {
			l.sts = l.src.Statuses(h)
		}
	}
	sh := l.e.statuses.shard(h)
	sh.mu.RLock()
	for _, i := range idx {
		d := &l.defs[i]
		key := l.keys[i]
		var st *model.ProcStatus
		if k, ok := sh.get(h, key); ok {
			st = k.st
		}
		for j := range l.sts { // a host has a few processes: a scan beats a map
			if s := &l.sts[j]; s.ProcKey == key && (st == nil || s.ReportTime >= st.ReportTime) {
				st = s
				break
			}
		}
		if st == nil {
			// Made only for a process with no status: zeroing a whole
			// status for every process was ~5% of a 100,000-host list.
			st = &model.ProcStatus{ProcKey: key, ProcName: d.Process.Spec.Identity.ProcName, State: model.ProcUnknown, PID: -1}
		}
		if slim {
			procs = append(procs, backend.ProcView{Key: key, Labels: d.Process.Meta.Labels,
				Status: model.ProcStatus{ProcKey: key, State: st.State, PID: st.PID, Hosted: st.Hosted}})
		} else {
			procs = append(procs, backend.ProcView{Key: key, Labels: d.Process.Meta.Labels, Status: *st, Updated: st.ReportTime})
		}
	}
	sh.mu.RUnlock()
	return procs
}

// canonicalDef validates d into v and returns it in canonical form: paths
// cleaned, hosts canonical. Every definition passes here whichever way it
// came (API forms, native API, console, apply). Its policy is taken as it
// is: the documented defaults were applied where the definition entered
// and absence was known (model.DefaultPolicy); here a 0 is a 0, so the
// agent, the simulator and the task deadlines see what was asked.
func canonicalDef(v *model.Validator, prefix string, d model.ProcessDef) model.ProcessDef {
	// The name rule (model.CheckDefName) holds here and at the forms, not
	// in the agents' Process.Validate: a definition stored before it stays
	// operable and deletable; only saving one is refused.
	d.Process.ValidateDefInto(v, prefix+"process", nil)
	if len(d.Hosts) == 0 {
		v.Add(prefix+"hosts", "required: at least one host")
	}
	d.Hosts = model.CanonicalHosts(v, prefix+"hosts", d.Hosts)
	d.Process = d.Process.Canonical()
	return d
}

// canonicalHosts canonicalizes a query's hosts, refusing bad ones.
func canonicalHosts(field string, hs []model.Host) ([]model.Host, error) {
	v := &model.Validator{}
	out := model.CanonicalHosts(v, field, hs)
	return out, v.Err()
}

// SaveProcess validates and creates or replaces a definition; the change
// (or its refusal) is recorded in the audit trail.
func (e *Engine) SaveProcess(ctx context.Context, def model.ProcessDef) error {
	err := e.saveProcess(ctx, def)
	en := model.AuditEntry{Actor: actor(ctx, "", ""), Action: model.AuditSaveProcess,
		Namespaces: []string{def.Process.Meta.Namespace}, Targets: []string{def.Process.Key()}, TargetCount: len(def.Hosts)}
	en.Result, en.Summary = outcome(err)
	if err == nil {
		en.Summary = fmt.Sprintf("saved, on %d hosts", len(def.Hosts))
	}
	if rerr := e.record(ctx, en); rerr != nil && err == nil {
		return fmt.Errorf("save process %s: saved, but %w", def.Process.Key(), rerr)
	}
	return err
}

func (e *Engine) saveProcess(ctx context.Context, def model.ProcessDef) error {
	if err := e.refuseReadOnly("save process " + def.Process.Key()); err != nil {
		return err
	}
	v := &model.Validator{}
	def = canonicalDef(v, "", def)
	if err := v.Err(); err != nil {
		return err
	}
	def.Updated = e.now().Unix()
	if err := e.st.PutProcess(ctx, def); err != nil {
		return fmt.Errorf("save process %s: %w", def.Process.Key(), err)
	}
	return nil
}

// DeleteProcess removes a definition by key "namespace:name"; the change
// (or its refusal) is recorded in the audit trail.
func (e *Engine) DeleteProcess(ctx context.Context, key string) error {
	err := e.refuseReadOnly("delete process " + key)
	if err == nil {
		err = e.st.DeleteProcess(ctx, key)
	}
	ns, _, _ := model.SplitKey(key)
	en := model.AuditEntry{Actor: actor(ctx, "", ""), Action: model.AuditDeleteProcess, Namespaces: []string{ns}, Targets: []string{key}}
	en.Result, en.Summary = outcome(err)
	if rerr := e.record(ctx, en); rerr != nil && err == nil {
		return fmt.Errorf("delete process %s: deleted, but %w", key, rerr)
	}
	return err
}

// resolve turns a selector into (host, process) targets and the processes
// they name. Hosts keep the order of each definition's host list;
// definitions are in key order. When the selector names a few hosts, each
// definition's list is searched through idx instead of walked.
func resolve(defs []model.ProcessDef, sel backend.Selector, idx *model.HostIndex) ([]model.Target, map[string]model.Process) {
	only := hostSet(sel.Hosts)
	var pairs map[model.Target]bool
	if len(sel.Targets) > 0 {
		pairs = make(map[model.Target]bool, len(sel.Targets))
		for _, t := range sel.Targets {
			pairs[model.Target{Host: t.Host, ProcKey: t.ProcKey}] = true
		}
	}
	// Room for every host of the matching definitions when no host or
	// pair narrows them (an op over 100,000 hosts grew it 25 times).
	n := 0
	if only == nil && pairs == nil {
		for _, d := range defs {
			if matchDef(d, sel.Namespace, sel.Name, sel.Labels) {
				n += len(d.Hosts)
			}
		}
	}
	targets := make([]model.Target, 0, n)
	procs := map[string]model.Process{}
	// A target is taken once. A definition whose hosts the index knows to
	// be distinct, of a key no other definition had, needs no check: its
	// targets cannot repeat (an op over 84,000 hosts checked each in a
	// map of every target).
	var seen map[model.Target]bool
	keys := map[string]bool{}
	add := func(key string, h model.Host, check bool) {
		t := model.Target{Host: h, ProcKey: key}
		if check {
			if seen[t] || (pairs != nil && !pairs[t]) {
				return
			}
			if seen == nil {
				seen = map[model.Target]bool{}
			}
			seen[t] = true
		}
		targets = append(targets, t)
	}
	for _, d := range defs {
		if !matchDef(d, sel.Namespace, sel.Name, sel.Labels) {
			continue
		}
		key, before := d.Process.Key(), len(targets)
		check := pairs != nil || keys[key] || !idx.Distinct(d)
		keys[key] = true
		if only != nil && len(only)*8 < len(d.Hosts) {
			pos := idx.Positions(d)
			at := make([]int, 0, len(only))
			for h := range only {
				if i, ok := pos.Find(h); ok {
					at = append(at, i)
				}
			}
			slices.Sort(at)
			for _, i := range at {
				add(key, d.Hosts[i], check)
			}
		} else {
			for _, h := range d.Hosts {
				if only != nil && !only[h] {
					continue
				}
				add(key, h, check)
			}
		}
		if len(targets) > before {
			procs[key] = d.Process
		}
	}
	return targets, procs
}

// statusSource is the dispatcher or inventory that reports statuses, if any.
func (e *Engine) statusSource() StatusSource {
	if s, ok := e.d.(StatusSource); ok {
		return s
	}
	if s, ok := e.inv.(StatusSource); ok {
		return s
	}
	return nil
}
