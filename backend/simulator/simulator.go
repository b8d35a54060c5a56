// Package simulator is a fleet of simulated GSE agents. Every host keeps
// real per-process state (running or not, pid, hosted or not, start time,
// cpu/mem, restarts) and answers each operation as a GSE agent does, with
// the codes of gse-api.md §7.1: 828 on start of a running process, 829 on
// stop of a stopped one, 850 on re-register, 836 when a start fails to come
// up, 65535 with command output when a command fails. Latency and failures
// follow a profile from config; offline hosts never answer, unreachable
// ones are refused at once (model.ErrUnreachable); hosted processes crash
// and are brought back up by Run, which emits events.
//
// A Fleet implements engine.Dispatcher, engine.Inventory and
// engine.EventSource. It is cheap at 100,000 hosts: no goroutine per host,
// compact per-host records, and process state created only when an
// operation first touches it (until then it is computed from the seed).
//
// Determinism: the same seed gives the same hosts and definitions, and each
// host draws its latencies and failures from its own stream, so the same
// sequence of calls to one host gives the same answers.
package simulator

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gseproc/backend/config"
	"gseproc/backend/opledger"
	"gseproc/model"
)

// Host kinds, drawn from the profile at generation time.
const (
	kindNormal      uint8 = iota
	kindOffline           // never answers: Dispatch blocks until ctx ends
	kindUnreachable       // refused at once with model.ErrUnreachable
)

// AgentVersion is what simulated agents report.
const AgentVersion = "2.1.6-sim"

// hostKey indexes hosts by cloud area and IPv4 address.
type hostKey struct {
	cloud int32
	ip    uint32
}

// simHost is one host: its identity, profile and the processes it has seen.
// mu guards everything below it.
type simHost struct {
	host  model.Host
	kind  uint8
	demo  bool // named by the API documents' examples: never fails at random
	role  uint8
	zone  uint8
	os    uint8
	rack  uint16
	memGB uint16

	mu      sync.Mutex
	offline bool // SetOffline(true)
	rng     uint64
	nextPID int32
	procs   []*procState
	agentID string // AgentID(host), made on first listing (a string a host a listing before)

	// Live controls (control.go): nil lat and unset fail follow the profile.
	lat       *latency
	failRate  float32
	failSet   bool
	flapLeft  int32 // offline/online toggles still to come
	flapEvery int32 // ms between toggles
	flapNext  int64 // unix nanoseconds of the next toggle
}

// procState is one process on one host.
type procState struct {
	key        string
	procName   string
	def        int32 // index into Fleet.defs, -1 when the fleet has no such definition
	running    bool
	hosted     bool
	pid        int32
	started    int64 // unix nanoseconds of the current (or last) start
	registered int64 // unix seconds hosting was registered
	cpu, mem   float32
	restarts   int32
	exitStatus int32
	attempts   int32 // restarts that did not stay up (the restart policy's count)
	phase      uint8 // what a process that is not running is doing: phaseStopped, phaseBackoff, phaseFatal
	held       bool  // stopped over a limit or given up: not restarted until an operator's start
	failNext   int32 // FailNext: the code the next command answers, 0 for none
	retries    int32 // 1 + start_retries of the definition the last op carried (0 included), 0 for the deployment's
	due        int64 // unix nanoseconds the restart policy relaunches a process in BACKOFF (0: a later round of Run)
}

// Phases of a process that is not running.
const (
	phaseStopped uint8 = iota
	phaseBackoff       // a restart is pending: Run brings it up
	phaseFatal         // given up after start_retries
)

// procRef names a process on a host that is not one of the fleet's
// deployments (created lazily by an operation), so Run can crash it too.
type procRef struct {
	host int32
	key  string
}

