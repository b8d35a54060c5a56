package ui

import (
	"fmt"
	"testing"
	"time"

	"gseproc/model"
)

func TestBars(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{{nil, ""}, {[]int{0, 0}, "  "}, {[]int{1, 0, 8, 4}, "▁ █▄"}, {[]int{5}, "█"}, {[]int{1, 100}, "▁█"}} {
		if got := bars(tc.in); got != tc.want {
			t.Errorf("bars(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// rowsWith makes final results started at t0+i ms, each lasting ds[i],
// each on a host of its own.
func rowsWith(t0 time.Time, ds []time.Duration) *results {
	rs := newResults(len(ds), false, false)
	for i, d := range ds {
		st := t0.Add(time.Duration(i) * time.Millisecond)
		rs.put(&model.Result{Host: model.Host{IP: fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)}, ProcKey: "web:nginx",
			State: model.StateSuccess, Started: st, Finished: st.Add(d)})
	}
	return rs
}

func TestTaskStats(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	var ds []time.Duration
	for range 90 {
		ds = append(ds, 20*time.Millisecond)
	}
	for range 9 {
		ds = append(ds, 400*time.Millisecond)
	}
	ds = append(ds, 5*time.Second) // the slow tail
	rows := rowsWith(t0, ds)
	rows.put(&model.Result{Host: model.Host{IP: "10.9.9.9"}, ProcKey: "web:nginx", State: model.StatePending}) // not final: not counted
	if rows.len() != 101 {
		t.Fatalf("%d rows, want 101", rows.len())
	}
	s := taskStats(rows, t0)
	if s.n != 100 || s.min != 20*time.Millisecond || s.max != 5*time.Second {
		t.Fatalf("n %d min %s max %s", s.n, s.min, s.max)
	}
	for _, q := range []struct {
		q      float64
		lo, hi time.Duration
	}{{0.5, 20 * time.Millisecond, 24 * time.Millisecond}, {0.95, 400 * time.Millisecond, 476 * time.Millisecond}, {1, 5 * time.Second, 5 * time.Second}} {
		if got := s.quantile(q.q); got < q.lo || got > q.hi {
			t.Errorf("p%.0f = %s, want in [%s,%s]", q.q*100, got, q.lo, q.hi)
		}
	}
	h := s.histogram(80)
	if h[0] != 90 || h[len(h)-1] != 1 {
		t.Fatalf("histogram %v: fastest first, the slow tail last", h)
	}
	sum := 0
	for _, c := range s.histogram(5) { // merged to fit
		sum += c
	}
	if len(s.histogram(5)) > 5 || sum != 100 {
		t.Fatalf("merged histogram %v", s.histogram(5))
	}
	// Per second: the one of 5 s finished in second 5, the rest in second 0.
	if len(s.perSec) != 6 || s.perSec[0] != 99 || s.perSec[5] != 1 {
		t.Fatalf("per second %v", s.perSec)
	}
	th := monoTheme(t)
	if line := s.rateLine(th, 80, 8*time.Second); line != fmt.Sprintf("results/s %s · now 0 · peak 99", bars([]int{99, 0, 0, 0, 0, 1, 0, 0, 0})) {
		t.Errorf("rate line %q", line)
	}
}

// BenchmarkTaskStats100k is the stats of a 100,000-host task, computed
// once per batch of results while the watch is drawn.
func BenchmarkTaskStats100k(b *testing.B) {
	t0 := time.Now()
	ds := make([]time.Duration, 100_000)
	for i := range ds {
		ds[i] = time.Duration(i%977+5) * time.Millisecond
	}
	rows := rowsWith(t0, ds)
	for b.Loop() {
		if s := taskStats(rows, t0); s.n != len(ds) {
			b.Fatal(s.n)
		}
	}
}
