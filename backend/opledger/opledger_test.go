package opledger

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gseproc/model"
)

func TestRunsOnceAndAnswersRepeats(t *testing.T) {
	l := New(0)
	var runs atomic.Int32
	run := func() (Outcome, bool) {
		runs.Add(1)
		return Outcome{Code: 0, Message: "started", Output: "pid 7"}, true
	}
	ctx := context.Background()
	out, repeat, err := l.Do(ctx, "t1/0:10.0.0.1/web:nginx", run)
	if err != nil || repeat || out.Message != "started" {
		t.Fatalf("first: %+v %v %v", out, repeat, err)
	}
	out, repeat, err = l.Do(ctx, "t1/0:10.0.0.1/web:nginx", run)
	if err != nil || !repeat || out.Message != "started" || out.Output != "pid 7" {
		t.Fatalf("repeat: %+v %v %v", out, repeat, err)
	}
	if _, _, err := l.Do(ctx, "t2/0:10.0.0.1/web:nginx", run); err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d runs, want 2 (two ids)", n)
	}
	// No id: nothing recorded, it runs every time.
	l.Do(ctx, "", run)
	l.Do(ctx, "", run)
	if n := runs.Load(); n != 4 || l.Len() != 2 {
		t.Fatalf("%d runs, %d recorded", n, l.Len())
	}
}

func TestRepeatWhileInFlightWaitsForTheFirst(t *testing.T) {
	l := New(0)
	release := make(chan struct{})
	started := make(chan struct{})
	var runs atomic.Int32
	run := func() (Outcome, bool) {
		if runs.Add(1) == 1 {
			close(started)
		}
		<-release
		return Outcome{Code: 0, Message: "done"}, true
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	outs := make([]Outcome, 5)
	repeats := make([]bool, 5)
	wg.Go(func() { outs[0], repeats[0], _ = l.Do(ctx, "id", run) })
	<-started
	for i := 1; i < 5; i++ {
		wg.Go(func() { outs[i], repeats[i], _ = l.Do(ctx, "id", run) })
	}
	// A repeat whose caller gives up is told the op is still running.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, err := l.Do(short, "id", run); err == nil {
		t.Fatal("a repeat that gave up waiting: want an error")
	}
	close(release)
	wg.Wait()
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
	for i, o := range outs {
		if o.Message != "done" || repeats[i] != (i > 0) {
			t.Fatalf("call %d: %+v repeat %v", i, o, repeats[i])
		}
	}
}

func TestNotRunIsNotRecorded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.jsonl")
	l, err := Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	out, repeat, _ := l.Do(ctx, "id", func() (Outcome, bool) { return Outcome{Code: model.CodeTimeout, Message: "deadline passed"}, false })
	if repeat || out.Code != model.CodeTimeout || l.Len() != 0 {
		t.Fatalf("not run: %+v repeat %v, %d recorded", out, repeat, l.Len())
	}
	out, repeat, _ = l.Do(ctx, "id", func() (Outcome, bool) { return Outcome{Message: "ran"}, true })
	if repeat || out.Message != "ran" {
		t.Fatalf("second try: %+v repeat %v", out, repeat)
	}
	l.Close()
	l2, err := Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	out, repeat, _ = l2.Do(ctx, "id", func() (Outcome, bool) { t.Fatal("ran again"); return Outcome{}, true })
	if !repeat || out.Message != "ran" {
		t.Fatalf("after reopen: %+v repeat %v", out, repeat)
	}
}

// TestNotRunThenRunReopened: an op that did not run (its deadline had
// passed), then ran under the same id (asked again), is one op after a
// reopen: the file's begin, not-run, begin lines make one record, kept
// and trimmed once. (Open used to list its id twice: a later trim dropped
// its outcome while the id stayed listed once more, and the next
// compaction read that missing outcome: a nil dereference that killed the
// agent in the middle of an op.)
func TestNotRunThenRunReopened(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.jsonl")
	const keep = 4
	l, err := Open(path, keep)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ran := func(msg string) func() (Outcome, bool) {
		return func() (Outcome, bool) { return Outcome{Message: msg}, true }
	}
	consistent := func(l *Ledger, when string) {
		t.Helper()
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.order) != len(l.ops) {
			t.Fatalf("%s: %d ids listed, %d recorded: %v", when, len(l.order), len(l.ops), l.order)
		}
	}
	// Five ops compact the file once (keep 4: more than 8 lines), so that
	// the retried op's three lines stay in it as they were written.
	for i := range 5 {
		l.Do(ctx, fmt.Sprint("op", i), ran(fmt.Sprint(i)))
	}
	l.Do(ctx, "retried", func() (Outcome, bool) { return Outcome{Code: model.CodeTimeout}, false })
	l.Do(ctx, "retried", ran("retried"))
	consistent(l, "before the reopen")
	l.Close()

	l2, err := Open(path, keep)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	consistent(l2, "after the reopen")
	if out, repeat, _ := l2.Do(ctx, "retried", func() (Outcome, bool) { t.Fatal("ran again"); return Outcome{}, true }); !repeat || out.Message != "retried" {
		t.Fatalf("retried after the reopen: %+v repeat %v", out, repeat)
	}
	// Newer ops push it out, through trims and compactions.
	for i := range 3 * keep {
		l2.Do(ctx, fmt.Sprint("new", i), ran(fmt.Sprint(i)))
		consistent(l2, fmt.Sprint("after new op ", i))
	}
	if l2.Len() != keep {
		t.Fatalf("%d recorded, want %d", l2.Len(), keep)
	}
}

