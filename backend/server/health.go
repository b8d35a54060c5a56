package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

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

// unavailable refuses an API call while the server is not ready.
func (s *Server) unavailable() *apiError {
	if s.readiness == nil {
		return nil
	}
	st := s.readiness()
	if st.Ready {
		return nil
	}
	return &apiError{status: http.StatusServiceUnavailable, code: CodeSystem,
		msg: fmt.Sprintf("service unavailable (%s since %s): %s", st.State, st.Since.UTC().Format(time.RFC3339), st.Reason)}
}

// healthz is liveness: the process serves HTTP. It touches nothing else.
func (s *Server) healthz(context.Context, *call) (any, *apiError) {
	return map[string]any{"status": "ok"}, nil
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

// writeReadiness exports the readiness figures in the exposition format.
func writeReadiness(w io.Writer, st health.Status) {
	b := func(v bool) int {
		if v {
			return 1
		}
		return 0
	}
	gauges := []struct {
		name, help string
		v          any
	}{
		{"gseproc_ready", "1 when the server is ready (see /readyz), 0 otherwise.", b(st.Ready)},
		{"gseproc_nats_connected", "1 when the server's NATS connection is up.", b(st.NATS == "connected")},
		{"gseproc_jetstream_ok", "1 when JetStream answered the last probe.", b(st.JetStream.OK)},
		{"gseproc_cluster_nodes_up", "NATS cluster nodes up, this one included (embedded cluster node only).", st.JetStream.NodesUp},
		{"gseproc_cluster_nodes", "NATS cluster size (embedded cluster node only).", st.JetStream.NodesWant},
		{"gseproc_store_lag_ops", "Most operations any replica of the store's streams is behind its leader.", st.StoreLag},
		{"gseproc_store_replicas_behind", "Replicas of the store's streams not current.", st.StoreReplicasBehind},
		{"gseproc_leases_held", "Tasks this server runs (holds the lease of).", st.LeasesHeld},
		{"gseproc_agents_online", "Agents heartbeating.", st.AgentsOnline},
		{"gseproc_agents_known", "Agents known (heard from or configured).", st.AgentsKnown},
	}
	for _, g := range gauges {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %v\n", g.name, g.help, g.name, g.name, g.v)
	}
}
