package model

import "testing"

func TestInterned(t *testing.T) {
	var in Interned[string]
	for _, tc := range []struct {
		k    string
		want uint32
	}{{"a", 0}, {"a", 0}, {"b", 1}, {"a", 0}, {"c", 2}, {"b", 1}, {"b", 1}} {
		if got := in.ID(tc.k); got != tc.want {
			t.Fatalf("ID(%q) = %d, want %d", tc.k, got, tc.want)
		}
	}
	if want := []string{"a", "b", "c"}; len(in.Values) != 3 || in.Values[0] != want[0] || in.Values[1] != want[1] || in.Values[2] != want[2] {
		t.Fatalf("Values %q, want %q", in.Values, want)
	}
}
