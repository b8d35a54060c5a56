package ui

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"gseproc/model"
)

// TestResultsGiveBackWhatWasPut: the watch's compact rows give every
// result back whole, field for field, whatever repeats between rows and
// however often a row is replaced (with and without a status); a row is
// one (host, process).
func TestResultsGiveBackWhatWasPut(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 11, 23, 22, 0, 0, 123456789, time.UTC)
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	gen := func() model.Result {
		r := model.Result{
			TaskID: pick("t-1", "t-2"), Seq: rng.Int64N(1 << 40), Host: model.Host{IP: fmt.Sprintf("10.0.%d.%d", rng.IntN(4), rng.IntN(250)), CloudID: rng.IntN(2)},
			ProcKey: pick("web:nginx", "gse:agent", "db:mysql"), ValueKey: pick("", "vk-1", "vk-2"), AgentID: pick("", "0200000000000000000000abcd"),
			Op: model.OpType(rng.IntN(5) + 1), State: model.ResultState(pick(string(model.StatePending), string(model.StateRunning), string(model.StateSuccess), string(model.StateFailed))),
			Code: pick2(rng, 0, 65535, -7, 1<<40), Message: pick("", "ok", fmt.Sprintf("unique %d", rng.Int())),
			Proc:   model.ResultProc{ProcName: pick("nginx", "agent"), SetupPath: pick("", "/opt/x"), FuncID: pick("", "f1"), InstanceID: pick("", "1")},
			Hosted: rng.IntN(2) == 0,
		}
		if rng.IntN(3) > 0 {
			r.Started = t0.Add(time.Duration(rng.Int64N(int64(time.Hour))))
			r.Finished = r.Started.Add(time.Duration(rng.Int64N(int64(time.Minute))))
		}
		if rng.IntN(2) == 0 {
			r.Status = &model.ProcStatus{ProcKey: r.ProcKey, ProcName: r.Proc.ProcName, State: model.ProcState(pick(string(model.ProcRunning), string(model.ProcStopped))),
				PID: rng.IntN(1 << 22), Hosted: rng.IntN(2) == 0, RegisterTime: rng.Int64(), LastStartTime: rng.Int64(), ReportTime: rng.Int64(),
				CPU: rng.Float64() * 100, Mem: rng.Float64(), MemRSS: rng.Uint64(), Restarts: rng.IntN(9), ExitStatus: rng.IntN(256) - 128,
				Version: pick("", "1.2.3"), Cmdline: pick("/bin/x -a", "nginx: master"), Threads: rng.IntN(64), Message: pick("", "note")}
			if rng.IntN(2) == 0 {
				r.Status.StartTime = t0.Add(-time.Duration(rng.Int64N(int64(24 * time.Hour))))
			}
		}
		return r
	}
	// Statuses copied compact, and kept as handed over (a backend that
	// shares them: backend.SharesStatuses).
	for _, keep := range []bool{false, true} {
		rs := newResults(0, false, keep)
		want := map[pairKey]model.Result{}
		for range 5000 {
			r := gen()
			i, fresh := rs.put(&r)
			k := rs.rows[i].pairKey()
			if _, seen := want[k]; seen == fresh {
				t.Fatalf("put %s %s: new %v, seen before %v", r.Host, r.ProcKey, fresh, seen)
			}
			want[k] = r
			if j, ok := rs.find(r.Host, r.ProcKey); !ok || j != i {
				t.Fatalf("find %s %s: %d %v, put in %d", r.Host, r.ProcKey, j, ok, i)
			}
		}
		if rs.len() != len(want) {
			t.Fatalf("%d rows for %d (host, process) pairs", rs.len(), len(want))
		}
		for i := range rs.len() {
			w := want[rs.rows[i].pairKey()]
			if st := rs.result(i).Status; keep && st != w.Status {
				t.Fatalf("keep: row %d's status %p, not the one put %p", i, st, w.Status)
			}
			got, w := inUTC(rs.result(i)), inUTC(w)
			if !reflect.DeepEqual(got, w) {
				t.Fatalf("keep %v, row %d:\n got %+v %+v\nwant %+v %+v", keep, i, got, got.Status, w, w.Status)
			}
			if rs.state(i) != w.State || rs.host(i) != w.Host || rs.proc(i) != w.ProcKey || rs.duration(i) != w.Duration() ||
				rs.rank(i) != int8(rowRank(&w)) || rs.message(i) != w.Message || rs.code(i) != w.Code {
				t.Fatalf("keep %v, row %d: accessors disagree with %+v", keep, i, w)
			}
			var wst model.ProcState
			var wmsg string
			if w.Status != nil {
				wst, wmsg = w.Status.State, w.Status.Message
			}
			if rs.statusState(i) != wst || rs.statusMessage(i) != wmsg {
				t.Fatalf("keep %v, row %d: status state %q message %q, want %q %q", keep, i, rs.statusState(i), rs.statusMessage(i), wst, wmsg)
			}
			k, ok := rs.statusKey(i)
			if ok != (w.Status != nil) || (ok && (k.pid != int64(w.Status.PID) || k.start != unixNano(w.Status.StartTime) ||
				k.cpu != w.Status.CPU || k.mem != w.Status.Mem || k.up != w.Status.State.Up())) {
				t.Fatalf("keep %v, row %d: status key %+v %v, want of %+v", keep, i, k, ok, w.Status)
			}
		}
		if _, ok := rs.find(model.Host{IP: "10.9.9.9"}, "web:nginx"); ok {
			t.Fatal("found a host never put")
		}
		if n := len(rs.stats) + len(rs.kept); n > rs.len() {
			t.Fatalf("%d statuses kept for %d rows: a replaced row's status is written over", n, rs.len())
		}
		if keep && len(rs.stats) != 0 || !keep && len(rs.kept) != 0 {
			t.Fatalf("keep %v: %d statuses copied, %d kept", keep, len(rs.stats), len(rs.kept))
		}
	}
}

