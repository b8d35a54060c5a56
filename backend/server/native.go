package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"gseproc/backend"
	"gseproc/backend/server/wire"
	"gseproc/model"
)

// The native API under /api/v1/ (openapi.yaml): JSON in the same
// envelope; errors carry data.kind (validation, not_found, conflict,
// read_only) and, for validation, data.errors [{field, reason}].

func (s *Server) nativeRoutes() {
	s.handle("GET /api/v1/info", "v1.info", kindNative, s.v1Info)
	s.handle("GET /api/v1/namespaces", "v1.namespaces", kindNative, s.v1Namespaces)
	s.handle("GET /api/v1/hosts", "v1.hosts", kindNative, s.v1Hosts)
	s.handle("POST /api/v1/hosts", "v1.hosts", kindNative, s.v1Hosts)
	s.handle("GET /api/v1/processes", "v1.processes", kindNative, s.v1Processes)
	s.handle("POST /api/v1/processes", "v1.save_process", kindNative, s.v1SaveProcess)
	s.handle("PUT /api/v1/processes", "v1.save_process", kindNative, s.v1SaveProcess)
	s.handle("DELETE /api/v1/processes", "v1.delete_process", kindNative, s.v1DeleteProcess)
	s.handle("DELETE /api/v1/processes/{key...}", "v1.delete_process", kindNative, s.v1DeleteProcess)
	s.handle("POST /api/v1/operate", "v1.operate", kindNative, s.v1Operate)
	s.handle("GET /api/v1/tasks", "v1.tasks", kindNative, s.v1Tasks)
	s.handle("GET /api/v1/tasks/{id}", "v1.task", kindNative, s.v1Task)
	s.handle("POST /api/v1/tasks/{id}/cancel", "v1.cancel", kindNative, s.v1Cancel)
	for _, act := range []model.RollAction{model.RollPause, model.RollResume, model.RollAbort} {
		s.handle("POST /api/v1/tasks/{id}/"+string(act), "v1."+string(act), kindNative,
			func(ctx context.Context, c *call) (any, *apiError) { return s.v1ControlRoll(ctx, c, act) })
	}
	s.handle("GET /api/v1/tasks/{id}/stream", "v1.task_stream", kindNative, s.v1TaskStream)
	s.handle("GET /api/v1/events", "v1.events", kindNative, s.v1Events)
	s.handle("GET /api/v1/events/recent", "v1.recent_events", kindNative, s.v1RecentEvents)
	s.handle("GET /api/v1/logs", "v1.logs", kindNative, s.v1Logs)
	s.handle("GET /api/v1/audit", "v1.audit", kindNative, s.v1Audit)
	s.handle("POST /api/v1/sim", "v1.sim", kindNative, s.v1Sim)
	s.handle("GET /api/v1/process_groups", "v1.process_groups", kindNative, s.v1Groups)
	s.handle("POST /api/v1/process_groups", "v1.set_process_groups", kindNative, s.v1SetGroups)
}

// v1Sim is a live control of the simulated fleet (backend.SimRequest);
// a fleet of real agents refuses it (409, data.kind not_simulated).
func (s *Server) v1Sim(ctx context.Context, c *call) (any, *apiError) {
	var req backend.SimRequest
	if aerr := c.decode(&req); aerr != nil {
		return nil, aerr
	}
	if err := req.Validate(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	if c.app != nil && !c.app.allNS {
		ns := req.Selector.Namespace
		if ns == "" {
			return nil, namespaceDenied(c.app, "selector.namespace", "(every namespace)")
		}
		if !c.app.allowNamespace(ns) {
			return nil, namespaceDenied(c.app, "selector.namespace", ns)
		}
	}
	if req.Source == "" {
		req.Source = "api"
	}
	if c.operator != "" && (s.cfg.NativeAuth || req.Operator == "") {
		req.Operator = c.operator
	}
	out, err := s.b.Simulate(ctx, req)
	if err != nil {
		return nil, backendError(CodeArgument, "sim "+string(req.Action), err)
	}
	return out, nil
}

func (s *Server) v1Info(ctx context.Context, c *call) (any, *apiError) {
	var info backend.Info
	var err error
	if c.app == nil || c.app.allNS {
		info, err = s.b.Info(ctx)
	} else {
		// An app granted some businesses sees counts within them only.
		info, err = backend.ScopedInfo(ctx, s.b, c.app.allowNamespace, c.app.ownsHost)
	}
	if err != nil {
		return nil, backendError(CodeGSE, "info", err)
	}
	return info, nil
}

func (s *Server) v1Namespaces(ctx context.Context, c *call) (any, *apiError) {
	nss, err := s.b.Namespaces(ctx)
	if err != nil {
		return nil, backendError(CodeGSE, "namespaces", err)
	}
	out := make([]backend.NamespaceSummary, 0, len(nss))
	for _, n := range nss {
		if c.app.allowNamespace(n.Name) {
			out = append(out, n)
		}
	}
	return out, nil
}

// queryLabels parses repeated label=k=v parameters.
func queryLabels(v *model.Validator, q []string) map[string]string {
	if len(q) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, l := range q {
		k, val, err := model.ParseLabel(l)
		if err != nil {
			v.Addf("label", "want key=value, got %q", l)
			continue
		}
		out[k] = val
	}
	return out
}

func queryHosts(v *model.Validator, q []string) []model.Host {
	var out []model.Host
	for i, s := range q {
		for _, part := range strings.Split(s, ",") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			h, err := model.ParseAgentID(part)
			if err != nil {
				v.Addf(fmt.Sprintf("host[%d]", i), "%v", err)
				continue
			}
			out = append(out, h)
		}
	}
	return out
}

