// Package server is gseproc's HTTP API: the endpoints of the GSE / JOB
// process-operation API family (wire-compatible with the documents in
// shared/seeds and gse-api.md), a native JSON API with Server-Sent Events
// for the console and scripts (documented in openapi.yaml, served at
// /api/v1/openapi.yaml), /healthz and /metrics. It serves any
// backend.Backend: the embedded engine, or another server through
// backend/client.
package server

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/health"
	"gseproc/backend/server/wire"
	"gseproc/model"
)

//go:embed openapi.yaml
var openapiYAML []byte

// OpenAPI returns the OpenAPI document the server serves.
func OpenAPI() []byte { return openapiYAML }

// Server serves the API on a Backend.
type Server struct {
	b   backend.Backend
	cfg config.ServerConfig
	log *slog.Logger

	apps    map[string]*app
	metrics *metrics
	mux     *http.ServeMux

	gatewayPaths []string // every GSE/JOB path served (README lists them)

	ctx    context.Context // ends at Close: stops streams and watchers
	cancel context.CancelFunc
	wg     sync.WaitGroup

	hosts model.HostIndex // where hosts sit in registered definitions

	readiness func() health.Status // nil: always ready

	// streamCut, when > 0, ends each task stream after that many events
	// (tests of client resume).
	streamCut int
}

// Option configures a Server.
type Option func(*Server)

// WithStreamCut ends every task stream after n result events (without the
// "end" event), as a restarting server or an impatient proxy would; clients
// resume with Last-Event-ID. For tests of resume and for shedding
// long-lived connections; 0 (the default) never cuts.
func WithStreamCut(n int) Option { return func(s *Server) { s.streamCut = n } }

// New makes a server on b. cfg is the [server] section as config.Load
// filled and checked it (apps, limits): New applies no defaults of its own.
func New(b backend.Backend, cfg config.ServerConfig, log *slog.Logger, opts ...Option) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{b: b, cfg: cfg, log: log, apps: newApps(cfg), metrics: newMetrics(),
		ctx: ctx, cancel: cancel}
	for _, o := range opts {
		o(s)
	}
	s.routes()
	return s
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Close ends every open stream and background watcher and waits for them.
// It does not close the Backend.
func (s *Server) Close() error {
	s.cancel()
	s.wg.Wait()
	return nil
}

// Serve serves on ln until ctx ends, then shuts down gracefully: open
// streams are ended (clients resume them elsewhere), in-flight requests
// get up to ShutdownTimeout to finish, then connections are closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       s.cfg.ReadTimeout.D(),
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	hs.RegisterOnShutdown(s.cancel)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.cancel()
		s.wg.Wait()
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	s.log.Info("shutting down", "timeout", s.cfg.ShutdownTimeout.D())
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout.D())
	defer cancel()
	err := hs.Shutdown(sctx)
	if err != nil {
		s.log.Warn("shutdown timed out; closing connections", "err", err)
		_ = hs.Close()
	}
	<-errc
	_ = s.Close()
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: in-flight requests did not finish within %s", s.cfg.ShutdownTimeout.D())
	}
	return nil
}

// kinds of endpoint.
const (
	kindGateway = iota // the GSE/JOB forms: gateway fields in body or header
	kindNative         // /api/v1: credentials in the header only
	kindOpen           // /healthz, /metrics, the OpenAPI document
)

// call is one request being served.
type call struct {
	s        *Server
	w        http.ResponseWriter
	r        *http.Request
	rid      string
	endpoint string
	body     []byte
	obj      map[string]any
	app      *app // nil: no restriction (native API without auth)
	operator string
	streamed bool // the handler wrote its own response (SSE)
	// cut: the handler's own response (streamed) was cut short; the
	// connection is then aborted once the request is counted and logged,
	// so that its end is not read as a whole reply's (chunked, the
	// terminating chunk would say the body ended where it should).
	cut bool
}

type handlerFunc func(ctx context.Context, c *call) (any, *apiError)

