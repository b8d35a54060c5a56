package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/model"
)

// TestBeatPlan: which beats of one host are full, as a table of beats.
func TestBeatPlan(t *testing.T) {
	type beat struct {
		force bool
		fp    uint64
		full  bool
	}
	tests := []struct {
		name         string
		every, phase int
		beats        []beat
	}{
		{"first beat is full, then keepalives until the period", 3, 0, []beat{
			{false, 1, true}, {false, 1, false}, {false, 1, true}, {false, 1, false}, {false, 1, false}, {false, 1, true}}},
		{"a change is full at once; the period keeps its schedule", 3, 0, []beat{
			{false, 1, true}, {false, 2, true}, {false, 2, true}, {false, 2, false}, {false, 2, false}, {false, 2, true}}},
		{"forced (connect, hello, late events) is full", 5, 0, []beat{
			{false, 1, true}, {true, 1, true}, {false, 1, false}}},
		{"a phase shifts the periodic full beats", 4, 1, []beat{
			{false, 1, true}, {false, 1, false}, {false, 1, true}, {false, 1, false}, {false, 1, false}, {false, 1, false}, {false, 1, true}}},
		{"every 1: always full", 1, 0, []beat{{false, 1, true}, {false, 1, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newBeatPlan(tt.every, tt.phase)
			for i, b := range tt.beats {
				if got := p.next(b.force, b.fp); got != b.full {
					t.Fatalf("beat %d: full=%v, want %v", i, got, b.full)
				}
			}
		})
	}
}

// TestHeartbeatPrint: usage figures do not change the fingerprint; state,
// pid, labels and version do.
func TestHeartbeatPrint(t *testing.T) {
	hi := model.HostInfo{Host: h1, Labels: map[string]string{"a": "1", "b": "2"}, Version: "1"}
	st := model.ProcStatus{ProcKey: "ns:p", State: model.ProcRunning, PID: 42, CPU: 1, Mem: 2, Threads: 3, ReportTime: 4}
	base := heartbeatPrint(hi, []model.ProcStatus{st})
	usage := st
	usage.CPU, usage.Mem, usage.MemRSS, usage.Threads, usage.ReportTime = 9, 9, 9, 9, 9
	if heartbeatPrint(hi, []model.ProcStatus{usage}) != base {
		t.Error("usage figures changed the fingerprint")
	}
	stopped := st
	stopped.State, stopped.PID = model.ProcStopped, -1
	relabelled := hi
	relabelled.Labels = map[string]string{"a": "1", "b": "3"}
	upgraded := hi
	upgraded.Version = "2"
	for name, fp := range map[string]uint64{
		"state":   heartbeatPrint(hi, []model.ProcStatus{stopped}),
		"labels":  heartbeatPrint(relabelled, []model.ProcStatus{st}),
		"version": heartbeatPrint(upgraded, []model.ProcStatus{st}),
		"no proc": heartbeatPrint(hi, nil),
	} {
		if fp == base {
			t.Errorf("a change of %s kept the fingerprint", name)
		}
	}
}

// TestHeartbeatPrintStable: the print does not depend on the order a
// host's labels are walked in (a map's, different each time), and values
// swapped between keys, or a pair split differently, change it.
func TestHeartbeatPrintStable(t *testing.T) {
	labels := map[string]string{"zone": "z1", "os": "linux", "rack": "r007", "role": "web", "mem": "16G"}
	hi := model.HostInfo{Host: h1, Labels: labels, Version: "1", AgentID: "0:10.0.0.1", State: model.AgentOnline}
	base := heartbeatPrint(hi, nil)
	for range 200 {
		if heartbeatPrint(hi, nil) != base {
			t.Fatal("the same host printed twice differs")
		}
	}
	for name, other := range map[string]map[string]string{
		"swapped values": {"zone": "linux", "os": "z1", "rack": "r007", "role": "web", "mem": "16G"},
		"split":          {"zone": "z1", "os": "linux", "rack": "r007", "role": "web", "mem1": "6G"},
		"one fewer":      {"zone": "z1", "os": "linux", "rack": "r007", "role": "web"},
	} {
		o := hi
		o.Labels = other
		if heartbeatPrint(o, nil) == base {
			t.Errorf("labels %s: same print", name)
		}
	}
}

// changingAgent is a fakeAgent whose process state the test sets.
type changingAgent struct {
	*fakeAgent
	mu    sync.Mutex
	state model.ProcState
}

func (a *changingAgent) Statuses() []model.ProcStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return []model.ProcStatus{{ProcKey: "ns:p", State: a.state, PID: 42, Hosted: true}}
}

