package ui

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/bench"
	"gseproc/model"
)

// BenchmarkSelectAllOpRemote100k is BenchmarkSelectAllOp100k in remote
// mode: the console (this process) against a real `gseproc server`
// (JetStream store) whose 100,000 simulated hosts run in a process of
// their own, so that the heap and RSS it reports are the console's alone
// (with the HTTP client it talks through). It starts those processes
// (minutes at 100,000 hosts), so it runs only when GSEPROC_BENCH_REMOTE
// is set (`make bench-console`); GSEPROC_BIN names the gseproc binary to
// run (default: one built from this module). With GSEPROC_BENCH_SERVER
// (a URL) it runs against that server instead, one bench.Start started
// (gseproc's own measurements compare console builds on one fleet), and
// with GSEPROC_BENCH_TASK (a task id) it watches that task instead of
// running an op. GSEPROC_SERVER_PROFILE (a directory) receives the
// server's profiles of the run, GSEPROC_CPU_PROFILE (a file) the
// console's CPU profile of the list's opening and the op.
func BenchmarkSelectAllOpRemote100k(b *testing.B) {
	if url := os.Getenv("GSEPROC_BENCH_SERVER"); url != "" {
		be := bench.Connect(url)
		if id := os.Getenv("GSEPROC_BENCH_TASK"); id != "" {
			// The op ran before: watch it (see selectAllWatch).
			q, n := biggestQuery(b, be)
			ts, err := be.Tasks(context.Background(), 50)
			if err != nil {
				b.Fatal(err)
			}
			i := slices.IndexFunc(ts, func(t model.Task) bool { return t.ID == id })
			if i < 0 {
				b.Fatalf("no task %s among the last 50", id)
			}
			task := ts[i]
			var f selectAllFigures
			for b.Loop() {
				f = selectAllWatch(b, be, q, n, &task, false)
			}
			f.report(b)
			return
		}
		remoteSelectAll(b, be)
		return
	}
	if os.Getenv("GSEPROC_BENCH_REMOTE") == "" {
		b.Skip("GSEPROC_BENCH_REMOTE not set: starts a server and a fleet of 100,000 hosts (make bench-console)")
	}
	bin := os.Getenv("GSEPROC_BIN")
	if bin == "" {
		bin = filepath.Join(b.TempDir(), "gseproc")
		cmd := exec.Command("go", "build", "-o", bin, "gseproc")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("build gseproc: %v\n%s", err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// GSEPROC_SERVER_PROFILE (a directory) takes the server's profiles
	// of the run (a CPU profile of 60 s from the list's opening).
	dir := os.Getenv("GSEPROC_SERVER_PROFILE")
	srv, err := bench.Start(ctx, bench.Setup{Bin: bin, Hosts: fleet100k, MaxTargets: 4 * fleet100k, Out: benchLog{b},
		ProfileDir: dir, ProfileSeconds: 60})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	finish := srv.Profile()
	remoteSelectAll(b, srv.Client())
	if err := finish(); err != nil {
		b.Log(err)
	}
}

func remoteSelectAll(b *testing.B, be backend.Backend) {
	q, n := biggestQuery(b, be)
	b.ResetTimer()
	var f selectAllFigures
	for b.Loop() {
		f = selectAllOp(b, be, q, n, false)
	}
	f.report(b)
}

// benchLog writes a harness's progress to the benchmark's log.
type benchLog struct{ b *testing.B }

func (l benchLog) Write(p []byte) (int, error) { l.b.Logf("%s", p); return len(p), nil }
