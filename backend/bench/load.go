package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gseproc/model"
)

// LoadOptions are `gseproc bench operate`'s: Clients concurrent callers of
// GSE operate_proc (status of one registered process on one host each),
// until Requests calls were made or Duration passed, whichever is first.
type LoadOptions struct {
	Setup
	Clients  int           // default 50
	Requests int           // default 40000
	Duration time.Duration // default 10s
	// Namespace and Name: the registered process each call operates
	// (default gse / bkmonitorbeat); hosts are taken from its definition
	// in turn.
	Namespace, Name string
}

// LoadResult are the figures of one load run.
type LoadResult struct {
	Calls, OK          int
	Elapsed            time.Duration
	P50, P99, Max      time.Duration
	Errors             map[string]int // by kind
	ServerRSS, PeakRSS int64
	ServerCPU          time.Duration
	// ServerAllocs is how many heap objects the server allocated during
	// the load (its go_memstats_mallocs_total; 0 when unread).
	ServerAllocs uint64
	MaxConsumers int
	// Drained is how long after the load the server took to run no task
	// (every accepted call's task stored complete; 0 when not waited
	// for: its metrics unread); ServerCPUAll and ServerAllocsAll count
	// from the load's start to then, so that the work a call leaves
	// behind (its result and its task's end stored) is counted. IdleCPU
	// is the server's CPU per second when no call is made (the fleet's
	// heartbeats), measured before the load.
	Drained         time.Duration
	ServerCPUAll    time.Duration
	ServerAllocsAll uint64
	IdleCPU         time.Duration
	// Stored is how many messages each JetStream stream stored from the
	// load's start to the last task stored (nil when unread).
	Stored map[string]uint64
}

// drainWait bounds the wait for the last task's end after the load.
const drainWait = time.Minute

// idleSample is how long the server's idle CPU is measured.
const idleSample = 2 * time.Second

// Operate starts the server and fleet and runs the load.
func Operate(ctx context.Context, o LoadOptions) (LoadResult, error) {
	if o.Clients <= 0 {
		o.Clients = 50
	}
	if o.Requests <= 0 {
		o.Requests = 40000
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Namespace == "" && o.Name == "" {
		o.Namespace, o.Name = "gse", "bkmonitorbeat"
	}
	e, err := start(ctx, o.Setup)
	if err != nil {
		return LoadResult{}, err
	}
	defer e.stop()
	var hosts []model.Host
	for _, d := range e.defs {
		if d.Process.Meta.Namespace == o.Namespace && d.Process.Meta.Name == o.Name {
			hosts = d.Hosts
		}
	}
	if len(hosts) == 0 {
		return LoadResult{}, fmt.Errorf("bench: %s:%s is not deployed on any host of the fleet", o.Namespace, o.Name)
	}
	prof := e.startProfile()
	res, err := e.load(ctx, o, hosts)
	if perr := prof.finish(); perr != nil {
		fmt.Fprintf(e.setup.Out, "warning: %v\n", perr)
	}
	if err != nil {
		return res, err
	}
	res.print(e.setup.Out, o)
	return res, nil
}

func (r LoadResult) print(w io.Writer, o LoadOptions) {
	limit := "no app rate limit"
	if o.Rate > 0 {
		limit = fmt.Sprintf("app rate limit %g/s burst %d", o.Rate, o.Burst)
	}
	fmt.Fprintf(w, "operate_proc load: %d clients, %s, bounded by %d calls and %s\n", o.Clients, limit, o.Requests, o.Duration)
	rate := float64(r.Calls) / r.Elapsed.Seconds()
	okRate := float64(r.OK) / r.Elapsed.Seconds()
	fmt.Fprintf(w, "calls %d in %s: %.0f calls/s, %.0f accepted/s; latency p50 %s p99 %s max %s\n",
		r.Calls, r.Elapsed.Round(time.Millisecond), rate, okRate, ms(r.P50), ms(r.P99), ms(r.Max))
	fmt.Fprintf(w, "server: RSS %s (peak %s), CPU %s; JetStream consumers at most %d\n",
		mb(r.ServerRSS), mb(r.PeakRSS), r.ServerCPU.Round(time.Millisecond), r.MaxConsumers)
	if r.Calls > 0 {
		fmt.Fprintf(w, "server per call: CPU %.3f ms, %d allocations\n",
			float64(r.ServerCPU)/float64(time.Millisecond)/float64(r.Calls), r.ServerAllocs/uint64(r.Calls))
	}
	if r.Calls > 0 && r.Drained > 0 {
		net := r.ServerCPUAll - time.Duration(float64(r.IdleCPU)*(r.Elapsed+r.Drained).Seconds())
		fmt.Fprintf(w, "server to the last task stored (%s after the load): CPU %s, %.3f ms per call net of its idle %.0f%% of a core; %d allocations per call\n",
			r.Drained.Round(time.Millisecond), r.ServerCPUAll.Round(time.Millisecond),
			float64(net)/float64(time.Millisecond)/float64(r.Calls), 100*r.IdleCPU.Seconds(), r.ServerAllocsAll/uint64(r.Calls))
	}
	if r.Calls > 0 && len(r.Stored) > 0 {
		var total uint64
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(r.Stored)) {
			if n := r.Stored[k]; n > 0 {
				total += n
				parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(n)/float64(r.Calls)))
			}
		}
		fmt.Fprintf(w, "JetStream messages stored per call: %.2f (%s)\n", float64(total)/float64(r.Calls), strings.Join(parts, ", "))
	}
	if len(r.Errors) == 0 {
		fmt.Fprintln(w, "errors: none")
		return
	}
	fmt.Fprintln(w, "errors by kind:")
	for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
		fmt.Fprintf(w, "  %7d  %s\n", r.Errors[k], k)
	}
}

