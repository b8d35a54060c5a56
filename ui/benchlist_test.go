package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"gseproc/backend"
	"gseproc/backend/bench"
	"gseproc/backend/client"
	"gseproc/backend/config"
	"gseproc/backend/cputime"
	"gseproc/backend/server"
)

// BenchmarkOpenHostsRemote100k: the remote console opening its biggest
// host list over a fleet of 100,000 simulated hosts (the default
// simulator, as `make bench-console` runs it): the reply read through the
// client and made rows (ms-backend), then the page taking them and
// drawing its frame (ms-console). The server's reply is made once by the
// real server and then served as bytes: what is measured is the
// console's side of the open (the server's listing is the server's
// benchmarks'); cpu-ms/op is the process's CPU, steadier than the wall
// time on a loaded machine.
func BenchmarkOpenHostsRemote100k(b *testing.B) {
	sc := config.Default().Simulator
	sc.Hosts = fleet100k
	e, fleet := simBackendEngine(b, sc, config.Default().Engine)
	q, n := biggestQuery(b, e)
	scfg := config.Default().Server
	scfg.Apps = []config.AppConfig{{Code: "console", Salt: "pepper", SecretSHA256: config.HashSecret("pepper", "s3cret"),
		Biz: []int{1}, Namespaces: []string{"*"}}}
	srv := server.New(e, scfg, nil)
	real := httptest.NewServer(srv.Handler())
	body, _ := json.Marshal(q)
	req, _ := http.NewRequest(http.MethodPost, real.URL+"/api/v1/hosts?form=list", bytes.NewReader(body))
	req.Header.Set("X-Bkapi-Authorization", `{"bk_app_code":"console","bk_app_secret":"s3cret","bk_username":"bench"}`)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	reply, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("list: %s %v", resp.Status, err)
	}
	header := resp.Header.Clone()
	// The fleet's simulation stops: it would run beside every open.
	real.Close()
	_ = srv.Close()
	_ = e.Close()
	_ = fleet.Close()
	canned := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header()[k] = v
		}
		_, _ = w.Write(reply)
	}))
	b.Cleanup(canned.Close)
	c := client.New(canned.URL)
	b.Cleanup(func() { _ = c.Close() })

	s := benchShared(b, 120, 40)
	s.be = guard(c)
	var be, ui time.Duration
	b.SetBytes(int64(len(reply)))
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cputime.Self()
	for b.Loop() {
		p := newHostsPage(s, q)
		p.SetSize(120, 36)
		dbe, dui := openWhole(b, p, n)
		be, ui = be+dbe, ui+dui
	}
	b.ReportMetric(float64((cputime.Self()-c0).Milliseconds())/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(n), "hosts")
	b.ReportMetric(float64(be.Milliseconds())/float64(b.N), "ms-backend")
	b.ReportMetric(float64(ui.Milliseconds())/float64(b.N), "ms-console")
}

