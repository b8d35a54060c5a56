package cli

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"gseproc/model"
)

// lineWriter tells on lines when a line was written to it.
type lineWriter struct {
	mu    sync.Mutex
	b     strings.Builder
	lines chan struct{}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	for range strings.Count(string(p), "\n") {
		select {
		case w.lines <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// TestOpPrintsALoneResult: a result that arrives alone is printed while
// the op still runs (flushed at once, or within flushGap of the flush
// before), not held until the end: the server sends each next part of
// the stream (result 1, result 2, the end) only once the client printed
// the result before, with and without --json.
func TestOpPrintsALoneResult(t *testing.T) {
	// The first result is flushed at once (no flush before it); the
	// second comes within the gap of that flush, so it is printed only by
	// the timed flush (a machine stalled past the gap flushes it at once:
	// the test then passes without the timer, never fails for the load).
	was := flushGap
	flushGap = 500 * time.Millisecond
	t.Cleanup(func() { flushGap = was })
	start := time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC)
	task := model.Task{ID: "GSETASK:20261124050000:1", Op: model.OpRestart, Targets: 2, Status: model.TaskRunning, Created: start}
	event := func(seq int) string {
		r := model.Result{TaskID: task.ID, Seq: int64(seq), Host: model.Host{IP: "10.0.0." + string(rune('0'+seq))}, ProcKey: "web:nginx",
			Op: model.OpRestart, State: model.StateSuccess, Message: "success", Proc: model.ResultProc{ProcName: "nginx"},
			Started: start, Finished: start.Add(time.Second)}
		data, err := model.AppendResultJSON(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		return "id: " + string(rune('0'+seq)) + "\nevent: result\ndata: " + string(data) + "\n\n"
	}
	for _, jsonOut := range []bool{true, false} {
		out := &lineWriter{lines: make(chan struct{}, 16)}
		printed := []chan struct{}{make(chan struct{}), make(chan struct{})}
		hs := fakeOpServer(task, func(w http.ResponseWriter) {
			for i, part := range []string{event(1), event(2)} {
				_, _ = w.Write([]byte(part))
				w.(http.Flusher).Flush()
				select { // the next part once this one's line is out
				case <-printed[i]:
				case <-time.After(30 * time.Second):
				}
			}
			_, _ = w.Write([]byte("event: end\ndata: {}\n\n"))
		})
		cfg := t.TempDir() + "/gseproc.toml"
		if err := os.WriteFile(cfg, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"op", "restart", "--server", hs.URL, "--ns", "web", "--config", cfg}
		if jsonOut {
			args = append(args, "--json")
		}
		done := make(chan int, 1)
		var errb strings.Builder
		go func() {
			done <- Main(context.Background(), args, Stdio{In: strings.NewReader(""), Out: out, Err: &errb})
		}()
		// Each result's line (the first after the table's header without
		// --json).
		if !jsonOut {
			select {
			case <-out.lines:
			case <-time.After(30 * time.Second):
				t.Fatal("no header")
			}
		}
		for i := range printed {
			select {
			case <-out.lines:
			case <-time.After(30 * time.Second):
				t.Fatalf("json %v: result %d, alone, was not printed while the op ran", jsonOut, i+1)
			}
			close(printed[i])
		}
		if code := <-done; code != 0 {
			t.Fatalf("json %v: op exited %d: %s", jsonOut, code, errb.String())
		}
		hs.Close()
		out.mu.Lock()
		got := out.b.String()
		out.mu.Unlock()
		if !strings.Contains(got, "10.0.0.1") || !strings.Contains(got, "10.0.0.2") {
			t.Fatalf("json %v: printed %q", jsonOut, got)
		}
	}
}
