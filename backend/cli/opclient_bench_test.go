package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"gseproc/backend/cputime"
	"gseproc/model"
)

// BenchmarkOpClient: `gseproc op status --server URL --json` over 10,000
// targets, the whole client (Main: flags, connection, stream read,
// decode, print), against a server that answers from bytes made before
// (a task stream as the server writes it, status results), so that what
// is measured is the client's work per op. Its CPU time per op is what
// bench fleet's "client CPU" column measures in place (cpu-ns/op).
func BenchmarkOpClient(b *testing.B) {
	const n = 10000
	start := time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC)
	task := model.Task{ID: "GSETASK:20261124050000:1", Op: model.OpStatus, Targets: n, Status: model.TaskRunning, Created: start}
	var stream []byte
	for i := range n {
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)
		at := start.Add(time.Duration(i) * 37 * time.Microsecond)
		r := model.Result{TaskID: task.ID, Seq: int64(i + 1), Host: model.Host{IP: ip}, ProcKey: "gse:bkmonitorbeat",
			Op: model.OpStatus, State: model.StateSuccess, Message: "success",
			Proc: model.ResultProc{ProcName: "bkmonitorbeat", SetupPath: "/usr/local/gse/plugins/bin"},
			Status: &model.ProcStatus{ProcKey: "gse:bkmonitorbeat", ProcName: "bkmonitorbeat", State: model.ProcRunning, PID: 4000 + i, Hosted: true,
				StartTime: start.Add(-time.Duration(i) * time.Hour), ReportTime: start.Unix(), CPU: float64(i%400) / 16, Mem: float64(i%100) / 8,
				MemRSS: uint64(12<<20 + i), Version: "3.40.1911", Threads: 7},
			Started: at, Finished: at.Add(time.Duration(3+i%50) * time.Millisecond)}
		stream = fmt.Appendf(stream, "id: %d\nevent: result\ndata: ", i+1)
		stream, _ = model.AppendResultJSON(stream, &r)
		stream = append(stream, "\n\n"...)
	}
	stream = append(stream, "event: end\ndata: {}\n\n"...)
	hs := fakeOpServer(task, func(w http.ResponseWriter) { _, _ = w.Write(stream) })
	defer hs.Close()
	cfg := b.TempDir() + "/gseproc.toml"
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	args := []string{"op", "status", "--server", hs.URL, "--ns", "gse", "--json", "--config", cfg}
	var out, errb strings.Builder
	if code := Main(context.Background(), args, Stdio{In: strings.NewReader(""), Out: &out, Err: &errb}); code != 0 || strings.Count(out.String(), "\n") != n {
		b.Fatalf("op exited %d with %d lines: %s", code, strings.Count(out.String(), "\n"), errb.String())
	}
	discard := Stdio{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard}
	b.ReportAllocs()
	// The process's CPU per op (the client's two goroutines, and the
	// test server's writing, which is the same for every client): on a
	// loaded machine steadier than the time per op.
	cpu0 := cputime.Self()
	for b.Loop() {
		if code := Main(context.Background(), args, discard); code != 0 { // a broken run is not a fast one
			b.Fatalf("op exited %d", code)
		}
	}
	b.ReportMetric(float64(cputime.Self()-cpu0)/float64(b.N), "cpu-ns/op")
}
