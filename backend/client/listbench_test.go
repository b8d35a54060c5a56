package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/client"
	"gseproc/backend/config"
	"gseproc/backend/cputime"
	"gseproc/backend/server"
)

// BenchmarkHostList100k: the remote console's read of its biggest host
// list over a fleet of 100,000 simulated hosts (as `make bench-console`
// runs it: the default simulator, the namespace with the most hosts), in
// the list form. The server's reply is made once by the real server and
// then served as bytes, so that what is measured is the client's read
// (the HTTP exchange on 127.0.0.1 and the parsing), not the server's
// listing); cpu-ms/op is the process's CPU (the client's read, and the
// canned server's writing of the reply), steadier than the wall time on
// a loaded machine.
func BenchmarkHostList100k(b *testing.B) {
	sc := config.Default().Simulator
	sc.Hosts = 100000
	eng, fleet := startEngine(b, sc)
	srv := server.New(eng, consoleConfig(), nil)
	real := httptest.NewServer(srv.Handler())
	b.Cleanup(func() { real.Close(); _ = srv.Close() })
	c := client.New(real.URL, client.WithCredentials("console", "s3cret", "tester"))
	b.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	nss, err := c.Namespaces(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var q backend.HostQuery
	most := 0
	for _, ns := range nss {
		if ns.Hosts > most {
			q, most = backend.HostQuery{Namespace: ns.Name}, ns.Hosts
		}
	}
	body, _ := json.Marshal(q)
	req, _ := http.NewRequest(http.MethodPost, real.URL+"/api/v1/hosts?form=list", bytes.NewReader(body))
	req.Header.Set("X-Bkapi-Authorization", `{"bk_app_code":"console","bk_app_secret":"s3cret","bk_username":"tester"}`)
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
	// The fleet's simulation stops: it would run beside every read.
	real.Close()
	_ = eng.Close()
	_ = fleet.Close()
	canned := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header()[k] = v
		}
		_, _ = w.Write(reply)
	}))
	b.Cleanup(canned.Close)
	cc := client.New(canned.URL)
	b.Cleanup(func() { _ = cc.Close() })

	var n, first int
	var toFirst time.Duration
	b.SetBytes(int64(len(reply)))
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cputime.Self()
	for b.Loop() {
		n = 0
		t0 := time.Now()
		if err := cc.HostListEach(ctx, q, func(v *backend.HostView) {
			if n == 0 {
				toFirst += time.Since(t0)
			}
			n++
		}); err != nil {
			b.Fatal(err)
		}
		if first == 0 {
			first = n
		}
		if n != first || n < 50000 {
			b.Fatalf("%d hosts (first read %d)", n, first)
		}
	}
	b.ReportMetric(float64((cputime.Self()-c0).Milliseconds())/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(n), "hosts")
	b.ReportMetric(float64(toFirst.Milliseconds())/float64(b.N), "ms-to-first-host")
}
