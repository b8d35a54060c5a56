package model

import "testing"

// TestOpID: "task/cloud:ip/proc", the agent id as Host.AgentID writes it,
// made with one allocation whatever the lengths.
func TestOpID(t *testing.T) {
	long := string(make([]byte, 200))
	for _, tt := range []struct {
		task string
		h    Host
		proc string
	}{
		{"GSETASK:20260101000000:7", Host{IP: "10.0.0.1"}, "web:nginx"},
		{"t", Host{IP: "fe80::1", CloudID: 2147483647}, "ns:p"},
		{"", Host{}, ""},
		{long, Host{IP: "10.0.0.1", CloudID: 3}, long},
	} {
		want := tt.task + "/" + tt.h.AgentID() + "/" + tt.proc
		if got := OpID(tt.task, tt.h, tt.proc); got != want {
			t.Errorf("OpID(%q, %v, %q) = %q, want %q", tt.task, tt.h, tt.proc, got, want)
		}
	}
	h := Host{IP: "10.0.0.1", CloudID: 3}
	if n := testing.AllocsPerRun(100, func() { _ = OpID("GSETASK:20260101000000:7", h, "gse:bkmonitorbeat") }); n > 1 {
		t.Errorf("%v allocations an op id, want 1", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = h.AgentID() }); n > 1 {
		t.Errorf("%v allocations an agent id, want 1", n)
	}
}