func (s *Server) handle(pattern, name string, kind int, h handlerFunc) {
	s.mux.HandleFunc(pattern, s.wrap(name, kind, h))
}

// wrap runs the common part of every endpoint: request id, body and
// gateway fields, authentication, rate limit, envelope, log, metrics.
func (s *Server) wrap(name string, kind int, h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		c := &call{s: s, w: w, r: r, rid: newRequestID(), endpoint: name}
		defer func() {
			if c.cut {
				panic(http.ErrAbortHandler) // net/http closes the connection without the body's end, logging nothing
			}
		}()
		w.Header().Set("X-Request-Id", c.rid)
		w.Header().Set("Bkapi-Request-Id", c.rid)
		data, aerr := s.run(c, kind, h)
		code := CodeOK
		if aerr != nil {
			code = aerr.code
		}
		if !c.streamed {
			env := envelope{Result: aerr == nil, Code: code, Message: "success", Data: data, RequestID: c.rid}
			status := http.StatusOK
			if aerr != nil {
				env.Message, env.Data, env.Permission = aerr.msg, aerr.data, aerr.permission
				// The GSE/JOB family answers 200 with the error in the
				// envelope, as the ESB gateway does, so existing clients read
				// the message; the native API uses the HTTP status too.
				if aerr.status != 0 && kind != kindGateway {
					status = aerr.status
				}
				if aerr.retryAfter > 0 {
					w.Header().Set("Retry-After", strconv.Itoa(aerr.retryAfter))
				}
			}
			writeEnvelope(w, status, env)
		}
		d := time.Since(start)
		s.metrics.request(name, code, d)
		lvl := slog.LevelInfo
		if kind == kindOpen {
			lvl = slog.LevelDebug
		}
		if !s.log.Enabled(r.Context(), lvl) {
			return // not logged: its attributes are not made either
		}
		attrs := []any{"request_id", c.rid, "endpoint", name, "method", r.Method, "code", code, "dur", d.Round(time.Microsecond), "remote", r.RemoteAddr}
		if c.app != nil {
			attrs = append(attrs, "app", c.app.code)
		}
		if c.operator != "" {
			attrs = append(attrs, "operator", c.operator)
		}
		if aerr != nil {
			attrs = append(attrs, "error", aerr.msg)
		}
		s.log.Log(r.Context(), lvl, "api request", attrs...)
	}
}

func (s *Server) run(c *call, kind int, h handlerFunc) (data any, aerr *apiError) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic serving request", "request_id", c.rid, "panic", p, "stack", string(debug.Stack()))
			data, aerr = nil, &apiError{status: http.StatusInternalServerError, code: CodeSystem, msg: "internal error (request " + c.rid + ")"}
		}
	}()
	switch kind {
	case kindGateway:
		body, err := readBody(c.w, c.r, s.cfg.MaxBodyBytes)
		if err != nil {
			return nil, err
		}
		obj, err := parseObject(body)
		if err != nil {
			return nil, err
		}
		c.body, c.obj = body, obj
		creds, err := readCredentials(c.r, obj)
		if err != nil {
			return nil, err
		}
		if c.app, c.operator, err = s.authenticate(creds); err != nil {
			return nil, err
		}
		if err := s.limit(c.app); err != nil {
			return nil, err
		}
	case kindNative:
		creds, err := readCredentials(c.r, nil)
		if err != nil {
			return nil, err
		}
		if s.cfg.NativeAuth {
			if c.app, c.operator, err = s.authenticate(creds); err != nil {
				return nil, err
			}
			if err := s.limit(c.app); err != nil {
				return nil, err
			}
		} else {
			c.operator = creds.Username
		}
	}
	if kind != kindOpen {
		if aerr := s.unavailable(c.w.Header()); aerr != nil {
			return nil, aerr
		}
	}
	ctx, aerr := c.actorContext(kind)
	if aerr != nil {
		return nil, aerr
	}
	if kind != kindOpen {
		ctx = backend.WithStoreWait(ctx, storeWait)
	}
	data, aerr = h(ctx, c)
	if aerr != nil && aerr.denied != "" {
		// A refusal by scope is audited: who (the context's actor), what
		// (endpoint, namespace, path) and why (the message names the field).
		backend.RecordRefusal(ctx, s.b, model.AuditEntry{Action: model.AuditScopeDenied, Op: c.endpoint,
			Namespaces: []string{aerr.denied}, Targets: []string{c.r.Method + " " + c.r.URL.Path}, Summary: aerr.msg})
	}
	return data, aerr
}