// Fleet is the simulated fleet. All methods are safe for concurrent use.
type Fleet struct {
	// timers are the latency timers of the requests, used again (timer).
	timers sync.Pool
	// later holds the requests DispatchLaterTo answers when they fall due.
	later  laterQueue
	cfg    config.SimulatorConfig
	seed   uint64
	born   time.Time
	lat    latency
	roles  []string
	hosts  []simHost
	index  map[hostKey]int32
	defs   []def
	defKey map[string]int32
	// maxProcs bounds the process definitions a host knows, as an agent's
	// (model.MaxHostProcs; opsem.Admit decides).
	maxProcs int

	zones [][3]string // zone label per cloud area and zone
	racks []string    // rack label by rack number (hostLabels)

	extraMu sync.Mutex
	extras  []procRef

	subMu   sync.Mutex
	closed  bool
	subs    map[uint64]*subscriber
	nextSub uint64
	wg      sync.WaitGroup // subscriber delivery goroutines

	dropped atomic.Uint64 // events dropped for slow subscribers
	now     func() time.Time

	// Live controls waiting on the clock (control.go, Advance).
	ctlMu    sync.Mutex
	flapping map[int32]bool
	pending  []relaunch

	// ops runs each op id once, as a real agent's ledger does (in memory:
	// a simulated host forgets with the process).
	ops *opledger.Ledger
}

// New builds the fleet described by cfg. The defaults are the [simulator]
// section's, once (config.Default, filled by config.Load): cfg is taken as
// it is, and a field it leaves out of range (a zero Hosts or Clouds, no
// namespace) panics with the field named, since config.Load has already
// rejected it for a file (use NewChecked to get an error). A zero Seed
// draws one.
func New(cfg config.SimulatorConfig) *Fleet {
	f, err := NewChecked(cfg)
	if err != nil {
		panic(fmt.Sprintf("simulator.New: %v", err))
	}
	return f
}

// NewChecked is New returning the validation error instead of panicking.
func NewChecked(cfg config.SimulatorConfig) (*Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("simulator config: %w", err)
	}
	seed := uint64(cfg.Seed)
	if cfg.Seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	f := &Fleet{
		later:    laterQueue{epoch: time.Now()},
		cfg:      cfg,
		seed:     seed,
		born:     time.Now(),
		lat:      newLatency(cfg.LatencyMedian.D(), cfg.LatencyP99.D()),
		roles:    roleNamespaces(cfg.Namespaces),
		subs:     map[uint64]*subscriber{},
		defKey:   map[string]int32{},
		now:      time.Now,
		flapping: map[int32]bool{},
		maxProcs: model.MaxHostProcs,
	}
	f.genHosts()
	f.ops = opledger.New(max(opledger.DefaultKeep, len(f.hosts))) // a whole-fleet task's ops
	f.defs = genDefs(seed, cfg.Namespaces, f.roles)
	f.placeEverywhere()
	if cfg.Demo {
		f.addDemoDefs()
	}
	for i := range f.defs {
		d := &f.defs[i]
		d.key = d.proc.Key()
		f.defKey[d.key] = int32(i)
		d.cmdline = strings.TrimRight(d.proc.Spec.Identity.SetupPath, "/") + "/" + d.proc.Spec.Identity.ProcName
	}
	for i := range f.hosts {
		if r := int(f.hosts[i].rack); r >= len(f.racks) {
			f.racks = append(f.racks, make([]string, r+1-len(f.racks))...)
		}
	}
	for r := range f.racks {
		f.racks[r] = rackName(uint16(r))
	}
	f.zones = make([][3]string, cfg.Clouds+2)
	for c := range f.zones {
		for z := range 3 {
			f.zones[c][z] = zoneName(c, uint8(z))
		}
	}
	return f, nil
}

