package bench

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFetchSent: a profile's fetch says its request is sent while the
// server still holds the answer (a profile of a duration answers at its
// end), so a run can begin under it without a guessed sleep; and says
// so too when the request fails, so nothing waits on it for ever.
func TestFetchSent(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		_, _ = w.Write([]byte("profile"))
	}))
	defer srv.Close()
	p := &profiler{e: &env{setup: Setup{ProfileSeconds: 1}}, dir: t.TempDir()}
	sent := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.fetchSent(srv.URL, "cpu.pprof", "profile?seconds=1", func() { close(sent) })
	}()
	select {
	case <-sent:
	case <-done:
		t.Fatal("the fetch ended without saying its request was sent")
	case <-time.After(time.Minute):
		t.Fatal("the request was not said sent while the server held its answer")
	}
	close(release)
	<-done
	if b, err := os.ReadFile(filepath.Join(p.dir, "cpu.pprof")); err != nil || string(b) != "profile" {
		t.Fatalf("saved %q, %v", b, err)
	}

	told := make(chan struct{})
	p.fetchSent("http://127.0.0.1:1", "x.pprof", "profile", func() { close(told) }) // closes told exactly once, or panics
	select {
	case <-told:
	default:
		t.Fatal("a failed fetch did not say so")
	}
	if len(p.errs) != 1 {
		t.Fatalf("errors %v, want the failed fetch's", p.errs)
	}
}
