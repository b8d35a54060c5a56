package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gseproc/backend"
	"gseproc/backend/health"
)

// WithReadiness gives the server the background prober's findings (see
// backend/health): /readyz reports them, /metrics exports them, and while
// the state is not ready every API call is answered at once with 503 and
// the reason instead of stalling on NATS. Without it the server is always
// ready (an in-process backend).
func WithReadiness(status func() health.Status) Option {
	return func(s *Server) { s.readiness = status }
}

// ready is the readiness as last probed.
func (s *Server) ready() health.Status {
	if s.readiness == nil {
		now := time.Now()
		return health.Status{State: health.StateReady, Ready: true, Checked: now, Since: now, NATS: "n/a"}
	}
	return s.readiness()
}

// unavailable refuses an API call while the server is not ready, and sets
// backend.NotReadyHeader in h to the state (the call was refused before
// anything was done: a client may send it to another server). Message and
// header come from one reading of the readiness.
func (s *Server) unavailable(h http.Header) *apiError {
	if s.readiness == nil {
		return nil
	}
	st := s.readiness()
	if st.Ready {
		return nil
	}
	h.Set(backend.NotReadyHeader, st.State)
	return &apiError{status: http.StatusServiceUnavailable, code: CodeSystem,
		msg: fmt.Sprintf("service unavailable (%s since %s): %s", st.State, st.Since.UTC().Format(time.RFC3339), st.Reason)}
}

// healthz is liveness: the process serves HTTP (200 whatever the state,
// so that nothing restarts a server for an outage of NATS). It touches
// nothing else, and says at once what /readyz says: the state and, when
// not ready, why and since when; and the store's streams unavailable
// while the server stays ready (degraded).
func (s *Server) healthz(context.Context, *call) (any, *apiError) {
	st := s.ready()
	out := map[string]any{"status": "ok", "state": st.State, "ready": st.Ready}
	if !st.Ready {
		out["reason"], out["since"] = st.Reason, st.Since
	}
	if st.Degraded != "" {
		out["degraded"], out["streams_unavailable"] = st.Degraded, st.StreamsUnavailable
	}
	return out, nil
}

// readyz is readiness, as last probed in the background: 200 when ready,
// 503 with the same body and the reason otherwise.
func (s *Server) readyz(context.Context, *call) (any, *apiError) {
	st := s.ready()
	if !st.Ready {
		return nil, &apiError{status: http.StatusServiceUnavailable, code: CodeSystem, msg: "not ready: " + st.Reason, data: st}
	}
	return st, nil
}

// readinessGauges are the readiness figures /metrics exports.
var readinessGauges = []struct {
	desc *prometheus.Desc
	v    func(health.Status) float64
}{
	{gauge("gseproc_ready", "1 when the server is ready (see /readyz), 0 otherwise."), func(st health.Status) float64 { return b01(st.Ready) }},
	{gauge("gseproc_nats_connected", "1 when the server's NATS connection is up."), func(st health.Status) float64 { return b01(st.NATS == "connected") }},
	{gauge("gseproc_jetstream_ok", "1 when JetStream answered the last probe."), func(st health.Status) float64 { return b01(st.JetStream.OK) }},
	{gauge("gseproc_cluster_nodes_up", "NATS cluster nodes up, this one included (embedded cluster node only)."), func(st health.Status) float64 { return float64(st.JetStream.NodesUp) }},
	{gauge("gseproc_cluster_nodes", "NATS cluster size (embedded cluster node only)."), func(st health.Status) float64 { return float64(st.JetStream.NodesWant) }},
	{gauge("gseproc_store_lag_ops", "Most operations any replica of the store's streams is behind its leader."), func(st health.Status) float64 { return float64(st.StoreLag) }},
	{gauge("gseproc_store_replicas_behind", "Replicas of the store's streams not current."), func(st health.Status) float64 { return float64(st.StoreReplicasBehind) }},
	{gauge("gseproc_store_streams_unavailable", "Streams of the store without a leader or a quorum while the others answer (their calls are refused; the server stays ready)."), func(st health.Status) float64 { return float64(len(st.StreamsUnavailable)) }},
	{gauge("gseproc_leases_held", "Tasks this server runs (holds the lease of)."), func(st health.Status) float64 { return float64(st.LeasesHeld) }},
	{gauge("gseproc_agents_online", "Agents heartbeating."), func(st health.Status) float64 { return float64(st.AgentsOnline) }},
	{gauge("gseproc_agents_known", "Agents known (heard from or configured)."), func(st health.Status) float64 { return float64(st.AgentsKnown) }},
}

func gauge(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }

func b01(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// readinessCollector reads the last probed status once per scrape.
type readinessCollector struct{ status func() health.Status }

func (c readinessCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, g := range readinessGauges {
		ch <- g.desc
	}
}

func (c readinessCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.status()
	for _, g := range readinessGauges {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.v(st))
	}
}