func (f *Fleet) genHosts() {
	n, clouds := f.cfg.Hosts, f.cfg.Clouds
	extra := 0
	if f.cfg.Demo {
		extra = 2
	}
	f.hosts = make([]simHost, n, n+extra)
	f.index = make(map[hostKey]int32, n+extra)
	for i := range n {
		cloud, j := i%clouds, i/clouds
		f.initHost(int32(i), cloud, hostIP(cloud, j))
	}
	if f.cfg.Demo {
		// 0:10.0.0.1 is host 0 already; add 1:10.0.0.1 (the documents'
		// second host) and 0:127.0.0.1.
		for _, h := range []struct {
			cloud int
			ip    netip.Addr
		}{{1, netip.AddrFrom4([4]byte{10, 0, 0, 1})}, {0, netip.AddrFrom4([4]byte{127, 0, 0, 1})}} {
			if _, ok := f.index[keyOf(h.cloud, h.ip)]; ok {
				continue
			}
			f.hosts = append(f.hosts, simHost{})
			f.initHost(int32(len(f.hosts)-1), h.cloud, h.ip)
		}
		for _, h := range f.demoHosts() {
			f.hosts[h].demo = true
			f.hosts[h].kind = kindNormal
		}
	}
}

func keyOf(cloud int, ip netip.Addr) hostKey {
	b := ip.As4()
	return hostKey{int32(cloud), uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])}
}

func (f *Fleet) initHost(i int32, cloud int, ip netip.Addr) {
	s, u := f.seed, uint64(i)
	h := &f.hosts[i]
	h.host = model.Host{IP: ip.String(), CloudID: cloud}
	switch k := hash01(s, hKind, u); {
	case k < f.cfg.OfflineRate:
		h.kind = kindOffline
	case k < f.cfg.OfflineRate+f.cfg.UnreachableRate:
		h.kind = kindUnreachable
	}
	h.role = uint8(mix(s, hRole, u) % uint64(len(f.roles)))
	h.zone = uint8(mix(s, hZone, u) % 3)
	// Mostly the first distribution, as fleets are.
	switch o := hash01(s, hOS, u); {
	case o < 0.6:
		h.os = 0
	case o < 0.85:
		h.os = 1
	case o < 0.95:
		h.os = 2
	default:
		h.os = 3
	}
	h.rack = uint16(i/int32(40*f.cfg.Clouds)) + 1
	h.memGB = []uint16{8, 16, 32, 64, 128}[mix(s, hMemTotal, u)%5]
	h.rng = mix(s, hRNG, u)
	h.nextPID = int32(300 + mix(s, hPID, u)%20000)
	f.index[keyOf(cloud, ip)] = i
}