func (a *changingAgent) set(s model.ProcState) {
	a.mu.Lock()
	a.state = s
	a.mu.Unlock()
}

// TestHeartbeatKeepalives: an agent whose state does not change sends
// keepalives (empty messages) between full heartbeats; the server keeps
// the host online and what the last full one said; a change is sent in
// full at the next beat; a server that starts later learns the whole
// host at once (its hello asks for a full beat).
func TestHeartbeatKeepalives(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	nc := serverConn(t, e)
	var mu sync.Mutex
	var full, keep int
	sub, err := nc.Subscribe(HeartbeatSubject(mustID(t, h1)), func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if len(m.Data) == 0 {
			keep++
		} else {
			full++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	d := newDispatcher(t, nc, DispatcherOptions{OfflineAfter: 3 * time.Second})
	a := &changingAgent{fakeAgent: echoAgent(h1), state: model.ProcRunning}
	runAgent(t, e.ClientURL(), ClientOptions{}, a, ServeOptions{HeartbeatInterval: 50 * time.Millisecond, FullEvery: 1000})
	counts := func() (int, int) { mu.Lock(); defer mu.Unlock(); return full, keep }
	eventually(t, "keepalives", 30*time.Second, func() bool { _, k := counts(); return k >= 20 })
	if f, _ := counts(); f > 2 { // the first beat, maybe the hello's
		t.Errorf("%d full heartbeats while nothing changed", f)
	}
	if s := hostState(d, h1); s != model.AgentOnline {
		t.Fatalf("state %q while sending keepalives", s)
	}
	if on, known := d.Count(); on != 1 || known != 1 {
		t.Fatalf("count: %d online of %d known, want 1 of 1", on, known)
	}
	if st := d.Statuses(h1); len(st) != 1 || st[0].State != model.ProcRunning {
		t.Fatalf("statuses %+v, want the last full beat's", st)
	}
	a.set(model.ProcStopped)
	eventually(t, "the change reaches the server", 30*time.Second, func() bool {
		st := d.Statuses(h1)
		return len(st) == 1 && st[0].State == model.ProcStopped
	})

	late := newDispatcher(t, serverConn(t, e), DispatcherOptions{OfflineAfter: 3 * time.Second})
	eventually(t, "a later server learns the host whole", 30*time.Second, func() bool {
		hs, _ := late.Hosts(context.Background())
		return len(hs) == 1 && hs[0].State == model.AgentOnline && hs[0].Labels["role"] == "web" && len(late.Statuses(h1)) == 1
	})
}

// TestKeepaliveFromUnknownHost: a server that missed a host's full beat
// lists it, online, from its keepalives.
func TestKeepaliveFromUnknownHost(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	nc := serverConn(t, e)
	if err := nc.Publish(HeartbeatSubject(mustID(t, h1)), nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "online from a keepalive", 30*time.Second, func() bool { return hostState(d, h1) == model.AgentOnline })
}

// TestHeartbeatLabelsByTheLabelRule: a heartbeat's host labels are
// untrusted (an agent, or whoever holds its credential): those the label
// rule refuses (an escape sequence that would drive an operator's
// terminal, a selector's separator in a key, an over-long value) are left
// out at the entrance; the others and the host itself are taken.
func TestHeartbeatLabelsByTheLabelRule(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	hb, err := json.Marshal(Heartbeat{Time: time.Now(), Info: model.HostInfo{Host: h1, Labels: map[string]string{
		"role":  "web",
		"osc":   "\x1b]52;c;ZXZpbA==\a",
		"a=b":   "c",
		"long":  strings.Repeat("v", 257),
		"\x1b[": "k",
	}}})
	if err != nil {
		t.Fatal(err)
	}
	nc := serverConn(t, e)
	if err := nc.Publish(HeartbeatSubject(mustID(t, h1)), hb); err != nil {
		t.Fatal(err)
	}
	got := onlyHostOnline(t, d).Labels
	if want := map[string]string{"role": "web"}; !maps.Equal(got, want) {
		t.Fatalf("labels %q, want %q", got, want)
	}
}

// TestHeartbeatLabelCountBounded: a heartbeat's host labels are at most
// model.MaxLabels, the first by key (the same at every heartbeat); the
// excess is left out and logged with why, and the host is taken. An agent
// could send thousands, copied into every host listing and selector match.
func TestHeartbeatLabelCountBounded(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	var logged strings.Builder
	var mu sync.Mutex
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))})
	labels := make(map[string]string, 1000)
	for i := range 1000 {
		labels[fmt.Sprintf("k%04d", i)] = "v"
	}
	hb, err := json.Marshal(Heartbeat{Time: time.Now(), Info: model.HostInfo{Host: h1, Labels: labels}})
	if err != nil {
		t.Fatal(err)
	}
	if err := serverConn(t, e).Publish(HeartbeatSubject(mustID(t, h1)), hb); err != nil {
		t.Fatal(err)
	}
	got := onlyHostOnline(t, d).Labels
	if len(got) != model.MaxLabels || got["k0000"] != "v" || got[fmt.Sprintf("k%04d", model.MaxLabels-1)] != "v" {
		t.Fatalf("%d labels kept, want the first %d by key", len(got), model.MaxLabels)
	}
	mu.Lock()
	log := logged.String()
	mu.Unlock()
	if !strings.Contains(log, "1000 labels, more than 64") {
		t.Fatalf("log %q does not say why labels were left out", log)
	}
}