// load runs the callers and samples the server meanwhile.
func (e *env) load(ctx context.Context, o LoadOptions, hosts []model.Host) (LoadResult, error) {
	var res LoadResult
	pid := e.server.cmd.Process.Pid
	hc := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConns:        o.Clients,
			MaxIdleConnsPerHost: o.Clients,
		},
	}
	defer hc.CloseIdleConnections()
	endpoint := e.url + "/api/c/compapi/v2/gse/operate_proc/"

	ui, err := readUsage(pid)
	if err != nil {
		return res, err
	}
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(idleSample):
	}
	m0, merr := e.mallocs(ctx, hc)
	seq0, serr := e.streamSeqs(ctx)
	u0, err := readUsage(pid)
	if err != nil {
		return res, err
	}
	res.IdleCPU = time.Duration(float64(u0.CPU-ui.CPU) / idleSample.Seconds())
	lctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	var next atomic.Int64
	type sample struct {
		d    time.Duration
		kind string // "" = accepted
	}
	samples := make([][]sample, o.Clients)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range o.Clients {
		wg.Go(func() {
			for lctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(o.Requests) {
					return
				}
				h := hosts[int(i)%len(hosts)]
				body, _ := json.Marshal(map[string]any{
					"bk_app_code": appCode, "bk_app_secret": appSecret, "bk_username": "bench",
					"meta": map[string]string{"namespace": o.Namespace, "name": o.Name}, "op_type": int(model.OpStatus),
					"hosts": []model.Host{h},
				})
				t0 := time.Now()
				kind := call(lctx, hc, endpoint, body)
				if kind == "cut" {
					return // the time bound ended this call: not counted
				}
				samples[c] = append(samples[c], sample{time.Since(t0), kind})
			}
		})
	}
	// Sample the server's consumers and RSS while the load runs.
	var peakRSS int64
	sampler := make(chan struct{})
	var swg sync.WaitGroup
	swg.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			if n, err := e.consumers(ctx); err == nil {
				res.MaxConsumers = max(res.MaxConsumers, n)
			}
			if u, err := readUsage(pid); err == nil {
				peakRSS = max(peakRSS, u.RSS)
			}
			select {
			case <-sampler:
				return
			case <-t.C:
			}
		}
	})
	wg.Wait()
	res.Elapsed = time.Since(start)
	close(sampler)
	swg.Wait()

	res.Errors = map[string]int{}
	var all []time.Duration
	for _, l := range samples {
		for _, s := range l {
			res.Calls++
			all = append(all, s.d)
			if s.kind == "" {
				res.OK++
			} else {
				res.Errors[s.kind]++
			}
		}
	}
	res.P50, res.P99, res.Max = pct(all, 50), pct(all, 99), pct(all, 100)
	u1, err := readUsage(pid)
	if err != nil {
		return res, err
	}
	if m1, err := e.mallocs(ctx, hc); err == nil && merr == nil {
		res.ServerAllocs = m1 - m0
	}
	res.ServerRSS, res.PeakRSS, res.ServerCPU = u1.RSS, max(peakRSS, u1.RSS), u1.CPU-u0.CPU
	if merr == nil {
		// Until the server runs no task (every accepted call's task
		// stored complete), bounded by drainWait.
		end := time.Now()
		for deadline := end.Add(drainWait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if info, err := e.client.Info(ctx); err != nil || info.Running == 0 {
				break
			}
		}
		u2, uerr := readUsage(pid)
		m2, err := e.mallocs(ctx, hc)
		if seq2, err := e.streamSeqs(ctx); err == nil && serr == nil {
			res.Stored = storedDelta(seq0, seq2)
		}
		if uerr == nil && err == nil {
			res.Drained = max(time.Since(end), time.Millisecond)
			res.ServerCPUAll, res.ServerAllocsAll = u2.CPU-u0.CPU, m2-m0
		}
	}
	return res, nil
}

