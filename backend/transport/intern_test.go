package transport

import (
	"fmt"
	"maps"
	"reflect"
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
