package transport

import (
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
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
		if !maps.Equal(got, m) {
			t.Fatalf("labels(%v) = %v", m, got)
		}
		if reflect.ValueOf(got).UnsafePointer() == reflect.ValueOf(a).UnsafePointer() {
			t.Fatalf("labels(%v) shares the map of %v", m, a)
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
		if got := x.labels(map[string]string{"k": v}); got["k"] != v {
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
		for k, v := range m {
			setBytes += len(k) + len(v)
		}
	}
	for s := range x.texts {
		textBytes += len(s)
	}
	if setBytes != x.setBytes || textBytes != x.textBytes || setBytes > internMaxBytes || textBytes > internMaxBytes {
		t.Fatalf("kept %d bytes of sets (counted %d), %d of texts (counted %d); bound %d", setBytes, x.setBytes, textBytes, x.textBytes, internMaxBytes)
	}
}