// call makes one API call; it returns "" when accepted, "cut" when ctx
// ended it, else the kind of failure.
func call(ctx context.Context, hc *http.Client, url string, body []byte) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "request: " + err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return "cut"
		case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout"):
			return "client timeout (5s)"
		}
		return "http: " + err.Error()
	}
	defer resp.Body.Close()
	var env struct {
		Result  bool   `json:"result"`
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		if ctx.Err() != nil {
			return "cut"
		}
		return fmt.Sprintf("HTTP %d, body not an envelope", resp.StatusCode)
	}
	if env.Result {
		return ""
	}
	msg, _, _ := strings.Cut(env.Message, ":")
	return fmt.Sprintf("code %d: %s", env.Code, msg)
}

// mallocs reads the server's count of heap allocations so far from its
// /metrics (go_memstats_mallocs_total).
func (e *env) mallocs(ctx context.Context, hc *http.Client) (uint64, error) {
	page, err := metricsPage(ctx, hc, e.url)
	if err != nil {
		return 0, err
	}
	return metricValue(page, "go_memstats_mallocs_total")
}

// metricsPage is the server's /metrics page (base: the API's address).
func metricsPage(ctx context.Context, hc *http.Client, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("bench: read metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("bench: read metrics: %s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("bench: read metrics: %w", err)
	}
	return string(body), nil
}

// errMetricMissing: the page has no such metric.
var errMetricMissing = errors.New("not found")

// metricValue is the value of the unlabelled metric name in a Prometheus
// text exposition (errMetricMissing when it has none).
func metricValue(text, name string) (uint64, error) {
	for line := range strings.Lines(text) {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return 0, fmt.Errorf("bench: metric %s: %w", name, err)
		}
		return uint64(f), nil
	}
	return 0, fmt.Errorf("bench: metric %s: %w", name, errMetricMissing)
}

// storedDelta is what each stream stored between two readings of their
// last sequences (was, now): a stream whose sequence went back (made
// again between them) counts 0, not a wrapped difference.
func storedDelta(was, now map[string]uint64) map[string]uint64 {
	d := make(map[string]uint64, len(now))
	for k, v := range now {
		d[k] = v - min(v, was[k])
	}
	return d
}
