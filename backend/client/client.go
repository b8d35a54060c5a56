// Package client is a backend.Backend over a gseproc server's native API
// (/api/v1/, see backend/server/openapi.yaml). Task results and host
// events arrive through Server-Sent Events; a dropped task stream is
// resumed with Last-Event-ID, so no result is lost or repeated.
//
// A client may know several servers of one cluster (they share their
// state): a request a server cannot take goes to the next one, and a task
// stream resumes on another server where it left off. A read, a request a
// server refused as not ready, and one that never reached a server are
// tried on each server in turn; a change that reached a server which then
// failed to answer (or answered another 503) is not sent again (it may
// have been carried out): its error is returned.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// Client talks to gseproc servers. It is safe for concurrent use.
type Client struct {
	servers []string     // base URLs, in the order given
	cur     atomic.Int32 // the server requests go to first (the last that answered)
	hc      *http.Client // requests (with a timeout)
	sc      *http.Client // streams (no timeout)
	auth    string       // X-Bkapi-Authorization value, "" for none
	log     *slog.Logger
	backoff [2]time.Duration
	maxFail int
	// maxEvent bounds a stream's lines and events (maxEvent; a test
	// lowers it).
	maxEvent int

	ctx    context.Context // ends at Close: stops every stream
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var (
	_ backend.Backend           = (*Client)(nil)
	_ backend.TaskSummarizer    = (*Client)(nil)
	_ backend.TaskResultsReader = (*Client)(nil)
	_ backend.HostsReader       = (*Client)(nil)
	_ backend.HostListReader    = (*Client)(nil)
)

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the client used for requests (its Transport is also
// used for streams, without its Timeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithCredentials sets the gateway app and user sent in the
// X-Bkapi-Authorization header.
func WithCredentials(appCode, appSecret, username string) Option {
	return func(c *Client) {
		if appCode == "" && appSecret == "" && username == "" {
			c.auth = ""
			return
		}
		b, _ := json.Marshal(map[string]string{"bk_app_code": appCode, "bk_app_secret": appSecret, "bk_username": username})
		c.auth = string(b)
	}
}

// WithLogger logs reconnects and stream errors.
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// WithReconnect sets the stream reconnect backoff (from min doubling to
// max) and how many consecutive failed reconnects end a stream.
func WithReconnect(min, max time.Duration, maxFailures int) Option {
	return func(c *Client) { c.backoff = [2]time.Duration{min, max}; c.maxFail = maxFailures }
}

// New returns a client of the server at baseURL ("http://127.0.0.1:8080").
func New(baseURL string, opts ...Option) *Client {
	return NewCluster([]string{baseURL}, opts...)
}

// NewCluster returns a client of the servers at baseURLs (servers of one
// cluster): it talks to the first, and fails over to the next when one
// does not answer or is not ready.
func NewCluster(baseURLs []string, opts ...Option) *Client {
	var servers []string
	for _, u := range baseURLs {
		servers = append(servers, strings.TrimRight(u, "/"))
	}
	c := &Client{
		servers: servers,
		hc:      &http.Client{Timeout: 60 * time.Second},
		log:     slog.New(slog.DiscardHandler),
		backoff: [2]time.Duration{100 * time.Millisecond, 5 * time.Second},
		maxFail: 30,

		maxEvent: maxEvent,
	}
	for _, o := range opts {
		o(c)
	}
	c.sc = &http.Client{Transport: c.hc.Transport, CheckRedirect: c.hc.CheckRedirect, Jar: c.hc.Jar}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// Close ends every open stream and waits for their goroutines.
func (c *Client) Close() error {
	c.cancel()
	c.wg.Wait()
	return nil
}

// APIError is a refusal by the server that is not a validation error
// (those are returned as model.ValidationError). It unwraps to
// model.ErrNotFound, ErrConflict or ErrReadOnly when the server says so.
type APIError struct {
	Status    int
	Code      int
	Message   string
	RequestID string
	Kind      string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("server: %s (code %d, request %s)", e.Message, e.Code, e.RequestID)
}

// Unwrap maps the error kind to the model's sentinels.
func (e *APIError) Unwrap() error {
	switch e.Kind {
	case "not_found":
		return model.ErrNotFound
	case "conflict":
		return model.ErrConflict
	case "read_only":
		return model.ErrReadOnly
	case "not_simulated":
		return model.ErrNotSimulated
	}
	if e.Status == http.StatusNotFound {
		return model.ErrNotFound
	}
	return nil
}

type envelope struct {
	Result    bool            `json:"result"`
	Code      int             `json:"code"`
	Message   string          `json:"message"`
	Data      json.RawMessage `json:"data"`
	RequestID string          `json:"request_id"`
}

type errData struct {
	Kind   string             `json:"kind"`
	Errors []model.FieldError `json:"errors"`
}

func (c *Client) newRequest(ctx context.Context, base, method, path string, q url.Values, body any) (*http.Request, error) {
	u := base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.auth != "" {
		req.Header.Set("X-Bkapi-Authorization", c.auth)
	}
	if a := backend.ActorFrom(ctx); a.Operator != "" || a.Via != "" {
		req.Header.Set(backend.OperatorHeader, a.Operator)
		req.Header.Set(backend.ViaHeader, a.Via)
	}
	return req, nil
}

// Server is the server requests go to first: the last one that answered.
func (c *Client) Server() string { return c.servers[c.cur.Load()] }

// request is one request to send to whichever server takes it.
type request struct {
	method, path string
	query        url.Values
	body         any
	// once: a change, not sent again to another server once a server may
	// have received it.
	once bool
	// stream: an event stream (Accept, Last-Event-ID lastID, no timeout).
	stream bool
	lastID string
}

// send sends r to the current server and, when that server is down, not
// ready (503 with backend.NotReadyHeader: refused before anything was
// done) or unreachable, to the next ones in turn, once each; a change
// only when no server can have carried it out. The server that answered
// becomes the current one. When every server failed it returns the last
// reply (a 503 and its reason) or the failures joined.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	hc := c.hc
	if r.stream {
		hc = c.sc
	}
	n := len(c.servers)
	first := int(c.cur.Load())
	var errs []error
	for i := range n {
		k := (first + i) % n
		base := c.servers[k]
		req, err := c.newRequest(ctx, base, r.method, r.path, r.query, r.body)
		if err != nil {
			return nil, err
		}
		if r.stream {
			req.Header.Set("Accept", "text/event-stream")
			if r.lastID != "" {
				req.Header.Set("Last-Event-ID", r.lastID)
			}
		}
		resp, err := hc.Do(req)
		last := i == n-1
		switch {
		case err == nil && resp.StatusCode != http.StatusServiceUnavailable:
			if k != first {
				c.cur.Store(int32(k))
				c.log.Info("now talking to another server", "server", base, "was", c.servers[first])
			}
			return resp, nil
		case err == nil: // 503
			// Not ready: refused before anything was done. Another 503 (a
			// store call timed out) may follow work done: a change is not
			// sent again.
			notReady := resp.Header.Get(backend.NotReadyHeader) != ""
			if last || (r.once && !notReady) {
				return resp, nil
			}
			c.log.Warn("server not ready; trying the next one", "server", base, "path", r.path, "state", resp.Header.Get(backend.NotReadyHeader))
			resp.Body.Close()
		default:
			if n > 1 {
				err = fmt.Errorf("%s: %w", base, err)
			}
			errs = append(errs, err)
			if ctx.Err() != nil || last || (r.once && !notSent(err)) {
				return nil, errors.Join(errs...)
			}
			c.log.Warn("server unreachable; trying the next one", "server", base, "path", r.path, "err", err)
		}
	}
	return nil, errors.Join(errs...)
}

// notSent says the request surely never reached the server: the
// connection could not be opened.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// call sends a request that may be repeated (a read) and decodes the data
// into out (when not nil).
func (c *Client) call(ctx context.Context, method, path string, q url.Values, body, out any) error {
	return c.do(ctx, request{method: method, path: path, query: q, body: body}, out)
}

// change sends a change, which fails over only when no server can have
// received it.
func (c *Client) change(ctx context.Context, method, path string, q url.Values, body, out any) error {
	return c.do(ctx, request{method: method, path: path, query: q, body: body, once: true}, out)
}

func (c *Client) do(ctx context.Context, r request, out any) error {
	method, path := r.method, r.path
	resp, err := c.send(ctx, r)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if err := readReply(resp, out); err != nil {
		var ve model.ValidationError
		if errors.As(err, &ve) {
			return ve
		}
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// Info describes the remote backend (Mode "remote", Endpoint the URL).
func (c *Client) Info(ctx context.Context) (backend.Info, error) {
	var info backend.Info
	if err := c.call(ctx, http.MethodGet, "/api/v1/info", nil, nil, &info); err != nil {
		return info, err
	}
	info.Mode, info.Endpoint = "remote", c.Server()
	return info, nil
}

// Namespaces lists the namespaces.
func (c *Client) Namespaces(ctx context.Context) ([]backend.NamespaceSummary, error) {
	var out []backend.NamespaceSummary
	err := c.call(ctx, http.MethodGet, "/api/v1/namespaces", nil, nil, &out)
	return out, err
}

// Hosts lists hosts matching q. The label maps of a listing are shared
// between its hosts (each distinct set held once): not to be changed.
func (c *Client) Hosts(ctx context.Context, q backend.HostQuery) ([]backend.HostView, error) {
	var out []backend.HostView
	err := c.call(ctx, http.MethodPost, "/api/v1/hosts", nil, q, &hostsOf{p: &out})
	return out, err
}

// HostsEach lists hosts matching q, each passed to fn as it is read from
// the reply (backend.HostsReader): process label sets held once as by
// Hosts; the host's label map is reused for the next host (fn copies
// what it keeps of it).
func (c *Client) HostsEach(ctx context.Context, q backend.HostQuery, fn func(*backend.HostView)) error {
	return c.call(ctx, http.MethodPost, "/api/v1/hosts", nil, q, &hostsOf{each: fn})
}

// Processes lists definitions matching q.
func (c *Client) Processes(ctx context.Context, q backend.ProcQuery) ([]model.ProcessDef, error) {
	v := url.Values{}
	if q.Namespace != "" {
		v.Set("namespace", q.Namespace)
	}
	if q.Name != "" {
		v.Set("name", q.Name)
	}
	for _, l := range model.SortedLabels(q.Labels) {
		v.Add("label", l)
	}
	if q.Host != nil {
		v.Set("host", q.Host.AgentID())
	}
	var out []model.ProcessDef
	err := c.call(ctx, http.MethodGet, "/api/v1/processes", v, nil, &out)
	return out, err
}

// SaveProcess creates or replaces a definition. def is sent whole: a
// policy field it holds as 0 is sent as 0 and means 0 (start_retries 0:
// given up at its first exit; start_check_secs 0: judged at once; see
// model.Policy), not its default. Build def from model.NewProcessDef to
// have the documented defaults for the fields not set.
func (c *Client) SaveProcess(ctx context.Context, def model.ProcessDef) error {
	return c.change(ctx, http.MethodPost, "/api/v1/processes", nil, def, nil)
}

// DeleteProcess removes a definition by "namespace:name".
func (c *Client) DeleteProcess(ctx context.Context, key string) error {
	return c.change(ctx, http.MethodDelete, "/api/v1/processes", url.Values{"key": {key}}, nil, nil)
}

// Operate starts an operation.
func (c *Client) Operate(ctx context.Context, req backend.OperateRequest) (model.Task, error) {
	var t model.Task
	err := c.change(ctx, http.MethodPost, "/api/v1/operate", nil, req, &t)
	return t, err
}

func taskPath(id string) string { return "/api/v1/tasks/" + url.PathEscape(id) }

// Task returns a task with every sub-result so far.
func (c *Client) Task(ctx context.Context, id string) (backend.TaskView, error) {
	var tv backend.TaskView
	err := c.call(ctx, http.MethodGet, taskPath(id), nil, nil, taskViewOf{v: &tv})
	return tv, err
}

// TaskResults returns a task, each of its results passed to fn as it is
// read from the reply (backend.TaskResultsReader): the results are never
// held together.
func (c *Client) TaskResults(ctx context.Context, id string, fn func(*model.Result)) (backend.TaskView, error) {
	var tv backend.TaskView
	err := c.call(ctx, http.MethodGet, taskPath(id), nil, nil, taskViewOf{v: &tv, each: fn})
	return tv, err
}

// TaskSummary returns a task without its results (backend.TaskSummarizer): the
// server leaves them out of its reply (results=false); from a server
// that sends them anyway they are read and dropped.
func (c *Client) TaskSummary(ctx context.Context, id string) (backend.TaskView, error) {
	var tv backend.TaskView
	err := c.call(ctx, http.MethodGet, taskPath(id), url.Values{"results": {"false"}}, nil, taskViewOf{v: &tv, skipResults: true})
	return tv, err
}

// Tasks lists recent tasks, newest first.
func (c *Client) Tasks(ctx context.Context, limit int) ([]model.Task, error) {
	v := url.Values{}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	var out []model.Task
	err := c.call(ctx, http.MethodGet, "/api/v1/tasks", v, nil, &out)
	return out, err
}

// Cancel stops a running task.
func (c *Client) Cancel(ctx context.Context, id string) error {
	return c.change(ctx, http.MethodPost, taskPath(id)+"/cancel", nil, nil, nil)
}

// ControlRoll pauses, resumes or aborts a rolling task: a change (not
// sent to another server once one may have received it).
func (c *Client) ControlRoll(ctx context.Context, id string, act model.RollAction) (model.Task, error) {
	if _, err := model.ParseRollAction(string(act)); err != nil {
		return model.Task{}, model.ValidationError{{Field: "action", Reason: err.Error()}}
	}
	var t model.Task
	err := c.change(ctx, http.MethodPost, taskPath(id)+"/"+string(act), nil, nil, &t)
	return t, err
}

// HostListEach lists hosts matching q in the list form
// (backend.HostListReader), each passed to fn as it is read. A server
// that answers with the full form (one that predates the list form) is
// read as HostsEach reads it.
func (c *Client) HostListEach(ctx context.Context, q backend.HostQuery, fn func(*backend.HostView)) error {
	return c.call(ctx, http.MethodPost, "/api/v1/hosts", url.Values{"form": {"list"}}, q, &hostListOf{each: fn})
}

// HostListIndexed is HostListEach with each host's labels handed over as
// the list form carries them: ids, indexes into pairs, the listing's
// table of label pairs (key, value), the same for every host of the
// listing; the view's Labels is nil. ids and the view are valid during
// the call only. A console that keeps each pair once (its own table) maps
// each index once a listing, instead of a map made and hashed again for
// each of 100,000 hosts. A server that answers in the full form (one that
// predates the list form) gives each view its map, and pairs and ids nil.
func (c *Client) HostListIndexed(ctx context.Context, q backend.HostQuery, fn func(pairs [][2]string, ids []uint32, v *backend.HostView)) error {
	return c.call(ctx, http.MethodPost, "/api/v1/hosts", url.Values{"form": {"list"}}, q, &hostListOf{indexed: fn})
}

// SetProcessGroups sets (or clears) a namespace's process group on hosts:
// a change (not sent to another server once one may have received it).
func (c *Client) SetProcessGroups(ctx context.Context, req backend.GroupRequest) ([]backend.GroupResult, error) {
	var out []backend.GroupResult
	err := c.change(ctx, http.MethodPost, "/api/v1/process_groups", nil, req, &out)
	return out, err
}

// ProcessGroups lists the stored process groups matching q.
func (c *Client) ProcessGroups(ctx context.Context, q backend.GroupQuery) ([]model.ProcessGroup, error) {
	v := url.Values{}
	if q.Namespace != "" {
		v.Set("namespace", q.Namespace)
	}
	for _, h := range q.Hosts {
		v.Add("host", h.AgentID())
	}
	out := []model.ProcessGroup{}
	err := c.call(ctx, http.MethodGet, "/api/v1/process_groups", v, nil, &out)
	return out, err
}

// Audit lists the audit trail's entries matching q, newest first.
func (c *Client) Audit(ctx context.Context, q model.AuditQuery) ([]model.AuditEntry, error) {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.Format(time.RFC3339Nano))
	}
	if q.Before != 0 {
		v.Set("before", strconv.FormatUint(q.Before, 10))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	set("app", q.App)
	set("user", q.User)
	set("operator", q.Operator)
	set("namespace", q.Namespace)
	set("action", q.Action)
	set("op", q.Op)
	set("task_id", q.TaskID)
	set("result", q.Result)
	out := []model.AuditEntry{}
	err := c.call(ctx, http.MethodGet, "/api/v1/audit", v, nil, &out)
	return out, err
}

// Simulate carries out a live control of the server's simulated fleet.
func (c *Client) Simulate(ctx context.Context, req backend.SimRequest) (model.SimOutcome, error) {
	var out model.SimOutcome
	err := c.change(ctx, http.MethodPost, "/api/v1/sim", nil, req, &out)
	return out, err
}

// RecentEvents lists the last n host events.
func (c *Client) RecentEvents(ctx context.Context, n int) ([]model.Event, error) {
	v := url.Values{}
	if n > 0 {
		v.Set("n", strconv.Itoa(n))
	}
	var out []model.Event
	err := c.call(ctx, http.MethodGet, "/api/v1/events/recent", v, nil, &out)
	return out, err
}
