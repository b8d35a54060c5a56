package transport

import (
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"gseproc/model"
)

// Equal label sets reported by different hosts are kept once; a set that
// differs in any pair is kept as it came; the table is bounded.
func TestInternedLabels(t *testing.T) {
	var x interned
	a := x.labels(map[string]string{"zone": "z1", "os": "linux"})
	b := x.labels(map[string]string{"os": "linux", "zone": "z1"})
	if reflect.ValueOf(a).UnsafePointer() != reflect.ValueOf(b).UnsafePointer() {
		t.Fatal("two equal label sets are kept twice")
	}
	for _, m := range []map[string]string{
		{"zone": "z1", "os": "win"}, {"zone": "z1"}, {"zone": "z1", "os": "linux", "rack": "r1"}, {"os": "z1", "zone": "linux"},
	} {
		got := x.labels(maps.Clone(m))
		if gm := setMap(got); !maps.Equal(gm, m) {
			t.Fatalf("labels(%v) = %v", m, got)
		}
		if reflect.ValueOf(got).UnsafePointer() == reflect.ValueOf(a).UnsafePointer() {
			t.Fatalf("labels(%v) shares the set of %v", m, a)
		}
	}
	if got := x.labels(nil); got != nil {
		t.Fatalf("labels(nil) = %v", got)
	}
	for i := range internMax + 10 {
		x.labels(map[string]string{"host": fmt.Sprint(i)})
	}
	if n := len(x.sets); n > internMax {
		t.Fatalf("%d label sets kept, more than internMax %d", n, internMax)
	}
	if x.text("v1") != "v1" || x.text("") != "" {
		t.Fatal("text changed its value")
	}
}

// TestInternedBytesBounded: label sets and texts of a megabyte each, all
// different (one hostile agent heartbeating a new one each time), are
// kept up to internMaxBytes, not internMax of them.
func TestInternedBytesBounded(t *testing.T) {
	var x interned
	big := strings.Repeat("x", 1<<20)
	for i := range 40 {
		v := fmt.Sprint(i) + big
		if got := setMap(x.labels(map[string]string{"k": v})); got["k"] != v {
			t.Fatalf("set %d changed", i)
		}
		if x.text(v) != v {
			t.Fatalf("text %d changed", i)
		}
		if x.setBytes > internMaxBytes || x.textBytes > internMaxBytes {
			t.Fatalf("after %d sets of 1 MB: %d bytes of sets, %d of texts kept; bound %d", i+1, x.setBytes, x.textBytes, internMaxBytes)
		}
	}
	setBytes, textBytes := 0, 0
	for _, m := range x.sets {
		for _, w := range m {
			setBytes += len(w)
		}
	}
	for s := range x.texts {
		textBytes += len(s)
	}
	if setBytes != x.setBytes || textBytes != x.textBytes || setBytes > internMaxBytes || textBytes > internMaxBytes {
		t.Fatalf("kept %d bytes of sets (counted %d), %d of texts (counted %d); bound %d", setBytes, x.setBytes, textBytes, x.textBytes, internMaxBytes)
	}
}

