//go:build !windows

package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"gseproc/backend/config"
	"gseproc/backend/cputime"
	"gseproc/backend/engine"
	"gseproc/backend/simulator"
	"gseproc/backend/store"
)

// BenchmarkHostListReply100k: the whole of a 100,000-host list form's
// reply on the server (GET /api/v1/hosts?form=list through the handler:
// the engine's listing over a simulated fleet, the list writer, the
// envelope) written to a ResponseWriter that keeps nothing; cpu-ms/op is
// the process's CPU (GC included), steadier than the wall time on a
// loaded machine.
func BenchmarkHostListReply100k(b *testing.B) {
	sc := quietSim()
	sc.Hosts, sc.Seed, sc.Demo = 100_000, 1, false
	fleet := simulator.New(sc)
	ec := config.Default().Engine
	ec.MaxTargets = 400_000
	eng := engine.New(ec, fleet, fleet, store.NewMemory())
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = eng.Close(); _ = fleet.Close() })
	if err := eng.Seed(ctx, fleet.Definitions()); err != nil {
		b.Fatal(err)
	}
	srv := New(eng, testConfig(), nil)
	b.Cleanup(func() { _ = srv.Close() })
	h := srv.Handler()
	req := httptest.NewRequest(http.MethodGet, "/api/v1/hosts?form=list", nil)
	var w discardWriter
	b.ReportAllocs()
	cpu := cputime.Self()
	for b.Loop() {
		w = discardWriter{h: http.Header{}}
		h.ServeHTTP(&w, req)
		if w.status != http.StatusOK || w.n < 1<<20 {
			b.Fatalf("status %d, %d bytes", w.status, w.n)
		}
	}
	b.ReportMetric(float64(w.n), "B/reply")
	b.ReportMetric(float64(cputime.Self()-cpu)/1e6/float64(b.N), "cpu-ms/op")
}

// discardWriter is a ResponseWriter that counts what it is written.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(p)
	return len(p), nil
}
