package ui

import (
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// BenchmarkWatchSortKey100k: a watch of 100,000 final results; one op is
// s pressed to sort by MESSAGE (then back to the default order, not
// timed): the whole re-sort a key press costs, off the per-batch path.
func BenchmarkWatchSortKey100k(b *testing.B) {
	s := benchShared(b, 120, 40)
	const n = 100000
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	task := model.Task{ID: "GSETASK:20261121100000:4", Op: model.OpRestart, Targets: n, Status: model.TaskDone, Created: t0}
	_, final := watchResults(task, n, func(i int) int { return (i * 7919) % n })
	w := newWatchPage(s, task)
	w.SetSize(120, 36)
	w.Update(watchInitMsg{id: w.id, view: backend.TaskView{Task: task, Results: final}})
	msg := 4 // MESSAGE
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w.setSort(func(s *sortState) { *s = sortState{col: msg} })
		b.StopTimer()
		w.setSort(func(s *sortState) { *s = unsorted() })
		b.StartTimer()
	}
}

// BenchmarkTaskWatch100kTrickleSorted is BenchmarkTaskWatch100kTrickle
// sorted by TIME: each batch's rows are placed by binary search under the
// chosen column too.
func BenchmarkTaskWatch100kTrickleSorted(b *testing.B) {
	benchTrickle100k(b, "GSETASK:20261121100000:5", sortState{col: 5}) // TIME
}