// TestPersistedAcrossRestart: outcomes survive a reopen; an op that began
// and never ended (the agent died during it) is answered as interrupted,
// never run again; a torn last line is ignored.
func TestPersistedAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.jsonl")
	l, err := Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l.Do(ctx, "done", func() (Outcome, bool) { return Outcome{Code: 828, Message: "already running"}, true })
	// Simulate a crash mid-op: the begin line is on disk, the end is not.
	if err := l.appendLocked(line{ID: "midway", At: time.Now().Unix()}); err != nil {
		t.Fatal(err)
	}
	l.f.WriteString(`{"id":"torn","at":1,"outc`)
	l.Close()

	l2, err := Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	never := func() (Outcome, bool) { t.Fatal("ran again"); return Outcome{}, true }
	if out, repeat, _ := l2.Do(ctx, "done", never); !repeat || out.Code != 828 {
		t.Fatalf("done: %+v", out)
	}
	if out, repeat, _ := l2.Do(ctx, "midway", never); !repeat || out.Code != model.CodeAgentAbnormal {
		t.Fatalf("midway: %+v", out)
	}
	ran := false
	l2.Do(ctx, "torn", func() (Outcome, bool) { ran = true; return Outcome{}, true })
	if !ran {
		t.Fatal("a torn line counted as a record")
	}
}

// TestBoundedAndCompacted: only the newest keep outcomes are kept, and the
// file is rewritten before it holds more than twice keep lines (plus one
// op's two).
func TestBoundedAndCompacted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.jsonl")
	const keep = 5
	l, err := Open(path, keep)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 40 {
		l.Do(ctx, fmt.Sprint("op", i), func() (Outcome, bool) { return Outcome{Message: fmt.Sprint(i)}, true })
		if n := countLines(t, path); n > 2*keep+2 {
			t.Fatalf("after op %d the file holds %d lines", i, n)
		}
	}
	if l.Len() != keep {
		t.Fatalf("%d kept, want %d", l.Len(), keep)
	}
	l.Close()
	l2, err := Open(path, keep)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.Len() != keep {
		t.Fatalf("%d after reopen, want %d", l2.Len(), keep)
	}
	if out, repeat, _ := l2.Do(ctx, "op39", func() (Outcome, bool) { return Outcome{}, true }); !repeat || out.Message != "39" {
		t.Fatalf("newest: %+v repeat %v", out, repeat)
	}
	if _, repeat, _ := l2.Do(ctx, "op0", func() (Outcome, bool) { return Outcome{}, true }); repeat {
		t.Fatal("the oldest was kept beyond keep")
	}
}

func countLines(t *testing.T, path string) int {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	return n
}

// TestConcurrentBegins: ops that begin together on a ledger on disk (their
// begin lines synced in groups, outside the lock) each run once, all at
// the same time, and every outcome is kept across a reopen.
func TestConcurrentBegins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.jsonl")
	l, err := Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	ctx := context.Background()
	var begun sync.WaitGroup
	begun.Add(n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, repeat, err := l.Do(ctx, fmt.Sprintf("op-%d", i), func() (Outcome, bool) {
				begun.Done()
				begun.Wait() // every op is inside its run at once
				return Outcome{Code: i}, true
			})
			if err != nil || repeat {
				t.Errorf("op %d: repeat %v, %v", i, repeat, err)
			}
		})
	}
	wg.Wait()
	l.Close()
	l2, err := Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	for i := range n {
		out, repeat, err := l2.Do(ctx, fmt.Sprintf("op-%d", i), func() (Outcome, bool) { t.Fatal("ran again"); return Outcome{}, true })
		if err != nil || !repeat || out.Code != i {
			t.Fatalf("op %d after reopen: %+v repeat %v %v", i, out, repeat, err)
		}
	}
}
