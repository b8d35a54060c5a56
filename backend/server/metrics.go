package server

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// metrics is a small registry written in the Prometheus text exposition
// format (version 0.0.4), so the server needs no client library.
type metrics struct {
	mu       sync.Mutex
	requests map[[2]string]uint64 // endpoint, code
	latency  map[string]*histogram
	tasks    map[[2]string]uint64 // op, source
	outcomes map[string]uint64    // result state
	hostDur  *histogram
	streams  atomic.Int64
}

var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
var hostBuckets = []float64{.001, .005, .01, .05, .1, .5, 1, 2.5, 5, 10, 30, 60, 120}

type histogram struct {
	bounds []float64
	counts []uint64 // per bucket, not cumulative; last is +Inf
	sum    float64
	n      uint64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v)
	h.counts[i]++
	h.sum += v
	h.n++
}

func newMetrics() *metrics {
	return &metrics{requests: map[[2]string]uint64{}, latency: map[string]*histogram{},
		tasks: map[[2]string]uint64{}, outcomes: map[string]uint64{}, hostDur: newHistogram(hostBuckets)}
}

func (m *metrics) request(endpoint string, code int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[[2]string{endpoint, strconv.Itoa(code)}]++
	h := m.latency[endpoint]
	if h == nil {
		h = newHistogram(latencyBuckets)
		m.latency[endpoint] = h
	}
	h.observe(d.Seconds())
}

func (m *metrics) task(op, source string) {
	m.mu.Lock()
	m.tasks[[2]string{op, source}]++
	m.mu.Unlock()
}

func (m *metrics) outcome(state string, d time.Duration) {
	m.mu.Lock()
	m.outcomes[state]++
	if d > 0 {
		m.hostDur.observe(d.Seconds())
	}
	m.mu.Unlock()
}

// labelEscaper escapes a label value as the exposition format requires.
var labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)

func label(s string) string { return labelEscaper.Replace(s) }

// sortedPairs returns the keys of a two-label counter in order.
func sortedPairs(m map[[2]string]uint64) [][2]string {
	return slices.SortedFunc(maps.Keys(m), func(a, b [2]string) int {
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
	})
}

func fmtFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func writeHistogram(w io.Writer, name, labels string, h *histogram) {
	var cum uint64
	sep := ""
	if labels != "" {
		sep = ","
	}
	for i, b := range append(append([]float64(nil), h.bounds...), math.Inf(1)) {
		cum += h.counts[i]
		fmt.Fprintf(w, "%s_bucket{%s%sle=\"%s\"} %d\n", name, labels, sep, fmtFloat(b), cum)
	}
	if labels != "" {
		labels = "{" + labels + "}"
	}
	fmt.Fprintf(w, "%s_sum%s %s\n%s_count%s %d\n", name, labels, fmtFloat(h.sum), name, labels, h.n)
}

// write renders every metric, sorted for stable output.
func (m *metrics) write(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()

	fmt.Fprintln(w, "# HELP gseproc_http_requests_total API requests by endpoint and envelope code.")
	fmt.Fprintln(w, "# TYPE gseproc_http_requests_total counter")
	for _, k := range sortedPairs(m.requests) {
		fmt.Fprintf(w, "gseproc_http_requests_total{endpoint=\"%s\",code=\"%s\"} %d\n", label(k[0]), k[1], m.requests[k])
	}

	fmt.Fprintln(w, "# HELP gseproc_http_request_duration_seconds API request latency by endpoint.")
	fmt.Fprintln(w, "# TYPE gseproc_http_request_duration_seconds histogram")
	for _, e := range slices.Sorted(maps.Keys(m.latency)) {
		writeHistogram(w, "gseproc_http_request_duration_seconds", `endpoint="`+label(e)+`"`, m.latency[e])
	}

	fmt.Fprintln(w, "# HELP gseproc_tasks_created_total Tasks created through this server by op and source.")
	fmt.Fprintln(w, "# TYPE gseproc_tasks_created_total counter")
	for _, k := range sortedPairs(m.tasks) {
		fmt.Fprintf(w, "gseproc_tasks_created_total{op=\"%s\",source=\"%s\"} %d\n", label(k[0]), label(k[1]), m.tasks[k])
	}

	fmt.Fprintln(w, "# HELP gseproc_host_results_total Final per-host results of tasks created through this server, by state.")
	fmt.Fprintln(w, "# TYPE gseproc_host_results_total counter")
	for _, s := range slices.Sorted(maps.Keys(m.outcomes)) {
		fmt.Fprintf(w, "gseproc_host_results_total{state=\"%s\"} %d\n", label(s), m.outcomes[s])
	}

	fmt.Fprintln(w, "# HELP gseproc_host_result_duration_seconds Time from dispatch to a host's final result.")
	fmt.Fprintln(w, "# TYPE gseproc_host_result_duration_seconds histogram")
	writeHistogram(w, "gseproc_host_result_duration_seconds", "", m.hostDur)

	fmt.Fprintln(w, "# HELP gseproc_sse_streams Open Server-Sent Events streams.")
	fmt.Fprintln(w, "# TYPE gseproc_sse_streams gauge")
	fmt.Fprintf(w, "gseproc_sse_streams %d\n", m.streams.Load())
}
