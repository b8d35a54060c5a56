package server

import (
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"gseproc/backend/health"
	"gseproc/model"
)

// metrics is the server's Prometheus registry: its own API and task
// figures, the readiness figures when the server has a prober, and the Go
// runtime and process collectors. Each server has its own registry (no
// global state), served by promhttp at /metrics.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec   // endpoint, code
	latency  *prometheus.HistogramVec // endpoint
	tasks    *prometheus.CounterVec   // op, source
	outcomes *prometheus.CounterVec   // result state
	// outcomeOf are outcomes' counters of the final states, each looked
	// up once (its first result): every result of every op counts one,
	// and the lookup by label (a hash of the label, a lock) was ~1.5% of
	// the server's CPU in an op over 10,000 hosts.
	outcomeOf [len(finalStates)]atomic.Pointer[prometheus.Counter]
	hostDur   prometheus.Histogram
	streams   prometheus.Gauge
}

var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
var hostBuckets = []float64{.001, .005, .01, .05, .1, .5, 1, 2.5, 5, 10, 30, 60, 120}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gseproc_http_requests_total",
			Help: "API requests by endpoint and envelope code."}, []string{"endpoint", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gseproc_http_request_duration_seconds",
			Help: "API request latency by endpoint.", Buckets: latencyBuckets}, []string{"endpoint"}),
		tasks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gseproc_tasks_created_total",
			Help: "Tasks created through this server by op and source."}, []string{"op", "source"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gseproc_host_results_total",
			Help: "Final per-host results of tasks created through this server, by state."}, []string{"state"}),
		hostDur: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gseproc_host_result_duration_seconds",
			Help: "Time from dispatch to a host's final result.", Buckets: hostBuckets}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gseproc_sse_streams",
			Help: "Open Server-Sent Events streams."}),
	}
	m.reg.MustRegister(m.requests, m.latency, m.tasks, m.outcomes, m.hostDur, m.streams,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) request(endpoint string, code int, d time.Duration) {
	m.requests.WithLabelValues(endpoint, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(endpoint).Observe(d.Seconds())
}

func (m *metrics) task(op, source string) { m.tasks.WithLabelValues(op, source).Inc() }

// finalStates are the result states outcomeOf keeps counters of.
var finalStates = [...]model.ResultState{model.StateSuccess, model.StateFailed, model.StateTimeout, model.StateUnreachable,
	model.StateCancelled, model.StateSkipped}

// outcomeCounter is the counter of results in state.
func (m *metrics) outcomeCounter(state string) prometheus.Counter {
	i := slices.Index(finalStates[:], model.ResultState(state))
	if i < 0 {
		return m.outcomes.WithLabelValues(state)
	}
	if c := m.outcomeOf[i].Load(); c != nil {
		return *c
	}
	c := m.outcomes.WithLabelValues(state) // the same counter whoever looks it up first
	m.outcomeOf[i].Store(&c)
	return c
}

func (m *metrics) outcome(state string, d time.Duration) {
	m.outcomeCounter(state).Inc()
	if d > 0 {
		m.hostDur.Observe(d.Seconds())
	}
}

// readiness exports the prober's findings, read once per scrape.
func (m *metrics) readiness(status func() health.Status) {
	m.reg.MustRegister(readinessCollector{status})
}

// WithBacklog exports backlog's figures, read at each scrape, as the
// gauges gseproc_events_queued and gseproc_writes_queued: the host events
// and the writes (results, last known statuses) the engine has queued or
// is storing. Both 0 says what the server was handed is stored: a
// benchmark waits on it for start-up's events (100,000 agents coming
// online) before it measures an op.
func WithBacklog(backlog func() (events, writes int)) Option {
	return func(s *Server) {
		s.metrics.reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gseproc_events_queued",
				Help: "Host events queued or being stored."}, func() float64 {
				ev, _ := backlog()
				return float64(ev)
			}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gseproc_writes_queued",
				Help: "Results and last known statuses queued or being stored."}, func() float64 {
				_, w := backlog()
				return float64(w)
			}))
	}
}

// handler serves the registry in the exposition format the scraper asks
// for (the text format by default).
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