// BenchmarkOpenHostsServer100k: the remote console opening its biggest
// host list from a real `gseproc server` over 100,000 simulated hosts in
// a process of their own, as BenchmarkSelectAllOpRemote100k starts them
// (GSEPROC_BENCH_REMOTE, GSEPROC_BIN; or GSEPROC_BENCH_SERVER, a URL),
// the list opened again and again on one server: ms-open and
// ms-open-cpu as the remote benchmark measures them (the whole list in,
// drawn; this process's CPU), ms-server the list request's time to the
// first byte of its reply (the server's listing, which the console
// waits for); ms-list-alone and ms-server-alone the same list read
// through the client with nothing else asked of the server.
func BenchmarkOpenHostsServer100k(b *testing.B) {
	rt := &firstByte{rt: http.DefaultTransport}
	http.DefaultTransport = rt // every client of this process: bench.Connect's too
	defer func() { http.DefaultTransport = rt.rt }()
	var (
		be      backend.Backend
		profile func() (finish func() error) // the server's profiles, when started here
	)
	if url := os.Getenv("GSEPROC_BENCH_SERVER"); url != "" {
		be = bench.Connect(url)
	} else {
		if os.Getenv("GSEPROC_BENCH_REMOTE") == "" {
			b.Skip("GSEPROC_BENCH_REMOTE not set: starts a server and a fleet of 100,000 hosts")
		}
		bin := os.Getenv("GSEPROC_BIN")
		if bin == "" {
			bin = filepath.Join(b.TempDir(), "gseproc")
			if out, err := exec.Command("go", "build", "-o", bin, "gseproc").CombinedOutput(); err != nil {
				b.Fatalf("build gseproc: %v\n%s", err, out)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		// GSEPROC_SERVER_PROFILE (a directory) takes the server's
		// profiles of the opens (a CPU profile of 15 s from the first).
		dir := os.Getenv("GSEPROC_SERVER_PROFILE")
		srv, err := bench.Start(ctx, bench.Setup{Bin: bin, Hosts: fleet100k, MaxTargets: 4 * fleet100k, Out: benchLog{b},
			ProfileDir: dir, ProfileSeconds: 15})
		if err != nil {
			b.Fatal(err)
		}
		defer srv.Stop()
		be, profile = srv.Client(), srv.Profile
	}
	q, n := biggestQuery(b, be)
	if profile != nil {
		// From here: biggestQuery's full listings of every namespace
		// (the JSON form, ~0.8 s of the server's CPU each) were most of
		// a profile started before them.
		finish := profile()
		defer func() {
			if err := finish(); err != nil {
				b.Log(err)
			}
		}()
	}
	var open, cpu, server, alone, aloneServer time.Duration
	b.ResetTimer()
	for b.Loop() {
		m, err := New(context.Background(), Options{Backend: be, Config: config.Default().Console, Theme: monoTheme(b), Static: true, Operator: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
		hp := newHostsPage(m.s, q)
		rt.reset()
		t0, c0 := time.Now(), cputime.Self()
		runUntil(b, m, func() tea.Msg { return pushMsg{hp} }, func() bool { return hp.loaded })
		_ = m.View()
		open, cpu, server = open+time.Since(t0), cpu+cputime.Self()-c0, server+rt.longest()
		if len(hp.rows) != n {
			b.Fatalf("%d rows, want %d", len(hp.rows), n)
		}
		m.Close()
		// The list alone, no other request beside it: the server's
		// time to its first byte, and the whole read.
		rt.reset()
		t0 = time.Now()
		if err := backend.HostListEach(context.Background(), be, q, func(*backend.HostView) {}); err != nil {
			b.Fatal(err)
		}
		alone, aloneServer = alone+time.Since(t0), aloneServer+rt.longest()
	}
	b.ReportMetric(float64(n), "hosts")
	b.ReportMetric(float64(open.Milliseconds())/float64(b.N), "ms-open")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "ms-open-cpu")
	b.ReportMetric(float64(server.Milliseconds())/float64(b.N), "ms-server")
	b.ReportMetric(float64(alone.Milliseconds())/float64(b.N), "ms-list-alone")
	b.ReportMetric(float64(aloneServer.Milliseconds())/float64(b.N), "ms-server-alone")
}

// firstByte times host list requests to their reply's first byte.
type firstByte struct {
	rt  http.RoundTripper
	mu  sync.Mutex
	max time.Duration
}

func (f *firstByte) RoundTrip(r *http.Request) (*http.Response, error) {
	t0 := time.Now()
	resp, err := f.rt.RoundTrip(r)
	if r.URL.Path == "/api/v1/hosts" {
		f.mu.Lock()
		f.max = max(f.max, time.Since(t0))
		f.mu.Unlock()
	}
	return resp, err
}

func (f *firstByte) reset() { f.mu.Lock(); f.max = 0; f.mu.Unlock() }

func (f *firstByte) longest() time.Duration { f.mu.Lock(); defer f.mu.Unlock(); return f.max }