// demoHosts returns the indexes of 0:10.0.0.1 and 1:10.0.0.1 (and
// 0:127.0.0.1) when Demo is on.
func (f *Fleet) demoHosts() []int32 {
	var out []int32
	for _, k := range []struct {
		cloud int
		ip    [4]byte
	}{{0, [4]byte{10, 0, 0, 1}}, {1, [4]byte{10, 0, 0, 1}}, {0, [4]byte{127, 0, 0, 1}}} {
		if i, ok := f.index[keyOf(k.cloud, netip.AddrFrom4(k.ip))]; ok {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

func (f *Fleet) addDemoDefs() {
	hosts := f.demoHosts()
	ts := demoTemplates()
	for i := range ts {
		t := &ts[i]
		p := t.process("gse", t.name, "test")
		if slices.ContainsFunc(f.defs, func(d def) bool { return d.proc.Key() == p.Key() }) {
			continue // a configured catalog already has it
		}
		f.defs = append(f.defs, def{proc: p, t: t, role: -1, explicit: hosts, fallback: -1})
	}
}

// placeEverywhere makes sure every generated definition is deployed on at
// least one host, however small the fleet: when its rule picks no host it
// is placed on the first host of its role (or the first host).
func (f *Fleet) placeEverywhere() {
	for d := range f.defs {
		df := &f.defs[d]
		found, first := false, int32(-1)
		for i := range f.hosts {
			if f.deployed(int32(d), int32(i)) {
				found = true
				break
			}
			if first < 0 && (df.role < 0 || int(f.hosts[i].role) == df.role) {
				first = int32(i)
			}
		}
		if !found {
			df.fallback = max(first, 0)
		}
	}
}

// lookup finds a host by cloud area and IP.
func (f *Fleet) lookup(h model.Host) (int32, bool) {
	ip, err := netip.ParseAddr(h.IP)
	if err != nil {
		return 0, false
	}
	ip = ip.Unmap()
	if !ip.Is4() {
		return 0, false
	}
	i, ok := f.index[keyOf(h.CloudID, ip)]
	return i, ok
}

// Owns reports whether Hosts lists h (transport.Owner): a fleet merged
// with the NATS dispatcher (transport.Merged) routes by it instead of
// listing the fleet every 2 s, which now makes a label map for each host.
func (f *Fleet) Owns(h model.Host) bool {
	i, ok := f.lookup(h)
	return ok && f.hosts[i].host == h
}

// deployed reports whether definition d is deployed on host i.
func (f *Fleet) deployed(d int32, i int32) bool {
	df := &f.defs[d]
	if df.explicit != nil {
		_, ok := slices.BinarySearch(df.explicit, i)
		return ok
	}
	if i == df.fallback {
		return true
	}
	if df.role >= 0 && int(f.hosts[i].role) != df.role {
		return false
	}
	return hash01(f.seed, hDeploy, uint64(d), uint64(i)) < df.frac
}

// initial is the state of deployment (i, d) before any operation touched
// it: most running and hosted, some stopped.
func (f *Fleet) initial(i, d int32) procState {
	df := &f.defs[d]
	s, hi, di := f.seed, uint64(i), uint64(d)
	p := procState{key: df.key, procName: df.proc.Spec.Identity.ProcName, def: d, pid: -1}
	p.running, p.hosted, p.pid = f.initialRun(i, d)
	if p.running {
		age := time.Duration(hash01(s, hInitAge, hi, di) * float64(30*24*time.Hour))
		p.started = f.born.Add(-age - time.Minute).UnixNano()
		if p.hosted {
			p.registered = p.started / int64(time.Second)
		}
	}
	p.cpu, p.mem = f.usage(df.t, hash01(s, hCPU, hi, di), hash01(s, hMem, hi, di))
	return p
}

// initialRun is what initial draws of whether deployment (i, d) runs,
// is hosted and its pid (-1 when not running): all a host list shows of
// it (listStatus), drawn without the rest.
func (f *Fleet) initialRun(i, d int32) (running, hosted bool, pid int32) {
	df := &f.defs[d]
	s, hi, di := f.seed, uint64(i), uint64(d)
	r := hash01(s, hInit, hi, di)
	if df.explicit != nil {
		r = 0 // demo processes start out running and hosted
	}
	if r >= 0.9 {
		return false, false, -1
	}
	hosted = df.explicit != nil || hash01(s, hInitHosted, hi, di) < 0.95
	return true, hosted, int32(300 + mix(s, hPID, hi, di)%4_000_000)
}

// usage draws a process's typical cpu and mem from its template.
func (f *Fleet) usage(t *tmpl, a, b float64) (float32, float32) {
	cpu, mem := 1.0, 0.5
	var cl, ml float64
	if t != nil {
		cpu, mem, cl, ml = t.cpuUse, t.memUse, t.cpuLmt, t.memLmt
	}
	cpu *= 0.5 + a
	mem *= 0.5 + b
	if cl > 0 {
		cpu = min(cpu, 0.9*cl)
	}
	if ml > 0 {
		mem = min(mem, 0.9*ml)
	}
	return float32(cpu), float32(mem)
}

// Hosts lists the fleet (engine.Inventory). Hosts whose agent is offline or
// unreachable are reported AgentOffline, but Dispatch still behaves as their
// kind says (the engine must not skip them on that basis alone). Each
// host's label map is made for the listing (hostLabels): a host list
// has them put into a map of its own instead (HostLabelsInto).
func (f *Fleet) Hosts(ctx context.Context) ([]model.HostInfo, error) {
	return f.list(ctx, func(_ int, h *simHost, hi *model.HostInfo) { hi.Labels = f.hostLabels(h) })
}

// HostsUnlabelled is Hosts with every host's Labels nil, and
// HostLabelsInto puts host i's labels into m (engine.LabelMaker): a host
// list copies each host's labels into its view's one map, not into a map
// made for each host (~100 ms and 200,000 allocations for 100,000 hosts;
// kept, they were 28 MB). i is the host's place in any listing: the
// fleet's hosts never move.
func (f *Fleet) HostsUnlabelled(ctx context.Context) ([]model.HostInfo, error) {
	return f.list(ctx, func(int, *simHost, *model.HostInfo) {})
}

// HostLabelsInto sets m to host i's labels (engine.LabelMaker): m is
// cleared first.
func (f *Fleet) HostLabelsInto(i int, m map[string]string) {
	clear(m)
	if i < 0 || i >= len(f.hosts) {
		return
	}
	var b [2 * hostLabelKeys]string
	l := f.appendLabelSet(b[:0], &f.hosts[i])
	for j := 0; j < len(l); j += 2 {
		m[l[j]] = l[j+1]
	}
}

// list lists the fleet as Hosts does, without labels; each is called
// with every host (and its place) after its HostInfo is made, without
// the host's lock.
func (f *Fleet) list(ctx context.Context, each func(i int, h *simHost, hi *model.HostInfo)) ([]model.HostInfo, error) {
	out := make([]model.HostInfo, len(f.hosts))
	now := f.now().Unix()
	for i := range f.hosts {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("list hosts: %w", err)
			}
		}
		h := &f.hosts[i]
		h.mu.Lock()
		off := h.away()
		if h.agentID == "" {
			h.agentID = AgentID(h.host)
		}
		id := h.agentID
		h.mu.Unlock()
		hi := &out[i]
		*hi = model.HostInfo{Host: h.host, State: model.AgentOnline, LastSeen: now, Version: AgentVersion, AgentID: id}
		if off {
			hi.State = model.AgentOffline
			hi.LastSeen = f.born.Add(-time.Duration(mix(f.seed, hKind, uint64(i))%86400) * time.Second).Unix()
		}
		each(i, h, hi)
	}
	return out, nil
}

// HostCounts is the number of hosts Hosts lists and of those it reports
// online (engine.HostCounter), without listing them.
func (f *Fleet) HostCounts(ctx context.Context) (total, online int, err error) {
	for i := range f.hosts {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return 0, 0, fmt.Errorf("count hosts: %w", err)
			}
		}
		h := &f.hosts[i]
		h.mu.Lock()
		if !h.away() {
			online++
		}
		h.mu.Unlock()
	}
	return len(f.hosts), online, nil
}