func queryInt(v *model.Validator, q, field string, def, lo, hi int) int {
	if q == "" {
		return def
	}
	n, err := strconv.Atoi(q)
	if err != nil || n < lo || n > hi {
		v.Addf(field, "%q is not an integer in [%d,%d]", q, lo, hi)
		return def
	}
	return n
}

func (s *Server) v1Hosts(ctx context.Context, c *call) (any, *apiError) {
	var q backend.HostQuery
	list := false // the list form (wire.HostListWriter): ?form=list
	switch f := c.r.URL.Query().Get("form"); f {
	case "", "full":
	case "list":
		list = true
	default:
		return nil, validationError(CodeArgument, model.ValidationError{{Field: "form", Reason: fmt.Sprintf("%q is not a form: want full (the default) or list", f)}})
	}
	if c.r.Method == http.MethodPost {
		if aerr := c.decode(&q); aerr != nil {
			return nil, aerr
		}
	} else {
		p := c.r.URL.Query()
		v := &model.Validator{}
		q = backend.HostQuery{Namespace: p.Get("namespace"), Name: p.Get("name"),
			Labels: queryLabels(v, p["label"]), Hosts: queryHosts(v, p["host"]),
			Limit: queryInt(v, p.Get("limit"), "limit", 0, 0, 1<<30)}
		if err := v.Err(); err != nil {
			return nil, validationError(CodeArgument, err)
		}
	}
	v := &model.Validator{}
	q.Hosts = model.CanonicalHosts(v, "hosts", q.Hosts)
	for i, id := range q.AgentIDs {
		if cid, err := model.CheckAgentID(id); err != nil {
			v.Add(fmt.Sprintf("agent_ids[%d]", i), err.Error())
		} else {
			q.AgentIDs[i] = cid
		}
	}
	if q.Limit < 0 {
		v.Add("limit", "must be >= 0")
	}
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	if q.Namespace != "" && !c.app.allowNamespace(q.Namespace) {
		return nil, namespaceDenied(c.app, "namespace", q.Namespace)
	}
	if list {
		return s.hostList(ctx, c, q)
	}
	views, err := s.b.Hosts(ctx, q)
	if err != nil {
		return nil, backendError(CodeArgument, "hosts", err)
	}
	if c.app != nil && !c.app.allNS {
		shown := views[:0:0]
		for _, hv := range views {
			kept := hv.Procs[:0:0]
			for _, p := range hv.Procs {
				if ns, _, _ := model.SplitKey(p.Key); c.app.allowNamespace(ns) {
					kept = append(kept, p)
				}
			}
			hv.Procs = kept
			if len(kept) > 0 || c.app.ownsHost(hv.HostInfo) {
				shown = append(shown, hv)
			}
		}
		views = shown
	}
	if views == nil {
		views = []backend.HostView{}
	}
	return views, nil
}