// onlyHostOnline waits until d lists one host, online, and returns it.
func onlyHostOnline(t *testing.T, d *Dispatcher) model.HostInfo {
	t.Helper()
	var hi model.HostInfo
	eventually(t, "the host listed", 30*time.Second, func() bool {
		hs, _ := d.Hosts(context.Background())
		if len(hs) != 1 || hs[0].State != model.AgentOnline {
			return false
		}
		hi = hs[0]
		return true
	})
	return hi
}

// lockedWriter is w, written under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestCheckLabels(t *testing.T) {
	ok := map[string]string{"role": "web", "zone": "a\tb", "empty": ""}
	if kept, err := checkLabels(ok); err != nil || !maps.Equal(kept, ok) {
		t.Fatalf("valid labels: %v %v", kept, err)
	}
	for _, tc := range []struct {
		key, val, why string
	}{
		{"osc", "\x1b]0;x\a", "control character"},
		{"nl", "a\nb", "newline"},
		{"a,b", "c", "'=' or ','"},
		{" ", "c", "blank"},
		{"long", strings.Repeat("v", 257), "longer than 256"},
		{strings.Repeat("k", 129), "v", "longer than 128"},
	} {
		in := map[string]string{"role": "web", tc.key: tc.val}
		kept, err := checkLabels(in)
		if err == nil || !strings.Contains(err.Error(), tc.why) || !maps.Equal(kept, map[string]string{"role": "web"}) {
			t.Errorf("%q=%q: kept %q, err %v; want only role kept and %q", tc.key, tc.val, kept, err, tc.why)
		}
	}

	// The count: the first MaxLabels valid ones by key, the refused named
	// up to refusedNamed and then counted.
	many := map[string]string{}
	for i := range model.MaxLabels + 5 {
		many[fmt.Sprintf("k%03d", i)] = "v"
	}
	for i := range refusedNamed + 3 {
		many[fmt.Sprintf("bad%02d", i)] = "\x1b"
	}
	kept, err := checkLabels(many)
	if len(kept) != model.MaxLabels || kept["k000"] != "v" || kept[fmt.Sprintf("k%03d", model.MaxLabels-1)] != "v" {
		t.Fatalf("kept %d labels %v, want k000..k%03d", len(kept), slices.Sorted(maps.Keys(kept)), model.MaxLabels-1)
	}
	if err == nil || !strings.Contains(err.Error(), "69 labels, more than 64: the 5 after the first 64 by key left out") ||
		!strings.Contains(err.Error(), "3 more refused") || strings.Count(err.Error(), "control character") != refusedNamed {
		t.Fatalf("err %v", err)
	}
}

