package ui

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"gseproc/backend/client"
	"gseproc/backend/config"
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
	c0 := processCPU()
	for b.Loop() {
		p := newHostsPage(s, q)
		p.SetSize(120, 36)
		t0 := time.Now()
		msg := p.load()()
		t1 := time.Now()
		p.Update(msg)
		if len(p.rows) != n {
			b.Fatalf("%d rows, want %d", len(p.rows), n)
		}
		_ = p.View()
		be += t1.Sub(t0)
		ui += time.Since(t1)
	}
	b.ReportMetric(float64((processCPU()-c0).Milliseconds())/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(n), "hosts")
	b.ReportMetric(float64(be.Milliseconds())/float64(b.N), "ms-backend")
	b.ReportMetric(float64(ui.Milliseconds())/float64(b.N), "ms-console")
}