// hostList is the listing q matches in the list form (wire.HostListWriter):
// of each process, its key, labels, state, pid and hosted. The backend
// lists it for a list where it can (backend.HostListReader: no process's
// whole status copied), each host written as it comes; an app limited to
// some namespaces sees what the full form shows it.
func (s *Server) hostList(ctx context.Context, c *call, q backend.HostQuery) (any, *apiError) {
	var w wire.HostListWriter
	scoped := c.app != nil && !c.app.allNS
	if sr, ok := s.b.(backend.HostLabelSetReader); ok && !scoped {
		// Each host's labels as the inventory shares them. A whole
		// listing is streamed: its tables made of all it may name
		// (head), the hosts written as they come, so that the reply's
		// first byte does not wait for the last host (~0.2 s of 100,000)
		// and the console reads hosts while the server lists the next.
		var head func([]backend.ProcView, []model.LabelSet)
		streamed := false
		if q.Limit == 0 {
			head = func(procs []backend.ProcView, sets []model.LabelSet) {
				for i := range procs {
					w.AddProc(procs[i].Key, procs[i].Labels)
				}
				for _, l := range sets {
					w.AddLabels(l)
				}
				streamed = true
				startListStream(c, &w)
			}
		}
		err := sr.HostListSets(ctx, q, head, func(v *backend.HostView, labels model.LabelSet) {
			if labels != nil || v.Labels == nil {
				w.HostLabels(&v.HostInfo, labels)
			} else {
				w.Host(&v.HostInfo)
			}
			for j := range v.Procs {
				p := &v.Procs[j]
				w.Proc(p.Key, p.Labels, p.Status.State, p.Status.PID, p.Status.Hosted)
			}
		})
		if streamed {
			return nil, endListStream(c, &w, err)
		}
		if err != nil {
			return nil, backendError(CodeArgument, "hosts", err)
		}
		return rawParts(w.Parts()), nil
	}
	err := backend.HostListEach(ctx, s.b, q, func(v *backend.HostView) {
		if scoped && !c.app.seesHost(*v) {
			return
		}
		w.Host(&v.HostInfo)
		for j := range v.Procs {
			p := &v.Procs[j]
			if scoped {
				if ns, _, _ := model.SplitKey(p.Key); !c.app.allowNamespace(ns) {
					continue
				}
			}
			w.Proc(p.Key, p.Labels, p.Status.State, p.Status.PID, p.Status.Hosted)
		}
	})
	if err != nil {
		return nil, backendError(CodeArgument, "hosts", err)
	}
	return rawParts(w.Parts()), nil
}

// startListStream starts a reply whose data is w's listing written as
// it comes (wire.HostListWriter.Stream): the envelope's head and the
// listing's tables now, no Content-Length (chunked: a reply cut short
// reads as cut). The response is the handler's from here (c.streamed).
func startListStream(c *call, w *wire.HostListWriter) {
	c.w.Header().Set("Content-Type", "application/json; charset=utf-8")
	c.w.WriteHeader(http.StatusOK)
	c.streamed = true
	out := c.w
	if _, err := out.Write(envelopeHead(envelope{Result: true, Code: CodeOK, Message: "success"})); err != nil {
		_ = w.Stream(func([]byte) error { return err }) // the client is gone: nothing more is written
		return
	}
	_ = w.Stream(func(b []byte) error { _, err := out.Write(b); return err })
}

// endListStream ends a streamed listing (startListStream) whose hosts
// were listed with err: the listing's rest and the envelope's tail, the
// bytes writeEnvelope writes for the same listing (TestHostListStreamed).
// A listing cut (err, a failed write, a host naming what its tables
// lack) is left cut, without its end, and its connection aborted
// (c.cut): the client reads no whole reply, at the HTTP level too; the
// refusal returned is for the request's log and metrics only.
func endListStream(c *call, w *wire.HostListWriter, err error) *apiError {
	if err == nil {
		err = w.Finish()
	}
	if err == nil {
		_, err = c.w.Write(envelopeTail(envelope{RequestID: c.rid}))
	}
	if err != nil {
		c.cut = true
		return backendError(CodeSystem, "hosts", fmt.Errorf("listing cut: %w", err))
	}
	return nil
}

