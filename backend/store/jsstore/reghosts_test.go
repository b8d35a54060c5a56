package jsstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/nats-io/nats.go/jetstream"

	"gseproc/model"
)

// fakeEntry is a watch delivery.
type fakeEntry struct {
	key string
	val []byte
	rev uint64
	op  jetstream.KeyValueOp
}

func (e fakeEntry) Bucket() string                  { return "procs" }
func (e fakeEntry) Key() string                     { return e.key }
func (e fakeEntry) Value() []byte                   { return e.val }
func (e fakeEntry) Revision() uint64                { return e.rev }
func (e fakeEntry) Created() time.Time              { return time.Time{} }
func (e fakeEntry) Delta() uint64                   { return 0 }
func (e fakeEntry) Operation() jetstream.KeyValueOp { return e.op }

func putEntry(t testing.TB, key string, rev uint64, d model.ProcessDef) fakeEntry {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return fakeEntry{key: key, val: b, rev: rev, op: jetstream.KeyValuePut}
}

// hostsOf is n hosts from 10.0.0.first, cloud 0 (every 7th in cloud 2).
func hostsOf(first, n int) []model.Host {
	hs := make([]model.Host, n)
	for i := range hs {
		k := first + i
		hs[i] = model.Host{IP: fmt.Sprintf("10.%d.%d.%d", k>>16&255, k>>8&255, k&255)}
		if k%7 == 0 {
			hs[i].CloudID = 2
		}
	}
	return hs
}

func sameText(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestHostTextsPack(t *testing.T) {
	big := hostsOf(0, internMin)
	small := hostsOf(0, internMin-1)
	index := map[string]model.ProcessDef{"a": {Hosts: hostsOf(0, 2*internMin)}}
	for _, tc := range []struct {
		name   string
		kept   bool // a table kept already
		hosts  []model.Host
		shared bool // the addresses are the index's
	}{
		{"none", false, nil, false},
		{"a short list, no table: packed only", false, small, false},
		{"a short list, a table kept: shared", true, small, true},
		{"a long list: shared", false, big, true},
		{"a long list, a table kept: shared", true, big, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var x hostTexts
			if tc.kept {
				x.pack(hostsOf(0, internMin), index) // makes the table
			}
			in := make([]model.Host, len(tc.hosts), len(tc.hosts)+10)
			for i, h := range tc.hosts {
				h.IP = string([]byte(h.IP)) // a copy of its own, as decoded
				in[i] = h
			}
			was := slices.Clone(in)
			out := x.pack(in, index)
			if !slices.Equal(out, tc.hosts) {
				t.Fatalf("pack = %v, want %v", out, tc.hosts)
			}
			if len(tc.hosts) == 0 {
				if none := x.pack(nil, index); none != nil {
					t.Fatalf("pack of no list = %v, want nil", none)
				}
				if empty := x.pack([]model.Host{}, index); empty == nil || len(empty) != 0 {
					t.Fatalf("pack of an empty list = %#v, want it empty, not nil (a definition read back says [], not null)", empty)
				}
				return
			}
			if cap(out) != len(out) {
				t.Errorf("cap %d, len %d: want the list at its length", cap(out), len(out))
			}
			if &out[0] == &in[0] {
				t.Error("the list is the caller's: want a copy")
			}
			for i := range in {
				if !sameText(in[i].IP, was[i].IP) || in[i] != was[i] {
					t.Fatalf("the caller's list changed at %d", i)
				}
			}
			for i, h := range out {
				if got := sameText(h.IP, index["a"].Hosts[i].IP); got != tc.shared {
					t.Fatalf("host %d shares the index's address: %v, want %v", i, got, tc.shared)
				}
			}
		})
	}
}

// A table takes no more addresses than internMax; addresses past it are
// kept as they came.
func TestHostTextsBound(t *testing.T) {
	x := hostTexts{ips: map[string]string{}}
	for i := range internMax {
		x.ips[strconv.Itoa(i)] = ""
	}
	ip := string([]byte("10.0.0.1"))
	if got := x.share(ip); !sameText(got, ip) || len(x.ips) != internMax {
		t.Fatalf("share past the bound: kept %d addresses", len(x.ips))
	}
}