func pick2(rng *rand.Rand, v ...int) int { return v[rng.IntN(len(v))] }

// inUTC is r with its times in UTC and no monotonic reading, to compare.
func inUTC(r model.Result) model.Result {
	utc := func(t time.Time) time.Time {
		if t.IsZero() {
			return time.Time{}
		}
		return t.UTC()
	}
	r.Started, r.Finished = utc(r.Started), utc(r.Finished)
	if r.Status != nil {
		st := *r.Status
		st.StartTime = utc(st.StartTime)
		r.Status = &st
	}
	return r
}

// TestHostTabOrdersAsTheModel: the watch's host table gives every host
// back as it was put and orders hosts as model.HostOrder does, plain
// IPv4 hosts (held as 8-byte keys) among IPv6, mapped, misspelt and
// text hosts and cloud ids beyond the model's limits.
func TestHostTabOrdersAsTheModel(t *testing.T) {
	hosts := []model.Host{
		{IP: "10.0.0.2"}, {IP: "10.0.0.10"}, {IP: "10.0.0.2", CloudID: 1}, {IP: "9.255.255.255", CloudID: 1},
		{IP: "255.255.255.255"}, {IP: "0.0.0.0"}, {IP: "::ffff:10.0.0.2"}, {IP: "::ffff:10.0.0.3", CloudID: 1},
		{IP: "fe80::1"}, {IP: "2001:db8::1", CloudID: 1}, {IP: "010.0.0.1"}, {IP: "host-a"}, {IP: "10.0.0.1", CloudID: -1},
		{IP: "10.0.0.1", CloudID: model.MaxCloudID}, {IP: "10.0.0.1", CloudID: model.MaxCloudID + 1}, {IP: ""}, {IP: "10.0.0.2 "},
	}
	var tab hostTab
	ids := make([]uint32, len(hosts))
	for i, h := range hosts {
		ids[i] = tab.id(h)
		if again := tab.id(h); again != ids[i] {
			t.Fatalf("%q: id %d, then %d", h, ids[i], again)
		}
	}
	if tab.len() != len(hosts) {
		t.Fatalf("%d hosts held for %d", tab.len(), len(hosts))
	}
	for i, h := range hosts {
		if got := tab.host(ids[i]); got != h {
			t.Fatalf("host %d: %+v, put %+v", i, got, h)
		}
		if id, ok := tab.find(h); !ok || id != ids[i] {
			t.Fatalf("find %+v: %d %v", h, id, ok)
		}
		for j, g := range hosts {
			if got, want := tab.compare(ids[i], ids[j]), model.CompareHosts(h, g); got != want {
				t.Fatalf("compare %+v %+v: %d, want %d", h, g, got, want)
			}
		}
	}
	if _, ok := tab.find(model.Host{IP: "10.0.0.3"}); ok {
		t.Fatal("found a host never put")
	}
	if _, plain := plainKey(model.Host{IP: "10.0.0.2"}); !plain {
		t.Fatal("a plain IPv4 host is not held as a key")
	}
}

// TestRowIndex: the watch's row index finds every row by its (host,
// process) and no pair never added, whether sized for its rows at first
// or grown from nothing.
func TestRowIndex(t *testing.T) {
	for _, n := range []int{0, 1, 30_000} {
		var x rowIndex
		x.grow(nil, n)
		var rows []compactResult
		for h := range uint32(300) {
			for p := range uint32(100) {
				if (h+p)%3 == 0 {
					continue // pairs of a host and a process each seen, never added
				}
				k := pairKey{h, p}
				if _, ok := x.find(rows, k); ok {
					t.Fatalf("n %d: %v found before it was added", n, k)
				}
				rows = append(rows, compactResult{host: h, proc: p})
				x.add(rows, len(rows)-1)
			}
		}
		if 2*x.n > len(x.slots) {
			t.Fatalf("n %d: %d rows in %d slots: more than half full", n, x.n, len(x.slots))
		}
		for i, c := range rows {
			if j, ok := x.find(rows, c.pairKey()); !ok || j != i {
				t.Fatalf("n %d: row %d (%v) found at %d %v", n, i, c.pairKey(), j, ok)
			}
		}
		for h := range uint32(300) {
			for p := range uint32(100) {
				if (h+p)%3 == 0 {
					if j, ok := x.find(rows, pairKey{h, p}); ok {
						t.Fatalf("n %d: (%d, %d) never added, found at %d", n, h, p, j)
					}
				}
			}
		}
	}
}
