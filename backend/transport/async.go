package transport

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"gseproc/model"
)

// Requests no goroutine waits for. Dispatch is one goroutine per request,
// parked until its answer: an op over 10,000 hosts parked and woke 2,048
// of them in turn, each waiting in a select over its own channel, the
// reconnection signal and its deadline (the last two shared by all, so
// every wait locked them), each kept in the reply table and taken out of
// it again. DispatchAsync publishes the request and returns; the answer
// is decoded and handed to the caller's callback by the reply
// subscription itself (onReply). Only when something else happens first
// does a goroutine take the request over, the one Dispatch runs
// (await): its context ends (deadline, cancel: the late answer and the
// agent told to stop are Dispatch's), or the connection comes back (the
// request is asked again, as Dispatch asks). The contexts are followed
// one per context, not one per request: the engine sends the requests of
// a run under a few shared deadlines.

// asyncCall is a request sent by DispatchAsync.
type asyncCall struct {
	d    *Dispatcher
	ctx  context.Context
	host model.Host
	c    call
	done func(model.AgentReply, error)
}

// finish hands the outcome of a (msg or err) to its callback, then
// gives a back to its dispatcher for the next request (free): by then
// nothing holds it. The reply table let it go before (take, escalate;
// the context watches and askAgainAsync know requests by id, not by
// address), and whoever finishes it held it alone.
func (a *asyncCall) finish(msg *nats.Msg, err error) {
	d := a.d
	rep, err := d.answer(a.ctx, a.host, msg, err)
	a.done(rep, err)
	d.free(a)
}

// newAsync is an asyncCall to fill, one made before when one is free.
// One per target of every op sent async was ~22 MB of allocations an op
// over 100,000 hosts (heap profile of bench fleet), all of it garbage
// the collector had to catch up with, while at most the window's count
// (2,048) are in flight at once.
func (d *Dispatcher) newAsync() *asyncCall {
	if a, _ := d.asyncs.Get().(*asyncCall); a != nil {
		return a
	}
	return &asyncCall{}
}

// free keeps a, finished, for newAsync; what it held is let go.
func (d *Dispatcher) free(a *asyncCall) {
	*a = asyncCall{}
	d.asyncs.Put(a)
}

// takeOver waits for a's answer in a goroutine, as Dispatch does, from
// the channel escalate made for it; reask: publish it again first (the
// connection came back).
func (a *asyncCall) takeOver(ch chan *nats.Msg, reask bool) {
	again := *a.d.reconnected.Load()
	go func() {
		msg, err := a.d.await(a.ctx, &a.c, ch, again, reask)
		a.finish(msg, err)
	}()
}

// DispatchAsync sends req to host's agent as Dispatch does and returns at
// once; done is called once with what Dispatch would have returned,
// from another goroutine (or from this one, when the request could not
// be sent). ctx must end (a deadline, as the engine's dispatches have);
// one that cannot is served by Dispatch in a goroutine. done must not
// block for long: it is called by the reply subscription, before the
// next answer is read.
func (d *Dispatcher) DispatchAsync(ctx context.Context, host model.Host, req model.AgentRequest, done func(model.AgentReply, error)) {
	if ctx.Done() == nil {
		go d.dispatchThen(ctx, host, req, done)
		return
	}
	if req.Deadline.IsZero() {
		if dl, ok := ctx.Deadline(); ok {
			req.Deadline = dl
		}
	}
	id, err := hostID(host)
	if err != nil {
		done(model.AgentReply{}, fmt.Errorf("dispatch: %w", err))
		return
	}
	c := d.newCall(id, req.OpID, req.TaskID, nil)
	if rec, ok := recipeOf(&req); ok {
		c.rec = rec // encoded at each publish (publish)
	} else {
		data, err := model.AppendRequestJSON(nil, &req)
		if err != nil {
			done(model.AgentReply{}, fmt.Errorf("dispatch %s: encode request: %w", host, err))
			return
		}
		c.data = data
	}
	a := d.newAsync()
	*a = asyncCall{d: d, ctx: ctx, host: host, c: c, done: done}
	// From the put on, a is not this goroutine's: its answer, its
	// context's end or a reconnection may finish it (and it serve another
	// request) at any moment. It is published from c, this call's copy.
	d.replies.put(c.id, pendingReply{host: id, subject: c.reply, async: a})
	d.watchCtx(ctx)
	if err := d.publish(&c); err != nil {
		// Not sent. Taken over meanwhile (its context ended, or the
		// connection came back: published again), the goroutine that
		// waits for it has it.
		if a2, _ := d.replies.escalate(c.id); a2 != nil {
			d.replies.del(c.id)
			a2.finish(nil, fmt.Errorf("publish request: %w", err))
		}
	}
}

// dispatchThen calls done with what Dispatch returns (a function of its
// own: a closure over req made every caller's request escape).
func (d *Dispatcher) dispatchThen(ctx context.Context, host model.Host, req model.AgentRequest, done func(model.AgentReply, error)) {
	done(d.Dispatch(ctx, host, req))
}

// watchCtx follows ctx, an async request's, until it ends: then the
// requests sent under it that still wait are taken over (ctxEnded). A
// context is followed once, whatever number of requests it was sent
// with, and nothing is kept per request: a list of the ids sent under
// each context held every id of an op (and the subjects they are cut
// from, ~9 MB an op over 100,000 hosts) until its deadline, seconds after
// the op ended, and growing it was ~5 MB of allocations an op. The
// request is in the reply table before its context is followed, so a
// context that ended already (followed again at once) finds it.
func (d *Dispatcher) watchCtx(ctx context.Context) {
	// By its Done channel: always comparable (a Context need not be),
	// and the contexts that share one end together.
	key := ctx.Done()
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if _, ok := d.watches[key]; ok {
		return
	}
	if d.watches == nil {
		d.watches = map[<-chan struct{}]uint64{}
	}
	d.watchN++
	n := d.watchN
	d.watches[key] = n
	// Called at once (in a goroutine) when ctx has ended already.
	context.AfterFunc(ctx, func() { d.ctxEnded(key, n) })
}

// ctxEnded takes over the async requests still waiting that were sent
// under the context whose Done channel is key (followed as watch n): a
// goroutine of each (await) sees the context ended and does what
// Dispatch does then. They are found in the reply table, in flight at
// most the senders' windows (2,048 for an op), once per context.
func (d *Dispatcher) ctxEnded(key <-chan struct{}, n uint64) {
	d.wmu.Lock()
	if d.watches[key] == n {
		delete(d.watches, key)
	}
	d.wmu.Unlock()
	for _, id := range d.replies.asyncCalls(func(a *asyncCall) bool { return a.ctx.Done() == key }) {
		if a, ch := d.replies.escalate(id); a != nil {
			a.takeOver(ch, false)
		}
	}
}

// askAgainAsync takes over the async requests with an op id waiting
// when the connection came back: each is published again by the
// goroutine that then waits for it.
func (d *Dispatcher) askAgainAsync() {
	// By id: a request answered after the listing is finished, and its
	// asyncCall may serve another request by the time it is escalated.
	for _, id := range d.replies.asyncCalls(func(a *asyncCall) bool { return a.c.opID != "" }) {
		if a, ch := d.replies.escalate(id); a != nil {
			a.takeOver(ch, true)
		}
	}
}