// TestInternedStatuses: statuses equal to the ones kept are not kept
// again; new ones are kept at their length with their words shared with
// other hosts' (one copy of "running" or a process key, not one a host).
func TestInternedStatuses(t *testing.T) {
	var x interned
	mk := func(pid int) []model.ProcStatus {
		s := make([]model.ProcStatus, 1, 4) // as decoded: room to spare
		s[0] = model.ProcStatus{ProcKey: strings.Clone("gse:agent"), ProcName: strings.Clone("agent"),
			State: model.ProcState(strings.Clone("running")), PID: pid, Version: strings.Clone("1.0")}
		return s
	}
	a := x.statuses(nil, mk(1))
	if len(a) != 1 || cap(a) != 1 || a[0].PID != 1 || a[0].ProcKey != "gse:agent" || a[0].State != model.ProcRunning {
		t.Fatalf("kept %+v (cap %d)", a, cap(a))
	}
	if got := x.statuses(a, mk(1)); &got[0] != &a[0] {
		t.Fatal("statuses equal to the kept ones were kept again")
	}
	b := x.statuses(nil, mk(2)) // another host's
	if b[0].PID != 2 {
		t.Fatalf("kept %+v", b)
	}
	for _, p := range [][2]string{{a[0].ProcKey, b[0].ProcKey}, {string(a[0].State), string(b[0].State)}, {a[0].Version, b[0].Version}} {
		if unsafe.StringData(p[0]) != unsafe.StringData(p[1]) {
			t.Fatalf("%q is kept twice", p[0])
		}
	}
	if got := x.statuses(a, nil); got != nil {
		t.Fatalf("no statuses kept as %+v", got)
	}
	long := strings.Repeat("x", internWord+1)
	if x.word(long) != long || x.texts[long] != "" {
		t.Fatal("a long text was kept")
	}
}

// setMap is l's labels as a map.
func setMap(l labelSet) map[string]string {
	m := map[string]string{}
	l.addTo(m)
	return m
}

// TestLabelSet: a set holds its labels by key, words shared with other
// sets; equal says whether a map holds exactly them.
func TestLabelSet(t *testing.T) {
	var x interned
	a := x.labels(map[string]string{"zone": "z1", "os": "linux", "rack": "r007"})
	if want := (labelSet{"os", "linux", "rack", "r007", "zone", "z1"}); !reflect.DeepEqual(a, want) {
		t.Fatalf("set %q, want %q", a, want)
	}
	b := x.labels(map[string]string{"zone": strings.Clone("z1"), "os": "win"})
	if unsafe.StringData(a[5]) != unsafe.StringData(b[3]) {
		t.Fatal("the value z1 of two sets is kept twice")
	}
	for _, c := range []struct {
		m    map[string]string
		want bool
	}{
		{map[string]string{"zone": "z1", "os": "linux", "rack": "r007"}, true},
		{map[string]string{"zone": "z1", "os": "linux"}, false},
		{map[string]string{"zone": "z1", "os": "linux", "rack": "r008"}, false},
		{map[string]string{"zone": "z1", "os": "linux", "row": "r007"}, false},
		{nil, false},
	} {
		if got := a.equal(c.m); got != c.want {
			t.Errorf("equal(%v) = %v", c.m, got)
		}
	}
	if got := setMap(nil); len(got) != 0 {
		t.Fatalf("an empty set holds %v", got)
	}
}

// TestHostEntrySize: 100,000 hosts keep an entry each; 144 bytes is its
// size class (176 before the agent's version and id were shared and
// the grace made an int32).
func TestHostEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(hostEntry{}); n > 144 {
		t.Fatalf("hostEntry is %d bytes, more than 144", n)
	}
}

func TestAgentMeta(t *testing.T) {
	var x interned
	a := x.meta(nil, strings.Clone("1.2"), "")
	if b := x.meta(nil, strings.Clone("1.2"), ""); a != b || a.version != "1.2" {
		t.Fatalf("a version's meta not shared: %p %p", a, b)
	}
	if x.meta(a, "", "") != nil {
		t.Fatal("no version and no agent id: want nil")
	}
	c := x.meta(nil, "1.2", "02abc")
	if c == a || c.agentID != "02abc" || c.version != "1.2" {
		t.Fatalf("with an agent id: %+v", c)
	}
	if d := x.meta(c, "1.2", "02abc"); d != c {
		t.Fatal("a host's meta unchanged not kept")
	}
	if d := x.meta(c, "1.3", "02abc"); d == c || d.version != "1.3" {
		t.Fatalf("a changed version: %+v", d)
	}
	if len(x.metas) != 1 {
		t.Fatalf("%d metas kept, want the one without an agent id", len(x.metas))
	}
}