func (s *Server) v1Processes(ctx context.Context, c *call) (any, *apiError) {
	p := c.r.URL.Query()
	v := &model.Validator{}
	q := backend.ProcQuery{Namespace: p.Get("namespace"), Name: p.Get("name"), Labels: queryLabels(v, p["label"])}
	if hs := queryHosts(v, p["host"]); len(hs) > 0 {
		q.Host = &hs[0]
	}
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	if q.Namespace != "" && !c.app.allowNamespace(q.Namespace) {
		return nil, namespaceDenied(c.app, "namespace", q.Namespace)
	}
	defs, err := s.b.Processes(ctx, q)
	if err != nil {
		return nil, backendError(CodeArgument, "processes", err)
	}
	out := make([]model.ProcessDef, 0, len(defs))
	for _, d := range defs {
		if c.app.allowNamespace(d.Process.Meta.Namespace) {
			out = append(out, d)
		}
	}
	return out, nil
}

func (s *Server) v1SaveProcess(ctx context.Context, c *call) (any, *apiError) {
	def := model.NewProcessDef() // a policy field left out has its default
	if aerr := c.decode(&def); aerr != nil {
		return nil, aerr
	}
	if ns := def.Process.Meta.Namespace; ns != "" && !c.app.allowNamespace(ns) {
		return nil, namespaceDenied(c.app, "process.meta.namespace", ns)
	}
	if err := s.b.SaveProcess(ctx, def); err != nil {
		return nil, backendError(CodeArgument, "save "+def.Process.Key(), err)
	}
	return map[string]string{"key": def.Process.Key()}, nil
}

func (s *Server) v1DeleteProcess(ctx context.Context, c *call) (any, *apiError) {
	key := c.r.PathValue("key")
	if key == "" {
		key = c.r.URL.Query().Get("key")
	}
	ns, name, ok := model.SplitKey(key)
	if !ok || ns == "" || name == "" {
		return nil, validationError(CodeArgument, model.ValidationError{{Field: "key", Reason: fmt.Sprintf("want namespace:name, got %q", key)}})
	}
	if !c.app.allowNamespace(ns) {
		return nil, namespaceDenied(c.app, "key", ns)
	}
	if err := s.b.DeleteProcess(ctx, key); err != nil {
		return nil, backendError(CodeArgument, "delete "+key, err)
	}
	return map[string]string{"key": key}, nil
}

func (s *Server) v1Operate(ctx context.Context, c *call) (any, *apiError) {
	var req backend.OperateRequest
	if aerr := c.decode(&req); aerr != nil {
		return nil, aerr
	}
	if aerr := c.decodeItems(req.Items); aerr != nil {
		return nil, aerr
	}
	v := &model.Validator{}
	if !req.Op.Valid() {
		_, err := model.ParseOp(strconv.Itoa(int(req.Op)))
		v.Add("op_type", err.Error())
	}
	if req.Selector.Empty() && len(req.Items) == 0 {
		v.Add("selector", "required: a selector or items")
	}
	refuseSuppliers(v, req.Suppliers)
	req.Selector.Hosts = model.CanonicalHosts(v, "selector.hosts", req.Selector.Hosts)
	for i := range req.Items {
		req.Items[i].Hosts = model.CanonicalHosts(v, fmt.Sprintf("items[%d].hosts", i), req.Items[i].Hosts)
	}
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	if c.app != nil && !c.app.allNS {
		if len(req.Items) == 0 && req.Selector.Namespace == "" && len(req.Selector.Targets) == 0 {
			return nil, namespaceDenied(c.app, "selector.namespace", "(every namespace)")
		}
		for i, t := range req.Selector.Targets {
			if ns, _, _ := model.SplitKey(t.ProcKey); !c.app.allowNamespace(ns) {
				return nil, namespaceDenied(c.app, fmt.Sprintf("selector.targets[%d].proc", i), ns)
			}
		}
		if ns := req.Selector.Namespace; ns != "" && !c.app.allowNamespace(ns) {
			return nil, namespaceDenied(c.app, "selector.namespace", ns)
		}
		for i, it := range req.Items {
			if ns := it.Process.Meta.Namespace; !c.app.allowNamespace(ns) {
				return nil, namespaceDenied(c.app, fmt.Sprintf("items[%d].process.meta.namespace", i), ns)
			}
		}
	}
	if req.Source == "" {
		req.Source = "api"
	}
	if c.operator != "" && (s.cfg.NativeAuth || req.Operator == "") {
		req.Operator = c.operator
	}
	t, err := s.operate(ctx, req)
	if err != nil {
		return nil, backendError(CodeArgument, "operate", err)
	}
	return t, nil
}

