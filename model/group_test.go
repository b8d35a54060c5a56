package model

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func TestPoolVictim(t *testing.T) {
	a := PoolMember{Key: "ns:a", CPU: 30, Mem: 5}
	b := PoolMember{Key: "ns:b", CPU: 20, Mem: 15, CPULimit: 10, MemLimit: 50}
	c := PoolMember{Key: "ns:c", CPU: 20, Mem: 4, CPULimit: 80}
	tests := []struct {
		name    string
		res     GroupResource
		members []PoolMember
		ok      bool
		what    string
		victim  string
	}{
		{"no members", GroupResource{CPUPoolLimit: 1}, nil, false, "", ""},
		{"no limits", GroupResource{}, []PoolMember{a, b, c}, false, "", ""},
		{"within both", GroupResource{CPUPoolLimit: 80, MemPoolLimit: 30}, []PoolMember{a, b, c}, false, "", ""},
		{"cpu over, weight 0: the highest usage", GroupResource{CPUPoolLimit: 50}, []PoolMember{a, b, c}, true, "cpu", "ns:a"},
		{"cpu over, weight 1: the highest usage over its own limit", GroupResource{CPUPoolLimit: 50, CPUPoolWeight: 1}, []PoolMember{a, b, c}, true, "cpu", "ns:b"},
		{"weight 1: no own limit counts as 100", GroupResource{CPUPoolLimit: 40, CPUPoolWeight: 1}, []PoolMember{a, c}, true, "cpu", "ns:a"},
		{"memory is judged first", GroupResource{CPUPoolLimit: 50, MemPoolLimit: 20}, []PoolMember{a, b, c}, true, "mem", "ns:b"},
		{"mem weight 0: the highest usage", GroupResource{MemPoolLimit: 20}, []PoolMember{{Key: "ns:d", Mem: 10, MemLimit: 20}, b}, true, "mem", "ns:b"},
		{"mem weight 1: the one allowed more is spared", GroupResource{MemPoolLimit: 20, MemPoolWeight: 1}, []PoolMember{{Key: "ns:d", Mem: 10, MemLimit: 20}, b}, true, "mem", "ns:d"},
		{"tie on score and usage: the lower key", GroupResource{CPUPoolLimit: 30}, []PoolMember{{Key: "ns:z", CPU: 20}, {Key: "ns:y", CPU: 20}}, true, "cpu", "ns:y"},
		{"exactly at the limit is within", GroupResource{CPUPoolLimit: 70}, []PoolMember{a, b, c}, false, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.res.PoolVictim(tc.members)
			if ok != tc.ok {
				t.Fatalf("over = %v, want %v (%+v)", ok, tc.ok, got)
			}
			if !ok {
				return
			}
			if got.Resource != tc.what || tc.members[got.Victim].Key != tc.victim {
				t.Fatalf("breach %+v (victim %s), want %s on %s", got, tc.members[got.Victim].Key, tc.victim, tc.what)
			}
		})
	}
}

func TestGroupResourceValidate(t *testing.T) {
	v := &Validator{}
	GroupResource{CPUPoolLimit: 101, MemPoolLimit: math.NaN(), CPUPoolWeight: 2, MemPoolWeight: -1}.Validate(v, "r")
	var fields []string
	for _, e := range v.Err().(ValidationError) {
		fields = append(fields, e.Field)
	}
	want := []string{"r.cpu_pool_limit", "r.mem_pool_limit", "r.cpu_pool_weight", "r.mem_pool_weight"}
	if !slices.Equal(fields, want) {
		t.Fatalf("fields %v, want %v", fields, want)
	}
	v = &Validator{}
	GroupResource{CPUPoolLimit: 20, MemPoolLimit: 0, CPUPoolWeight: 1}.Validate(v, "r")
	if err := v.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestProcessGroupValidate: an agent's check names the namespace and the
// limits under process_group, and takes a group that clears (limits
// nothing).
func TestProcessGroupValidate(t *testing.T) {
	err := ProcessGroup{Namespace: "bad ns/..", Resource: GroupResource{MemPoolLimit: 200}}.Validate()
	var ve ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a ValidationError, got %v", err)
	}
	var fields []string
	for _, e := range ve {
		fields = append(fields, e.Field)
	}
	if want := []string{"process_group.namespace", "process_group.resource.mem_pool_limit"}; !slices.Equal(fields, want) {
		t.Fatalf("fields %v, want %v", fields, want)
	}
	for _, g := range []ProcessGroup{{Namespace: "web", Resource: GroupResource{CPUPoolLimit: 50, CPUPoolWeight: 1}}, {Namespace: "web"}} {
		if err := g.Validate(); err != nil {
			t.Fatalf("%+v: %v", g, err)
		}
	}
}
