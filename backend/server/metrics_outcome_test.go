package server

import (
	"testing"
	"time"
)

// outcome counts each result by its state: a final state through the
// counter kept for it (looked up once), another by its label.
func TestMetricsOutcome(t *testing.T) {
	m := newMetrics()
	for range 3 {
		m.outcome("success", time.Millisecond)
	}
	m.outcome("timeout", 0)
	m.outcome("odd", time.Millisecond)
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "gseproc_host_results_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "state" {
					got[l.GetValue()] = mt.GetCounter().GetValue()
				}
			}
		}
	}
	want := map[string]float64{"success": 3, "timeout": 1, "odd": 1}
	if len(got) != len(want) {
		t.Errorf("counted %v, want %v", got, want)
	}
	for state, n := range want {
		if got[state] != n {
			t.Errorf("%s: %v results counted, want %v", state, got[state], n)
		}
	}
}
