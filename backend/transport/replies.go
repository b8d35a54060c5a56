package transport

import (
	"hash/maphash"
	"sync"

	"github.com/nats-io/nats.go"
)

// replyShards is how many parts the requests waiting for a reply are kept
// in, each under its own lock. One lock for all was a convoy: every
// Dispatch takes it twice (to wait, and to stop waiting) and the reply
// subscription once per answer, and an op over 10,000 hosts has 2,048 of
// them waiting at once; on a busy machine each hand-over of the lock
// waited for its next holder to be scheduled (40 ms per dispatch, summed
// in a block profile: 330 s of 2,048 goroutines' time over 2 s).
const replyShards = 64

// replyTable is the requests waiting for a reply, by request id. Its zero
// value is empty and ready.
type replyTable struct {
	seed   maphash.Seed
	once   sync.Once
	shards [replyShards]replyShard
}

type replyShard struct {
	mu sync.Mutex
	m  map[string]pendingReply
	_  [48]byte // its own cache line: the shards' locks are taken from every core
}

// shard is id's part.
func (t *replyTable) shard(id string) *replyShard {
	t.once.Do(func() { t.seed = maphash.MakeSeed() })
	return &t.shards[maphash.String(t.seed, id)%replyShards]
}

// put keeps p under id (replacing what was).
func (t *replyTable) put(id string, p pendingReply) {
	s := t.shard(id)
	s.mu.Lock()
	if s.m == nil {
		s.m = map[string]pendingReply{}
	}
	s.m[id] = p
	s.mu.Unlock()
}

// del forgets id.
func (t *replyTable) del(id string) {
	s := t.shard(id)
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// take returns what id holds when m came on its subject, under one lock:
// a late request's is forgotten (a late answer counts once), and a
// request still waiting is handed m on its channel (the first answer
// counts). The hand-over is under the lock so that keepLate, which makes
// the request late under it and then looks at the channel, finds there
// every answer that came before: handed over after the lock, an answer
// could land in the channel after keepLate looked, and be lost.
func (t *replyTable) take(id string, m *nats.Msg) (p pendingReply, ok, same bool) {
	s := t.shard(id)
	s.mu.Lock()
	p, ok = s.m[id]
	same = ok && p.subject == m.Subject
	switch {
	case !same:
	case p.late != nil, p.async != nil: // an async request's answer goes to its callback, once
		delete(s.m, id)
	default:
		select {
		case p.ch <- m:
		default: // answered twice: the first answer counts
		}
	}
	s.mu.Unlock()
	return p, ok, same
}

// escalate turns id, when it is still an async request, into one a
// goroutine waits for: its answers are handed on the channel it returns
// from now on. nil: id is not an async request (answered, or escalated
// already).
func (t *replyTable) escalate(id string) (*asyncCall, chan *nats.Msg) {
	s := t.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.m[id]
	if !ok || p.async == nil {
		return nil, nil
	}
	a := p.async
	p.async, p.ch = nil, make(chan *nats.Msg, 1)
	s.m[id] = p
	return a, p.ch
}

// asyncCalls are the ids of the async requests waiting for which keep
// (called under the shard's lock) is true.
func (t *replyTable) asyncCalls(keep func(*asyncCall) bool) []string {
	var out []string
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for id, p := range s.m {
			if p.async != nil && keep(p.async) {
				out = append(out, id)
			}
		}
		s.mu.Unlock()
	}
	return out
}

// isLate reports whether id is still a late request.
func (t *replyTable) isLate(id string) bool {
	s := t.shard(id)
	s.mu.Lock()
	p, ok := s.m[id]
	s.mu.Unlock()
	return ok && p.late != nil
}

// dropLate forgets id when it is still a late request, and reports
// whether it did.
func (t *replyTable) dropLate(id string) bool {
	s := t.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.m[id]; ok && p.late != nil {
		delete(s.m, id)
		return true
	}
	return false
}