// hostLabelKeys is the number of labels a simulated host has.
const hostLabelKeys = 5

// hostLabels is h's labels, made anew at each call from the host's
// generated fields (its compact form) and the fleet's tables of their
// texts: the caller may keep the map. Kept a map a host, the labels of
// 100,000 hosts (~87,000 distinct sets, mostly by rack) were 28 MB of
// the embedded console's live heap after select-all and an op
// (BenchmarkSelectAllOp100k).
func (f *Fleet) hostLabels(h *simHost) map[string]string {
	var b [2 * hostLabelKeys]string
	return model.LabelSet(f.appendLabelSet(b[:0], h)).Map() // never nil: a host has hostLabelKeys labels
}

// appendLabelSet appends h's labels to dst as a model.LabelSet's pairs
// (key, value in turn, by key), every text one of the fleet's.
func (f *Fleet) appendLabelSet(dst []string, h *simHost) []string {
	zone := ""
	if c := h.host.CloudID; c < len(f.zones) {
		zone = f.zones[c][h.zone%3]
	} else {
		zone = zoneName(c, h.zone)
	}
	rack := ""
	if int(h.rack) < len(f.racks) {
		rack = f.racks[h.rack]
	} else {
		rack = rackName(h.rack)
	}
	return append(dst, "mem", memLabels[h.memGB], "os", osNames[h.os], "rack", rack, "role", f.roles[h.role], "zone", zone)
}

