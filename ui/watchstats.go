package ui

import (
	"fmt"
	"math"
	"strings"
	"time"

	"gseproc/model"
	"gseproc/theme"
)

// The task watch's live shape of a task: a histogram of the per-host
// durations (a slow tail shows as bars far right) and a sparkline of
// results per second (a stall shows as a gap). Both are drawn with block
// heights ▁▂▃▄▅▆▇█, so they read in mono; both are computed from the
// results alone (their durations and finish times), so a task reopened
// later draws the same.

// durBins are quarter-octave bins of milliseconds: bin i holds durations
// in [2^(i/4), 2^((i+1)/4)) ms; bin 0 also everything under 1 ms, the last
// everything over.
const durBins = 96

func durBin(d time.Duration) int {
	ms := float64(d) / float64(time.Millisecond)
	if ms < 1 {
		return 0
	}
	return min(int(4*math.Log2(ms)), durBins-1)
}

// binEdge is the lower edge of bin i.
func binEdge(i int) time.Duration {
	return time.Duration(math.Exp2(float64(i)/4) * float64(time.Millisecond))
}

// watchStats is what the two lines are drawn from.
type watchStats struct {
	n        int // final results with a duration
	bins     [durBins]int
	min, max time.Duration
	perSec   []int // results finished in each second since the task began
}

// taskStats computes the stats of a task's results. Pure.
func taskStats(rs *results, created time.Time) watchStats {
	var s watchStats
	for i := range rs.len() {
		s.add(rs.state(i), rs.started(i), rs.finished(i), created, 1)
	}
	return s
}

// add counts a final result in (sign 1) or out (-1, a final result
// replaced by another); min and max only widen.
// A result's state, start and finish are what is counted.
func (s *watchStats) add(state model.ResultState, started, finished, created time.Time, sign int) {
	if !state.Final() || finished.IsZero() {
		return
	}
	if d := (model.Result{Started: started, Finished: finished}).Duration(); d > 0 {
		if sign > 0 {
			if s.n == 0 || d < s.min {
				s.min = d
			}
			s.max = max(s.max, d)
		}
		s.bins[durBin(d)] += sign
		s.n += sign
	}
	if created.IsZero() {
		return
	}
	if sec := int(finished.Sub(created) / time.Second); sec >= 0 && sec < 24*3600 {
		for len(s.perSec) <= sec {
			s.perSec = append(s.perSec, 0)
		}
		s.perSec[sec] += sign
	}
}

// quantile is the duration under which q of the results finished (the
// upper edge of its bin: at most a quarter octave high).
func (s watchStats) quantile(q float64) time.Duration {
	want := int(math.Ceil(q * float64(s.n)))
	seen := 0
	for i, c := range s.bins {
		seen += c
		if seen >= want && c > 0 {
			return min(binEdge(i+1), s.max)
		}
	}
	return s.max
}

// blocks are the heights of a bar, lowest first.
var blocks = []rune("▁▂▃▄▅▆▇█")

// bars draws counts as block heights scaled to the largest; zero is blank.
func bars(counts []int) string {
	top := 0
	for _, c := range counts {
		top = max(top, c)
	}
	var b strings.Builder
	for _, c := range counts {
		if c == 0 || top == 0 {
			b.WriteByte(' ')
			continue
		}
		b.WriteRune(blocks[min((c*len(blocks)-1)/top, len(blocks)-1)])
	}
	return b.String()
}

// histogram is the durations' bins from the fastest to the slowest,
// merged to fit width.
func (s watchStats) histogram(width int) []int {
	if s.n == 0 || width <= 0 {
		return nil
	}
	lo, hi := durBin(s.min), durBin(s.max)
	n := hi - lo + 1
	k := (n + width - 1) / width
	out := make([]int, 0, (n+k-1)/k)
	for i := lo; i <= hi; i += k {
		c := 0
		for j := i; j < min(i+k, hi+1); j++ {
			c += s.bins[j]
		}
		out = append(out, c)
	}
	return out
}

// durationLine is "durations 12ms ▁▃█▅▂ ▁ 2.1s · p50 40ms p90 210ms p99 1.2s".
func (s watchStats) durationLine(t *theme.Theme, w int) string {
	label := t.Muted.Render("durations ")
	if s.n == 0 {
		return label + t.Muted.Render("no host has finished yet")
	}
	qs := fmt.Sprintf(" · p50 %s p90 %s p99 %s", fmtDuration(s.quantile(0.5)), fmtDuration(s.quantile(0.9)), fmtDuration(s.quantile(0.99)))
	lo, hi := fmtDuration(s.min), fmtDuration(s.max)
	room := w - len("durations ") - len(lo) - len(hi) - 2 - len([]rune(qs))
	h := bars(s.histogram(max(min(room, 48), 4)))
	return label + lo + " " + t.Pending.Render(h) + " " + hi + t.Muted.Render(qs)
}

// rateLine is "results/s ▁▃▇█▆▂▁ · now 812 · peak 1530": the last seconds
// up to now (elapsed) that fit.
func (s watchStats) rateLine(t *theme.Theme, w int, elapsed time.Duration) string {
	label := t.Muted.Render("results/s ")
	if s.n == 0 && len(s.perSec) == 0 {
		return label + t.Muted.Render("none yet")
	}
	// The series is perSec followed by zeros up to now; only the seconds
	// drawn are made (a watch open for an hour padded 3,600 every frame).
	n := max(len(s.perSec), min(int(elapsed/time.Second)+1, 24*3600))
	peak := 0
	for _, c := range s.perSec {
		peak = max(peak, c)
	}
	now := 0
	if n == len(s.perSec) && n > 0 {
		now = s.perSec[n-1]
	}
	tail := fmt.Sprintf(" · now %d · peak %d", now, peak)
	room := max(min(w-len("results/s ")-len(tail), 60), 4)
	from := max(n-room, 0)
	series := make([]int, n-from)
	if from < len(s.perSec) {
		copy(series, s.perSec[from:])
	}
	return label + t.Pending.Render(bars(series)) + t.Muted.Render(tail)
}
