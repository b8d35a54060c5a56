package server

import (
	"context"
	"strconv"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// v1Logs streams a process's log on one host (backend.Backend.Logs) as
// events "chunk" (a model.TailChunk each), then "end" ({"reason": ...}).
// An app sees only the logs of its namespaces' processes (a refusal is
// recorded as scope_denied, as for every read).
func (s *Server) v1Logs(ctx context.Context, c *call) (any, *apiError) {
	p := c.r.URL.Query()
	v := &model.Validator{}
	q := backend.LogQuery{Process: p.Get("proc"), Stream: model.LogStream(p.Get("stream")), File: p.Get("file"),
		Instance: queryInt(v, p.Get("instance"), "instance", 0, 0, 1000)}
	if b := p.Get("bytes"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil {
			v.Addf("bytes", "%q is not a byte count", b)
		}
		q.Bytes = n
	}
	switch f := p.Get("follow"); f {
	case "", "false", "0":
	case "true", "1":
		q.Follow = true
	default:
		v.Addf("follow", "%q: want true or false", f)
	}
	if hs := queryHosts(v, p["host"]); len(hs) == 1 {
		q.Host = hs[0]
	} else if len(hs) > 1 {
		v.Add("host", "one host")
	} else if v.Err() == nil {
		v.Add("host", "required (cloud:ip or an agent id)")
	}
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	if err := q.Validate(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	if ns, _, _ := model.SplitKey(q.Process); !c.app.allowNamespace(ns) {
		return nil, namespaceDenied(c.app, "proc", ns)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	ch, err := s.b.Logs(ctx, q)
	if err != nil {
		return nil, backendError(CodeArgument, "logs of "+q.Process, err)
	}
	s.metrics.streams.Add(1)
	defer s.metrics.streams.Add(-1)
	out := startSSE(c)
	tick := time.NewTicker(pingEvery)
	defer tick.Stop()
	reason := "done"
	for {
		select {
		case chunk, ok := <-ch:
			if !ok {
				if ctx.Err() == nil {
					_ = out.event("", "end", map[string]string{"reason": reason})
				}
				return nil, nil
			}
			switch {
			case chunk.Error != "":
				reason = "error"
			case chunk.Done():
				reason = "exited"
			}
			if err := out.event(strconv.FormatInt(chunk.Next, 10), "chunk", chunk); err != nil {
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