// storeWait bounds how long an API call waits out a store (NATS,
// JetStream) that fails during an outage the readiness prober has not
// reported yet (a lost connection is reported at once, and refused in
// microseconds; a JetStream that stopped answering after a few probes):
// past it the call answers 503 with the reason instead of waiting out the
// store's minute of patience for a leader election. A request left
// unanswered that long is answered 503 too when the store finds NATS or
// JetStream unreachable (a stream info unanswered or refused, a leader
// without its quorum); when JetStream answers, the request is only slow
// (a loaded machine) and is given the store's attempt time (3 s).
const storeWait = 1500 * time.Millisecond

// actorContext is the request's context carrying its actor, which the
// engine records in the audit trail: the authenticated app and user, the
// operator and channel the caller names in its headers (native API), and
// the endpoint.
func (c *call) actorContext(kind int) (context.Context, *apiError) {
	ctx := c.r.Context()
	if kind == kindOpen {
		return ctx, nil
	}
	a := model.Actor{User: c.operator, Via: "api:" + c.endpoint}
	if c.app != nil {
		a.App = c.app.code
	}
	if kind == kindNative {
		op, via := c.r.Header.Get(backend.OperatorHeader), c.r.Header.Get(backend.ViaHeader)
		v := &model.Validator{}
		if err := model.CheckActorField(op); err != nil {
			v.Add(backend.OperatorHeader, err.Error())
		}
		if err := model.CheckActorField(via); err != nil {
			v.Add(backend.ViaHeader, err.Error())
		}
		if err := v.Err(); err != nil {
			return ctx, validationError(CodeArgument, err)
		}
		a.Operator = op
		if via != "" {
			a.Via = via + "/" + a.Via
		}
	}
	return backend.WithActor(ctx, a), nil
}

// decode reads the body (or query) of a native request into dst.
func (c *call) decode(dst any) *apiError {
	if c.body == nil {
		body, err := readBody(c.w, c.r, c.s.cfg.MaxBodyBytes)
		if err != nil {
			return err
		}
		obj, err := parseObject(body)
		if err != nil {
			return err
		}
		c.body, c.obj = body, obj
	}
	if err := decodeInto(c.body, c.obj, dst); err != nil {
		return validationError(CodeArgument, err)
	}
	return nil
}

// validationError turns a model.ValidationError into a refusal whose
// message names every field; data.errors lists them.
func validationError(code int, err error) *apiError {
	var ve model.ValidationError
	if errors.As(err, &ve) {
		return &apiError{status: http.StatusBadRequest, code: code, msg: ve.Error(),
			data: map[string]any{"kind": "validation", "errors": []model.FieldError(ve)}}
	}
	return &apiError{status: http.StatusBadRequest, code: code, msg: err.Error()}
}