// refuseSuppliers refuses bk_supplier_ids in a native request: they are
// the v1 forms' detail, which the server gathers from their hosts
// (wire.Suppliers); the native API names hosts without them.
func refuseSuppliers(v *model.Validator, sup map[string]int) {
	if len(sup) > 0 {
		v.Add("bk_supplier_ids", "not accepted by the native API: only the GSE 1.x forms carry supplier ids (hosts[].bk_supplier_id)")
	}
}

func (s *Server) v1Tasks(ctx context.Context, c *call) (any, *apiError) {
	v := &model.Validator{}
	limit := queryInt(v, c.r.URL.Query().Get("limit"), "limit", 100, 1, 100000)
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	ts, err := s.b.Tasks(ctx, limit)
	if err != nil {
		return nil, backendError(CodeGSE, "tasks", err)
	}
	out := make([]model.Task, 0, len(ts))
	for _, t := range ts {
		ok := c.app == nil || c.app.allNS || len(t.Namespace) > 0
		for _, ns := range t.Namespace {
			ok = ok && c.app.allowNamespace(ns)
		}
		if ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// nativeTask loads a task the caller may see.
func (s *Server) nativeTask(ctx context.Context, c *call, id string) (backend.TaskView, *apiError) {
	tv, err := s.b.Task(ctx, id)
	if err != nil {
		return tv, backendError(CodeArgument, "task "+id, err)
	}
	for _, ns := range taskNamespaces(tv) {
		if !c.app.allowNamespace(ns) {
			return tv, namespaceDenied(c.app, "id", ns)
		}
	}
	return tv, nil
}

// taskHeader is a backend that gives a task without its results when it
// holds the task's run in memory (the engine, the node): a stream of a
// task over 100,000 hosts copied every result twice (its check, its end)
// through Task.
type taskHeader interface {
	TaskHead(ctx context.Context, id string) (model.Task, bool, error)
}

// taskOnly is task id without its results: from the run the backend
// holds when it can (taskHeader), else Task's.
func (s *Server) taskOnly(ctx context.Context, id string) (model.Task, error) {
	if h, ok := s.b.(taskHeader); ok {
		if t, held, err := h.TaskHead(ctx, id); err != nil || held {
			return t, err
		}
	}
	tv, err := s.b.Task(ctx, id)
	return tv.Task, err
}

// heldTask is nativeTask's check and task, without the results, when
// the backend holds the task's run (taskHeader); held false when it does
// not (the caller asks nativeTask). The task's namespaces are those of
// every target's process, results' included.
func (s *Server) heldTask(ctx context.Context, c *call, id string) (t model.Task, held bool, aerr *apiError) {
	h, ok := s.b.(taskHeader)
	if !ok {
		return model.Task{}, false, nil
	}
	t, held, err := h.TaskHead(ctx, id)
	if err != nil {
		return t, false, backendError(CodeArgument, "task "+id, err)
	}
	if !held {
		return t, false, nil
	}
	for _, ns := range t.Namespace {
		if !c.app.allowNamespace(ns) {
			return t, true, namespaceDenied(c.app, "id", ns)
		}
	}
	return t, true, nil
}

// nativeTaskHead is nativeTask's check and task, without the results
// when the backend can (heldTask).
func (s *Server) nativeTaskHead(ctx context.Context, c *call, id string) (model.Task, *apiError) {
	if t, held, aerr := s.heldTask(ctx, c, id); aerr != nil || held {
		return t, aerr
	}
	tv, aerr := s.nativeTask(ctx, c, id)
	return tv.Task, aerr
}

// v1Task answers a task with its results, or without them when asked
// results=false (the task's status, counts and roll: a watch need not
// read 200,000 results to learn the task ended).
func (s *Server) v1Task(ctx context.Context, c *call) (any, *apiError) {
	results := true
	switch q := c.r.URL.Query()["results"]; {
	case len(q) == 0:
	case len(q) == 1 && (q[0] == "true" || q[0] == "false"):
		results = q[0] == "true"
	default:
		return nil, validationError(CodeArgument, model.ValidationError{{Field: "results", Reason: fmt.Sprintf("want true or false, got %q", strings.Join(q, ","))}})
	}
	id := c.r.PathValue("id")
	if !results {
		// The task as the backend holds it when it can, without
		// copying its results; a roll's view is made from them, and a
		// task the backend does not hold is read once, by nativeTask.
		t, held, aerr := s.heldTask(ctx, c, id)
		if aerr != nil {
			return nil, aerr
		}
		if held && t.Rollout == nil {
			return backend.TaskView{Task: t, Results: []model.Result{}}, nil
		}
	}
	tv, aerr := s.nativeTask(ctx, c, id)
	if aerr != nil {
		return nil, aerr
	}
	if tv.Results == nil || !results {
		tv.Results = []model.Result{}
	}
	raw, err := taskViewJSON(&tv)
	if err != nil {
		return nil, backendError(CodeArgument, "task "+id, err)
	}
	return raw, nil
}

// taskViewJSON is tv as encoding/json encodes it, its results written by
// model.AppendResultJSON (as the task's stream writes them: strings
// quoted as json.Marshal quotes them, '<', '>' and '&' escaped too). A
// console opening the watch of a task over 100,000 hosts reads its
// ~218,000 results (pending ones included); encoding/json's reflection
// took ~2.8 s of the server's CPU for them while the task ran.
func taskViewJSON(tv *backend.TaskView) (rawData, error) {
	task, err := compactJSON(tv.Task)
	if err != nil {
		return nil, fmt.Errorf("encode task: %w", err)
	}
	const resultSize = 320 // about a status result's
	b := make([]byte, 0, 64+len(task)+len(tv.Results)*resultSize)
	b = append(b, `{"task":`...)
	b = append(b, task...)
	b = append(b, `,"results":`...)
	if tv.Results == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		var re model.ResultEncoder
		for i := range tv.Results {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = re.Append(b, &tv.Results[i]); err != nil {
				return nil, fmt.Errorf("encode result %d: %w", i, err)
			}
		}
		b = append(b, ']')
	}
	if tv.Roll != nil {
		roll, err := compactJSON(tv.Roll)
		if err != nil {
			return nil, fmt.Errorf("encode roll: %w", err)
		}
		b = append(b, `,"roll":`...)
		b = append(b, roll...)
	}
	return rawData(append(b, '}')), nil
}

// compactJSON is v as the envelope's encoder writes it (HTML characters
// not escaped), without the encoder's newline.
func compactJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func (s *Server) v1Cancel(ctx context.Context, c *call) (any, *apiError) {
	id := c.r.PathValue("id")
	if _, aerr := s.nativeTask(ctx, c, id); aerr != nil {
		return nil, aerr
	}
	if err := s.b.Cancel(ctx, id); err != nil {
		return nil, backendError(CodeArgument, "cancel "+id, err)
	}
	return map[string]string{"task_id": id}, nil
}

// v1ControlRoll pauses, resumes or aborts a rolling task within the
// app's scopes; it answers the task as found.
func (s *Server) v1ControlRoll(ctx context.Context, c *call, act model.RollAction) (any, *apiError) {
	id := c.r.PathValue("id")
	if _, aerr := s.nativeTask(ctx, c, id); aerr != nil {
		return nil, aerr
	}
	t, err := s.b.ControlRoll(ctx, id, act)
	if err != nil {
		return nil, backendError(CodeArgument, string(act)+" "+id, err)
	}
	return t, nil
}

func (s *Server) v1RecentEvents(ctx context.Context, c *call) (any, *apiError) {
	v := &model.Validator{}
	n := queryInt(v, c.r.URL.Query().Get("n"), "n", 100, 1, 100000)
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	evs, err := s.b.RecentEvents(ctx, n)
	if err != nil {
		return nil, backendError(CodeGSE, "events", err)
	}
	out := make([]model.Event, 0, len(evs))
	for _, e := range evs {
		if c.app.seesEvent(e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// sse writes Server-Sent Events.
type sse struct {
	w http.ResponseWriter
	f *http.ResponseController
	// pend holds result events not yet written (result): they are
	// written together (writePending), in one write of up to
	// pendMax bytes, not through the response's 4 KB buffer a few
	// events at a time (an op over 10,000 hosts streamed 8 MB in some
	// 2,000 writes, each waking the client).
	pend []byte
	// enc encodes the results, their times' seconds formatted once.
	enc model.ResultEncoder
}

// pendMax is how many bytes of result events are held before they are
// written, even while more results wait.
const pendMax = 64 << 10

func startSSE(c *call) *sse {
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	c.w.WriteHeader(http.StatusOK)
	c.streamed = true
	e := &sse{w: c.w, f: http.NewResponseController(c.w)}
	// A stream lives longer than [server] read_timeout: clear the deadline.
	_ = e.f.SetReadDeadline(time.Time{})
	fmt.Fprintf(c.w, "retry: 1000\n: request %s\n\n", c.rid)
	_ = e.f.Flush()
	return e
}

func (e *sse) event(id, name string, v any) error {
	if err := e.writePending(); err != nil {
		return err
	}
	if err := e.write(id, name, v); err != nil {
		return err
	}
	return e.f.Flush()
}

// write writes an event without flushing it: the caller flushes once
// several are written (a stream of 100,000 results is not 100,000 writes).
func (e *sse) write(id, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if id != "" {
		if _, err := fmt.Fprintf(e.w, "id: %s\n", id); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, b)
	return err
}

// result adds a result event (id: its Seq) to the events pending, with
// a model.ResultEncoder: a stream of 100,000 results is encoded without
// reflection, into one buffer reused from write to write. They are
// written once pendMax bytes are pending, else by writePending (or
// before any other event); flushed by the caller.
func (e *sse) result(r *model.Result) error {
	n := len(e.pend)
	b := append(e.pend, "id: "...)
	b = strconv.AppendInt(b, r.Seq, 10)
	b = append(b, "\nevent: result\ndata: "...)
	b, err := e.enc.Append(b, r)
	if err != nil {
		e.pend = b[:n]
		return err
	}
	e.pend = append(b, "\n\n"...)
	if len(e.pend) >= pendMax {
		return e.writePending()
	}
	return nil
}

// writePending writes the result events pending, unflushed.
func (e *sse) writePending() error {
	if len(e.pend) == 0 {
		return nil
	}
	_, err := e.w.Write(e.pend)
	e.pend = e.pend[:0]
	return err
}

func (e *sse) ping() error {
	if err := e.writePending(); err != nil {
		return err
	}
	if _, err := fmt.Fprint(e.w, ": ping\n\n"); err != nil {
		return err
	}
	return e.f.Flush()
}

const pingEvery = 15 * time.Second

// v1TaskStream streams a task's final results as events "result" with id =
// the result's Seq, then "end" with the task. A client that reconnects
// with Last-Event-ID (or ?after=) gets only the results after it.
func (s *Server) v1TaskStream(ctx context.Context, c *call) (any, *apiError) {
	id := c.r.PathValue("id")
	after := int64(0)
	v := &model.Validator{}
	for _, src := range []struct{ field, val string }{{"Last-Event-ID", c.r.Header.Get("Last-Event-ID")}, {"after", c.r.URL.Query().Get("after")}} {
		if src.val == "" {
			continue
		}
		n, err := strconv.ParseInt(src.val, 10, 64)
		if err != nil || n < 0 {
			v.Addf(src.field, "%q is not a result sequence number (>= 0)", src.val)
			continue
		}
		after = max(after, n)
	}
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	if _, aerr := s.nativeTaskHead(ctx, c, id); aerr != nil {
		return nil, aerr
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	ch, err := s.b.Watch(ctx, id, after)
	if err != nil {
		return nil, backendError(CodeArgument, "watch "+id, err)
	}
	s.metrics.streams.Add(1)
	defer s.metrics.streams.Add(-1)
	out := startSSE(c)
	tick := time.NewTicker(pingEvery)
	defer tick.Stop()
	sent := 0
	// One result for all: out.result takes it by address, which moved
	// each result received to the heap (one allocation per target).
	var r model.Result
	for {
		select {
		case res, ok := <-ch:
			if !ok {
				if out.writePending() != nil || ctx.Err() != nil {
					return nil, nil
				}
				tctx, tcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				t, err := s.taskOnly(tctx, id)
				tcancel()
				if err == nil {
					_ = out.event("", "end", t)
				}
				return nil, nil
			}
			// Flushed when no further result is waiting: results that
			// arrive together leave in one write, a lone one at once.
			r = res
			if err := out.result(&r); err != nil {
				return nil, nil
			}
			sent++
			cut := s.streamCut > 0 && sent >= s.streamCut
			if len(ch) == 0 || cut {
				if out.writePending() != nil || out.f.Flush() != nil {
					return nil, nil
				}
			}
			if cut {
				return nil, nil
			}
		case <-tick.C:
			if err := out.ping(); err != nil {
				return nil, nil
			}
		case <-ctx.Done():
			return nil, nil
		}
	}
}

// v1Events streams host events as they happen (event "event").
func (s *Server) v1Events(ctx context.Context, c *call) (any, *apiError) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	ch, err := s.b.Events(ctx)
	if err != nil {
		return nil, backendError(CodeGSE, "events", err)
	}
	s.metrics.streams.Add(1)
	defer s.metrics.streams.Add(-1)
	out := startSSE(c)
	tick := time.NewTicker(pingEvery)
	defer tick.Stop()
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				return nil, nil
			}
			if !c.app.seesEvent(e) {
				continue
			}
			if err := out.event("", "event", e); err != nil {
				return nil, nil
			}
		case <-tick.C:
			if err := out.ping(); err != nil {
				return nil, nil
			}
		case <-ctx.Done():
			return nil, nil
		}
	}
}

// v1Audit lists the audit trail, newest first, as far as the app may see
// it: an entry is shown when every namespace it touched is the app's (an
// entry that names no namespace only to an app granted every namespace).
func (s *Server) v1Audit(ctx context.Context, c *call) (any, *apiError) {
	p := c.r.URL.Query()
	v := &model.Validator{}
	q := model.AuditQuery{App: p.Get("app"), User: p.Get("user"), Operator: p.Get("operator"),
		Namespace: p.Get("namespace"), Action: p.Get("action"), Op: p.Get("op"), TaskID: p.Get("task_id"),
		Result: p.Get("result"), Limit: queryInt(v, p.Get("limit"), "limit", 0, 0, model.MaxAuditLimit)}
	for _, t := range []struct {
		field string
		dst   *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if val := p.Get(t.field); val != "" {
			tm, err := time.Parse(time.RFC3339Nano, val)
			if err != nil {
				v.Addf(t.field, "%q is not an RFC 3339 time (2006-01-02T15:04:05Z)", val)
			}
			*t.dst = tm
		}
	}
	if b := p.Get("before"); b != "" {
		n, err := strconv.ParseUint(b, 10, 64)
		if err != nil {
			v.Addf("before", "%q is not an entry sequence number", b)
		}
		q.Before = n
	}
	q.ValidateInto(v)
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	if q.Namespace != "" && !c.app.allowNamespace(q.Namespace) {
		return nil, namespaceDenied(c.app, "namespace", q.Namespace)
	}
	visible := func(e model.AuditEntry) bool {
		if c.app == nil || c.app.allNS {
			return true
		}
		for _, ns := range e.Namespaces {
			if !c.app.allowNamespace(ns) {
				return false
			}
		}
		return len(e.Namespaces) > 0
	}
	want := q.Want()
	out := []model.AuditEntry{}
	// Entries the app may not see are skipped: page back until enough
	// are found or the trail ends (bounded, so one query cannot scan a
	// huge trail for an app that sees little of it).
	for range auditPages {
		es, err := s.b.Audit(ctx, q)
		if err != nil {
			return nil, backendError(CodeGSE, "audit", err)
		}
		for _, e := range es {
			if visible(e) && len(out) < want {
				out = append(out, e)
			}
		}
		if len(out) >= want || len(es) < q.Want() {
			break
		}
		q.Before = es[len(es)-1].Seq
	}
	return out, nil
}

// auditPages bounds the backend queries one audit request makes.
const auditPages = 20

// decodeItems decodes the request's inline definitions (items) again,
// each into model.NewProcessDef, so that a policy field an item leaves out
// has its documented default and one it gives, 0 included, its value
// (decoded into the slice, every item started from zero). The body was
// type-checked by the first decode.
func (c *call) decodeItems(items []model.ProcessDef) *apiError {
	if len(items) == 0 {
		return nil
	}
	var raw struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(c.body, &raw); err != nil || len(raw.Items) != len(items) {
		return validationError(CodeArgument, model.ValidationError{{Field: "items", Reason: fmt.Sprintf("cannot be read again: %v", err)}})
	}
	for i, b := range raw.Items {
		d := model.NewProcessDef()
		if err := json.Unmarshal(b, &d); err != nil {
			return validationError(CodeArgument, model.ValidationError{{Field: fmt.Sprintf("items[%d]", i), Reason: err.Error()}})
		}
		items[i] = d
	}
	return nil
}
