package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// followWait is how long one request of a follow waits on the agent for
// new lines; logSlack is what a request's deadline adds to its wait.
const (
	followWait = 2 * time.Second
	logSlack   = 5 * time.Second
)

// Logs streams a process's log on a host: a chain of tail requests to
// the host's agent (model.TailRequest), each from where the last answer
// ended. See backend.Backend.
func (e *Engine) Logs(ctx context.Context, q backend.LogQuery) (<-chan model.TailChunk, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	defs, err := e.st.Processes(ctx)
	if err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}
	i := slices.IndexFunc(defs, func(d model.ProcessDef) bool { return d.Process.Key() == q.Process })
	if i < 0 {
		return nil, fmt.Errorf("logs: process %s: %w", q.Process, model.ErrNotFound)
	}
	if !slices.Contains(defs[i].Hosts, q.Host) {
		return nil, fmt.Errorf("logs: process %s is not deployed on host %s: %w", q.Process, q.Host, model.ErrNotFound)
	}
	p := defs[i].Process
	e.mu.Lock()
	if e.ctx.Err() != nil {
		e.mu.Unlock()
		return nil, errors.New("logs: engine is closed")
	}
	e.wg.Add(1)
	e.mu.Unlock()
	out := make(chan model.TailChunk, 4)
	go func() {
		defer e.wg.Done()
		defer close(out)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(e.ctx, cancel)
		defer stop()
		e.tailLoop(ctx, p, q, out)
	}()
	return out, nil
}

// tailLoop asks the agent for piece after piece and sends each that
// says something, until the stream is over (see Backend.Logs) or ctx
// ends.
func (e *Engine) tailLoop(ctx context.Context, p model.Process, q backend.LogQuery, out chan<- model.TailChunk) {
	send := func(c model.TailChunk) bool {
		c.Host = q.Host
		select {
		case out <- c:
			return true
		case <-ctx.Done():
			return false
		}
	}
	req := q.Tail()
	var until int64 = -1 // not following: the log's size at the first answer
	for first := true; ; first = false {
		budget := req.Wait + logSlack
		dctx, cancel := context.WithTimeout(ctx, budget)
		rep, err := e.d.Dispatch(dctx, q.Host, model.AgentRequest{Process: p, Tail: &req, Deadline: time.Now().Add(budget)})
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			send(model.TailChunk{Error: fmt.Sprintf("tail %s on %s: %v", q.Process, q.Host, err)})
			return
		case rep.Code != model.CodeSuccess || rep.Tail == nil:
			msg := rep.Message
			if msg == "" {
				msg = model.CodeText(rep.Code)
			}
			send(model.TailChunk{Error: fmt.Sprintf("tail %s on %s: %s", q.Process, q.Host, msg)})
			return
		}
		c := *rep.Tail
		if until < 0 {
			until = c.Size
		}
		end := c.Done() || (!q.Follow && (c.Next >= until || c.Reset))
		if (first || end || c.Data != "" || c.Reset) && !send(c) {
			return
		}
		if end {
			return
		}
		req.Offset, req.Inode, req.Back = c.Next, c.Inode, 0
		if q.Follow {
			req.Wait = followWait
		}
	}
}