// backendError maps an error of the Backend to a refusal.
func backendError(code int, what string, err error) *apiError {
	var ve model.ValidationError
	switch {
	case errors.As(err, &ve):
		return validationError(code, err)
	case errors.Is(err, model.ErrNotFound):
		return &apiError{status: http.StatusNotFound, code: CodeNotFound, msg: what + ": " + err.Error(), data: map[string]any{"kind": "not_found"}}
	case errors.Is(err, model.ErrReadOnly):
		return &apiError{status: http.StatusForbidden, code: CodeAppDenied, msg: what + ": " + err.Error(), data: map[string]any{"kind": "read_only"}}
	case errors.Is(err, model.ErrNotSimulated):
		return &apiError{status: http.StatusConflict, code: CodeArgument, msg: what + ": " + err.Error(), data: map[string]any{"kind": "not_simulated"}}
	case errors.Is(err, model.ErrConflict):
		return &apiError{status: http.StatusConflict, code: CodeArgument, msg: what + ": " + err.Error(), data: map[string]any{"kind": "conflict"}}
	case errors.Is(err, model.ErrUnavailable):
		// The store did not answer within the request's bound (storeWait):
		// an outage the readiness prober may not have seen yet.
		return &apiError{status: http.StatusServiceUnavailable, code: CodeSystem, msg: "service unavailable: " + what + ": " + err.Error(),
			data: map[string]any{"kind": "unavailable"}}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: http.StatusServiceUnavailable, code: CodeGSE, msg: what + ": " + err.Error()}
	}
	return &apiError{status: http.StatusInternalServerError, code: CodeGSE, msg: what + ": " + err.Error()}
}

// operate makes the task of req, its per-host outcomes counted for
// /metrics as they arrive (track): by a result hook the backend takes
// (the embedded engine), else by a watch.
func (s *Server) operate(ctx context.Context, req backend.OperateRequest) (model.Task, error) {
	hook := backend.NewResultHook(s.countOutcome)
	t, err := s.b.Operate(backend.WithResultHook(ctx, hook), req)
	if err != nil {
		return t, err
	}
	s.track(t, hook)
	return t, nil
}

// countOutcome counts a host's final result for /metrics.
func (s *Server) countOutcome(r model.Result) { s.metrics.outcome(string(r.State), r.Duration()) }

// track counts task t for /metrics, and its per-host outcomes as they
// arrive: through hook when the backend took it, else by a watch.
func (s *Server) track(t model.Task, hook *backend.ResultHook) {
	s.metrics.task(t.Op.String(), t.Source)
	if hook.Taken() {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ch, err := s.b.Watch(s.ctx, t.ID, 0)
		if err != nil {
			s.log.Debug("watch task for metrics", "task", t.ID, "err", err)
			return
		}
		for r := range ch {
			s.countOutcome(r)
		}
	}()
}