// rackName is rack r's label: r007, as racks are written.
func rackName(r uint16) string {
	if r < 100 {
		return "r" + strconv.Itoa(1000 + int(r))[1:]
	}
	return "r" + strconv.Itoa(int(r))
}

var memLabels = map[uint16]string{8: "8G", 16: "16G", 32: "32G", 64: "64G", 128: "128G"}

// Definitions returns the process definitions the fleet was generated
// with, each with the hosts it is deployed on (to seed the registry),
// made anew at each call (a fleet is seeded once: kept, the host lists of
// 100,000 hosts were 13 MB the registry holds its own copy of).
func (f *Fleet) Definitions() []model.ProcessDef {
	out := make([]model.ProcessDef, len(f.defs))
	born := f.born.Unix()
	for d := range f.defs {
		out[d] = model.ProcessDef{Process: f.defs[d].proc.Clone(), Updated: born}
		var hosts []model.Host
		if ex := f.defs[d].explicit; ex != nil {
			for _, i := range ex {
				hosts = append(hosts, f.hosts[i].host)
			}
		} else {
			// Presize from the expected share to avoid regrowing big slices.
			share := f.defs[d].frac
			if f.defs[d].role >= 0 {
				share /= float64(len(f.roles))
			}
			hosts = make([]model.Host, 0, int(share*float64(len(f.hosts))*1.1)+16)
			for i := range f.hosts {
				if f.deployed(int32(d), int32(i)) {
					hosts = append(hosts, f.hosts[i].host)
				}
			}
		}
		out[d].Hosts = hosts
	}
	return out
}

// HostSnapshot is one host's state, for tests and demos.
type HostSnapshot struct {
	Host   model.Host
	Labels map[string]string
	// Kind is "normal", "offline" (never answers) or "unreachable".
	Kind string
	// Offline is set by SetOffline.
	Offline bool
	// Procs is every process the host knows (its deployments, and those
	// operations created), sorted by key.
	Procs []model.ProcStatus
}

// Proc returns the status of the process with key, if the host knows it.
func (s HostSnapshot) Proc(key string) (model.ProcStatus, bool) {
	for _, p := range s.Procs {
		if p.ProcKey == key {
			return p, true
		}
	}
	return model.ProcStatus{}, false
}

// Host returns a snapshot of one host's per-process state.
func (f *Fleet) Host(h model.Host) (HostSnapshot, bool) {
	i, ok := f.lookup(h)
	if !ok {
		return HostSnapshot{}, false
	}
	sh := &f.hosts[i]
	now := f.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return HostSnapshot{Host: sh.host, Labels: f.hostLabels(sh), Kind: [...]string{"normal", "offline", "unreachable"}[sh.kind],
		Offline: sh.offline, Procs: f.procStatuses(nil, i, sh, now)}, true
}