// A heartbeat's process statuses are bounded at the entrance: at most
// model.MaxHostProcs of them kept (the rest counted, not made), their
// texts plain and clipped (model.PlainStatus), the agent's version too;
// the host is taken and why is logged. An agent is untrusted: within the
// 8 MiB payload it could send millions of "{}" statuses, kept for its
// host, and escape sequences for operators' terminals.
func TestHeartbeatStatusesBounded(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	var logged strings.Builder
	var mu sync.Mutex
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))})
	evil := "\x1b]52;c;cm0gLXJmIH4=\a\x1b[2J"
	first := model.ProcStatus{ProcKey: "web:nginx" + evil, ProcName: "nginx", State: model.ProcRunning, PID: 7,
		Version: strings.Repeat("v", 10_000), Cmdline: "/bin/x " + strings.Repeat("a", 100_000), Message: "ok" + evil + "\r"}
	head, err := json.Marshal(Heartbeat{Time: time.Now(), Info: model.HostInfo{Host: h1, Version: "2.0" + evil},
		Statuses: []model.ProcStatus{first}})
	if err != nil {
		t.Fatal(err)
	}
	// 200,000 more statuses, "{}" each: 600 KB on the wire.
	const more = 200_000
	hb := append(head[:bytes.LastIndex(head, []byte("]"))], bytes.Repeat([]byte(",{}"), more)...)
	hb = append(hb, "]}"...)
	if err := serverConn(t, e).Publish(HeartbeatSubject(mustID(t, h1)), hb); err != nil {
		t.Fatal(err)
	}
	hi := onlyHostOnline(t, d)
	sts := d.Statuses(h1)
	if len(sts) != model.MaxHostProcs {
		t.Fatalf("%d statuses kept, want %d", len(sts), model.MaxHostProcs)
	}
	got := sts[0]
	if got.ProcKey != "web:nginx" || got.Message != "ok" || got.PID != 7 || got.State != model.ProcRunning {
		t.Errorf("first status kept as %q %q pid %d %s", got.ProcKey, got.Message, got.PID, got.State)
	}
	if len(got.Cmdline) != model.MaxCmdline || !strings.HasPrefix(got.Cmdline, "/bin/x aaa") || !strings.HasSuffix(got.Cmdline, "...") {
		t.Errorf("cmdline kept with %d bytes, want %d ending in ...", len(got.Cmdline), model.MaxCmdline)
	}
	if len(got.Version) != model.MaxStatusText {
		t.Errorf("version kept with %d bytes, want %d", len(got.Version), model.MaxStatusText)
	}
	if hi.Version != "2.0" {
		t.Errorf("agent version kept as %q", hi.Version)
	}
	mu.Lock()
	log := logged.String()
	mu.Unlock()
	for _, want := range []string{fmt.Sprintf("left_out=%d", more+1-model.MaxHostProcs), "statuses=1 first=web:nginx field=proc", "agent version cleaned"} {
		if !strings.Contains(log, want) {
			t.Errorf("log does not say %q: %s", want, log)
		}
	}
}

// decodeHeartbeat keeps the first model.MaxHostProcs statuses and counts
// the others, by the scanner and by its fallback (an escape) alike.
func TestDecodeHeartbeatStatusesBounded(t *testing.T) {
	const n = model.MaxHostProcs + 904
	sts := make([]model.ProcStatus, n)
	for i := range sts {
		sts[i] = model.ProcStatus{ProcKey: fmt.Sprintf("ns:p%05d", i), PID: i}
	}
	for _, msg := range []string{"plain", "with an \x1b escape"} {
		sts[0].Message = msg
		b, err := json.Marshal(Heartbeat{Info: model.HostInfo{Host: model.Host{IP: "10.0.0.1"}}, Statuses: sts})
		if err != nil {
			t.Fatal(err)
		}
		hb, err := decodeHeartbeat(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(hb.Statuses) != model.MaxHostProcs || hb.left != n-model.MaxHostProcs ||
			!reflect.DeepEqual(hb.Statuses, sts[:model.MaxHostProcs]) {
			t.Fatalf("%s: %d statuses, %d left out; want the first %d, %d left out", msg, len(hb.Statuses), hb.left, model.MaxHostProcs, n-model.MaxHostProcs)
		}
	}
}

// A usual heartbeat's statuses pass checkStatuses unchanged, without an
// allocation: a server takes 1,700 full heartbeats a second at 100,000
// hosts.
func TestCheckStatusesUsualFree(t *testing.T) {
	b := heartbeatSamples(t)[0]
	hb, err := decodeHeartbeat(b)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(hb.Statuses)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if n := testing.AllocsPerRun(100, func() { checkStatuses(log, "s", &hb) }); n != 0 {
		t.Errorf("%v allocations a usual heartbeat", n)
	}
	if !reflect.DeepEqual(hb.Statuses, want) {
		t.Errorf("a usual heartbeat's statuses changed: %+v", hb.Statuses)
	}
}

// TestHostsOrderKept: the order Hosts keeps between listings (sorted
// once) takes in a host heard after a listing, and a configured host
// keeps its place when its agent is heard: every listing is by cloud
// then IP, each host once.
func TestHostsOrderKept(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{OfflineAfter: time.Hour,
		StaticHosts: []model.HostInfo{{Host: model.Host{CloudID: 1, IP: "10.0.0.5"}}, {Host: model.Host{IP: "10.0.0.20"}}}})
	beat := func(h model.Host) {
		t.Helper()
		data, err := json.Marshal(Heartbeat{Info: model.HostInfo{Host: h, AgentID: "a-" + h.IP, Version: "1"}, Interval: 5 * time.Second, Full: true})
		if err != nil {
			t.Fatal(err)
		}
		d.onHeartbeat(&nats.Msg{Subject: HeartbeatSubject(mustID(t, h)), Data: data})
	}
	list := func(want ...string) {
		t.Helper()
		hs, err := d.Hosts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, hi := range hs {
			got = append(got, hi.Host.String())
		}
		if !slices.Equal(got, want) {
			t.Fatalf("listed %v, want %v", got, want)
		}
	}
	list("0:10.0.0.20", "1:10.0.0.5")
	beat(model.Host{IP: "10.0.0.3"})
	list("0:10.0.0.3", "0:10.0.0.20", "1:10.0.0.5")
	beat(model.Host{CloudID: 1, IP: "10.0.0.5"}) // the configured host, heard
	beat(model.Host{IP: "10.0.0.100"})
	beat(model.Host{CloudID: 1, IP: "10.0.0.1"})
	list("0:10.0.0.3", "0:10.0.0.20", "0:10.0.0.100", "1:10.0.0.1", "1:10.0.0.5")
	list("0:10.0.0.3", "0:10.0.0.20", "0:10.0.0.100", "1:10.0.0.1", "1:10.0.0.5")
}