// The index's definitions share their hosts' addresses whether they came
// in the watch's snapshot or one by one, their host lists at their
// length; a delete, a bad value and a replacement are recorded as before.
func TestRegistryEntriesShareAddresses(t *testing.T) {
	defs, bad := map[string]model.ProcessDef{}, map[string]error{}
	var x hostTexts
	a := model.ProcessDef{Hosts: hostsOf(0, 100)}
	b := model.ProcessDef{Hosts: hostsOf(50, 100)}
	applyEntry(defs, bad, putEntry(t, "a", 1, a), &x)
	applyEntry(defs, bad, putEntry(t, "b", 2, b), &x)
	x.drop() // as after regIdle: a later delivery seeds a table from the index
	c := model.ProcessDef{Hosts: append(hostsOf(120, 10), hostsOf(0, 60)...)}
	applyEntry(defs, bad, putEntry(t, "c", 3, c), &x)
	for _, k := range []string{"a", "b", "c"} {
		if hs := defs[k].Hosts; cap(hs) != len(hs) {
			t.Errorf("%s: cap %d, len %d", k, cap(hs), len(hs))
		}
	}
	if !slices.Equal(defs["a"].Hosts, a.Hosts) || !slices.Equal(defs["b"].Hosts, b.Hosts) || !slices.Equal(defs["c"].Hosts, c.Hosts) {
		t.Fatal("the hosts changed")
	}
	if defs["c"].Rev != 3 {
		t.Errorf("rev %d, want 3", defs["c"].Rev)
	}
	for i := range 50 {
		if !sameText(defs["a"].Hosts[50+i].IP, defs["b"].Hosts[i].IP) {
			t.Fatalf("a's host %d does not share b's address", 50+i)
		}
	}
	for i := range 60 {
		if !sameText(defs["c"].Hosts[10+i].IP, defs["a"].Hosts[i].IP) {
			t.Fatalf("c's host %d does not share a's address", 10+i)
		}
	}
	applyEntry(defs, bad, fakeEntry{key: "b", val: []byte("{"), rev: 4, op: jetstream.KeyValuePut}, &x)
	if _, ok := defs["b"]; ok || bad["b"] == nil {
		t.Fatalf("bad value: defs has b %v, bad %v", ok, bad["b"])
	}
	var syn *json.SyntaxError
	if !errors.As(bad["b"], &syn) {
		t.Errorf("bad value's error %v, want the decoder's", bad["b"])
	}
	applyEntry(defs, bad, putEntry(t, "b", 5, b), &x)
	if bad["b"] != nil || defs["b"].Rev != 5 {
		t.Fatalf("replaced: bad %v, rev %d", bad["b"], defs["b"].Rev)
	}
	applyEntry(defs, bad, fakeEntry{key: "a", rev: 6, op: jetstream.KeyValueDelete}, &x)
	if _, ok := defs["a"]; ok {
		t.Fatal("deleted, still in the index")
	}
}

// BenchmarkRegistryHostBytes is the index's live heap a (definition,
// host) pair for a fleet like the simulator's: 22 definitions over
// hosts, each host in ~3.7 of them. "decoded" is the definitions as
// json.Unmarshal leaves them (the index before hostTexts), "index" as the
// watch keeps them.
func BenchmarkRegistryHostBytes(b *testing.B) {
	const hosts, ndefs = 100_000, 22
	all := hostsOf(0, hosts)
	rng := rand.New(rand.NewPCG(1, 2))
	var entries []fakeEntry
	pairs := 0
	for d := range ndefs {
		var hs []model.Host
		for _, h := range all {
			if rng.IntN(ndefs) < 3 || d == 0 && rng.IntN(10) < 8 { // ~3.7 a host: 3 + 0.8*19/22
				hs = append(hs, h)
			}
		}
		pairs += len(hs)
		entries = append(entries, putEntry(b, fmt.Sprint("ns:def", d), uint64(d+1), model.ProcessDef{Hosts: hs}))
	}
	all = nil
	measure := func(b *testing.B, build func() map[string]model.ProcessDef) {
		var keep map[string]model.ProcessDef
		var live uint64
		for b.Loop() {
			b.StopTimer()
			keep = nil
			before := heapLive()
			b.StartTimer()
			keep = build()
			b.StopTimer()
			live = heapLive() - before
			b.StartTimer()
		}
		runtime.KeepAlive(keep)
		b.ReportMetric(float64(live)/float64(pairs), "B/pair")
		b.ReportMetric(float64(live)/float64(hosts), "B/host")
	}
	b.Run("decoded", func(b *testing.B) {
		measure(b, func() map[string]model.ProcessDef {
			defs := map[string]model.ProcessDef{}
			for _, e := range entries {
				var d model.ProcessDef
				if err := json.Unmarshal(e.val, &d); err != nil {
					b.Fatal(err)
				}
				defs[e.key] = d
			}
			return defs
		})
	})
	b.Run("index", func(b *testing.B) {
		measure(b, func() map[string]model.ProcessDef {
			defs, bad := map[string]model.ProcessDef{}, map[string]error{}
			var x hostTexts
			for _, e := range entries {
				applyEntry(defs, bad, e, &x)
			}
			x.drop()
			return defs
		})
	})
}

// heapLive is the live heap after a collection.
func heapLive() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