// procStatuses appends to dst the status of every process host i knows (its
// deployments, and those operations created), sorted by key. sh.mu must be held.
func (f *Fleet) procStatuses(dst []model.ProcStatus, i int32, sh *simHost, now time.Time) []model.ProcStatus {
	// A host has a few processes: a scan instead of a set (listing 100,000
	// hosts asks this 100,000 times).
	known := func(key string) bool {
		for _, p := range sh.procs {
			if p.key == key {
				return true
			}
		}
		return false
	}
	var buf [32]int32
	untouched := buf[:0] // deployments no operation touched yet
	for d := range f.defs {
		if f.deployed(int32(d), i) && !known(f.defs[d].key) {
			untouched = append(untouched, int32(d))
		}
	}
	start := len(dst)
	dst = slices.Grow(dst, len(sh.procs)+len(untouched))
	for _, p := range sh.procs {
		dst = append(dst, f.status(sh, p, now))
	}
	for _, d := range untouched {
		p := f.initial(i, d)
		dst = append(dst, f.status(sh, &p, now))
	}
	out := dst[start:]
	byKey := func(a, b model.ProcStatus) int { return strings.Compare(a.ProcKey, b.ProcKey) }
	if !slices.IsSortedFunc(out, byKey) { // an untouched host's are in definition order: sorted
		slices.SortFunc(out, byKey)
	}
	return dst
}

// AppendListStatuses appends to dst what Statuses(h) reports of each
// process keys names (engine.ListStatusAppender), in keys' order, a key h
// reports nothing of left out; of each status only ProcKey, State, PID,
// Hosted and ReportTime are filled, what a host list shows and the
// engine's choice of the newer status reads. A listing of 100,000 hosts
// spent most of its time here building every process's whole status
// (usage, times, command line, sorted by key) that the list dropped.
func (f *Fleet) AppendListStatuses(dst []model.ProcStatus, h model.Host, keys []string) []model.ProcStatus {
	i, ok := f.lookup(h)
	if !ok {
		return dst
	}
	sh := &f.hosts[i]
	now := f.now().Unix()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.away() {
		return dst
	}
	for _, key := range keys {
		if p := sh.find(key); p != nil {
			st, pid := p.state()
			dst = append(dst, model.ProcStatus{ProcKey: p.key, State: st, PID: pid, Hosted: p.hosted, ReportTime: now})
			continue
		}
		d, known := f.defKey[key]
		if !known || !f.deployed(d, i) {
			continue
		}
		st, pid := model.ProcStopped, -1
		running, hosted, p := f.initialRun(i, d)
		if running {
			st, pid = model.ProcRunning, int(p)
		}
		dst = append(dst, model.ProcStatus{ProcKey: f.defs[d].key, State: st, PID: pid, Hosted: hosted, ReportTime: now})
	}
	return dst
}

// SetOffline takes a host away (its agent stops answering: Dispatch blocks
// until the caller's deadline) or brings it back; bringing it back also
// clears an offline or unreachable kind drawn from the profile. It emits
// EventAgentOffline / EventAgentOnline when the state changes.
func (f *Fleet) SetOffline(h model.Host, offline bool) {
	if i, ok := f.lookup(h); ok {
		f.setOffline(i, offline)
	}
}

// Len is the number of hosts.
func (f *Fleet) Len() int { return len(f.hosts) }

// Seed is the seed the fleet was generated with (the drawn one when the
// config gave 0).
func (f *Fleet) Seed() int64 { return int64(f.seed) }

// Config is the effective configuration (defaults filled in).
func (f *Fleet) Config() config.SimulatorConfig {
	c := f.cfg
	c.Namespaces = slices.Clone(c.Namespaces)
	return c
}

// Statuses reports the current state of a host's processes, as an agent's
// heartbeat would (engine.StatusSource). Hosts whose agent is offline or
// unreachable report nothing: the engine keeps their last known state.
func (f *Fleet) Statuses(h model.Host) []model.ProcStatus {
	return f.AppendStatuses(nil, h)
}

// AppendStatuses appends what Statuses(h) returns to dst
// (engine.StatusAppender): a listing of every host reuses one buffer.
func (f *Fleet) AppendStatuses(dst []model.ProcStatus, h model.Host) []model.ProcStatus {
	i, ok := f.lookup(h)
	if !ok {
		return dst
	}
	sh := &f.hosts[i]
	now := f.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.away() {
		return dst
	}
	return f.procStatuses(dst, i, sh, now)
}