// TestHostLabelSets: HostLabelSets lists what Hosts lists, each host's
// labels apart as a set equal to Hosts' map (the dispatcher's own labels
// joined, the agent's winning), hosts of the same labels sharing one set,
// a configured host never heard given the dispatcher's labels alone.
func TestHostLabelSets(t *testing.T) {
	for _, own := range []map[string]string{nil, {"bk_biz_id": "2", "zone": "demo"}} {
		t.Run(fmt.Sprintf("own=%v", own), func(t *testing.T) {
			e := startServer(t, testNATS(t), true)
			d := newDispatcher(t, serverConn(t, e), DispatcherOptions{OfflineAfter: time.Hour, Labels: own,
				StaticHosts: []model.HostInfo{{Host: model.Host{IP: "10.0.0.50"}}}})
			web := map[string]string{"app": "web", "zone": "sh-1"}
			for i, labels := range []map[string]string{web, {"app": "db"}, web, nil, maps.Clone(web)} {
				h := model.Host{IP: fmt.Sprintf("10.0.0.%d", i+1)}
				data, err := json.Marshal(Heartbeat{Info: model.HostInfo{Host: h, AgentID: "a-" + h.IP, Version: "1", Labels: labels}, Interval: 5 * time.Second, Full: true})
				if err != nil {
					t.Fatal(err)
				}
				d.onHeartbeat(&nats.Msg{Subject: HeartbeatSubject(mustID(t, h)), Data: data})
			}
			ctx := context.Background()
			want, err := d.Hosts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			hosts, sets, err := d.HostLabelSets(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(hosts) != 6 || len(sets) != len(hosts) {
				t.Fatalf("%d hosts, %d sets; want 6 of each", len(hosts), len(sets))
			}
			for i := range hosts {
				if hosts[i].Labels != nil {
					t.Errorf("host %d: labels %v beside its set", i, hosts[i].Labels)
				}
				got := hosts[i]
				got.Labels = sets[i].Map()
				if !reflect.DeepEqual(got, want[i]) {
					t.Errorf("host %d: %+v with its set, Hosts lists %+v", i, got, want[i])
				}
				if !sortedSet(sets[i]) {
					t.Errorf("host %d: set %v not by key", i, sets[i])
				}
			}
			// 10.0.0.1, 10.0.0.3 and 10.0.0.5 carry the same labels.
			if !sets[0].Same(sets[2]) || !sets[0].Same(sets[4]) {
				t.Errorf("hosts of the same labels hold sets %p %p %p", sets[0], sets[2], sets[4])
			}
			if want := model.MakeLabelSet(own); !slices.Equal(sets[5], want) || !slices.Equal(sets[3], want) {
				t.Errorf("a host without labels: sets %v and %v, want the dispatcher's %v", sets[3], sets[5], want)
			}
		})
	}
}

// sortedSet says whether l's keys are in order, each once.
func sortedSet(l model.LabelSet) bool {
	for i := 2; i+1 < len(l); i += 2 {
		if l[i-2] >= l[i] {
			return false
		}
	}
	return true
}