// Path roots of the GSE/JOB family (README lists every path served).
const (
	// JOB process APIs: the ESB component systems job (v2) and jobv3 (the
	// root the API gateway and the node manager use), and /v3/job/.
	rootJobV2    = "/api/c/compapi/v2/job/"
	rootJobV3    = "/api/c/compapi/v2/jobv3/"
	rootJobV3Alt = "/api/c/compapi/v3/job/"
	// GSE 1.x through ESB.
	rootGSE = "/api/c/compapi/v2/gse/"
	// GSE 2.0: the bare gateway path, the API gateway's bk-gse stage
	// (the service-config platform hard-codes it) and the ESB root the
	// node manager falls back to when its gateway variable is unset.
	rootGSE2        = "/api/v2/"
	rootGSE2Gateway = "/api/bk-gse/prod/api/v2/"
	rootGSE2ESB     = "/api/c/compapi/v2/gse/api/v2/"
)

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	for _, base := range []string{rootJobV2, rootJobV3, rootJobV3Alt} {
		s.gateway(base+"operate_proc", "job.operate_proc", s.jobOperate(wire.FormOperateProc, "operate_proc"))
		s.gateway(base+"operate_process", "job.operate_process", s.jobOperate(wire.FormOperateProcess, "operate_process"))
		s.gateway(base+"manage_proc", "job.manage_proc", s.jobOperate(wire.FormManageProc, "manage_proc"))
		s.gateway(base+"get_proc_result", "job.get_proc_result", s.jobResult)
	}
	gse := rootGSE
	s.gateway(gse+"operate_proc", "gse.operate_proc", s.gseOperate)
	s.gateway(gse+"operate_proc_v2", "gse.operate_proc_v2", s.gseOperateV2)
	s.gateway(gse+"operate_proc_multi", "gse.operate_proc_multi", s.gseOperateMulti)
	s.gateway(gse+"get_proc_operate_result", "gse.get_proc_operate_result", s.gseResult(true))
	s.gateway(gse+"get_proc_operate_result_v2", "gse.get_proc_operate_result_v2", s.gseResult(false))
	s.gateway(gse+"register_proc_info", "gse.register_proc_info", s.gseProcInfo(infoRegister))
	s.gateway(gse+"update_proc_info", "gse.update_proc_info", s.gseProcInfo(infoUpdate))
	s.gateway(gse+"unregister_proc_info", "gse.unregister_proc_info", s.gseUnregister)
	s.gateway(gse+"get_proc_status", "gse.get_proc_status", s.gseStatus(true))
	s.gateway(gse+"get_proc_status_v2", "gse.get_proc_status_v2", s.gseStatus(false))
	s.gateway(gse+"sync_proc_status", "gse.sync_proc_status", s.gseSync)
	s.gateway(gse+"get_agent_status", "gse.get_agent_status", s.gseAgentStatus)
	s.gateway(gse+"get_agent_info", "gse.get_agent_info", s.gseAgentInfo)
	s.gateway(gse+"set_process_group_info", "gse.set_process_group_info", s.gseSetGroup)
	s.gateway(gse+"get_process_group_info", "gse.get_process_group_info", s.gseGetGroup)

	// GSE 2.0 spellings (bk-gse /api/v2/proc/...) under each of its roots.
	for _, root := range []string{rootGSE2, rootGSE2Gateway, rootGSE2ESB} {
		v2 := root + "proc/"
		s.gateway(v2+"operate_proc_v2", "gse2.operate_proc_v2", s.gseOperateV2)
		s.gateway(v2+"operate_proc_multi", "gse2.operate_proc_multi", s.gseOperateMulti)
		s.gateway(v2+"get_proc_operate_result_v2", "gse2.get_proc_operate_result_v2", s.gseResult(false))
		s.gateway(v2+"get_proc_status_v2", "gse2.get_proc_status_v2", s.gseStatus(false))
		s.gateway(v2+"sync_proc_status", "gse2.sync_proc_status", s.gseSync)
		s.gateway(v2+"update_proc_info", "gse2.update_proc_info", s.gseProcInfo(infoUpdate))
		s.gateway(v2+"upgrade_to_agent_id", "gse2.upgrade_to_agent_id", s.gse2UpgradeToAgentID)
		s.gateway(root+"cluster/list_agent_state", "gse2.list_agent_state", s.gse2ListAgentState)
		s.gateway(root+"cluster/list_agent_info", "gse2.list_agent_info", s.gse2ListAgentInfo)
		s.gateway(root+"task/get_task_state", "gse2.get_task_state", s.gse2TaskState)
	}

	s.nativeRoutes()

	s.handle("GET /healthz", "healthz", kindOpen, s.healthz)
	s.handle("GET /readyz", "readyz", kindOpen, s.readyz)
	if s.readiness != nil {
		s.metrics.readiness(s.readiness)
	}
	s.mux.Handle("GET /metrics", s.metrics.handler())
	s.mux.HandleFunc("GET /api/v1/openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
		_, _ = w.Write(openapiYAML)
	})
	s.handle("/", "not_found", kindOpen, func(ctx context.Context, c *call) (any, *apiError) {
		return nil, &apiError{status: http.StatusNotFound, code: CodeNotFound,
			msg: fmt.Sprintf("no endpoint %s %s; the API is described at /api/v1/openapi.yaml", c.r.Method, c.r.URL.Path)}
	})
}

// gateway registers a GSE/JOB endpoint at path and path + "/" (the
// gateway's spelling), for every method: POST with a JSON body, GET with a
// JSON body or query parameters, and PUT/DELETE as the PMS backend uses.
func (s *Server) gateway(path, name string, h handlerFunc) {
	s.gatewayPaths = append(s.gatewayPaths, path)
	s.handle(path, name, kindGateway, h)
	s.handle(path+"/{$}", name, kindGateway, h)
}
