package transport

import (
	"hash/maphash"
	"sync"
)

// wordTable keeps one copy of each short text the agents' replies carry
// (process keys and names, states, versions, command lines, messages: the
// same on many hosts), so that decoding a reply makes none of them again:
// an op over 100,000 hosts decoded about 800,000 such strings, each kept
// by a result and the last known statuses until shared after the fact.
// It is read by every dispatch at once, so it is kept in parts, each
// under its own lock, and bounded (then a part starts again): at most
// wordMax texts and wordMaxBytes of them in all. The zero value is ready.
type wordTable struct {
	once  sync.Once
	seed  maphash.Seed
	parts [wordParts]wordPart
}

type wordPart struct {
	mu    sync.RWMutex
	m     map[string]string
	bytes int
	_     [32]byte // its own cache line: the parts' locks are taken from every core
}

const (
	wordParts    = 16
	wordMax      = 1 << 16
	wordMaxBytes = 4 << 20
)

// get is the kept copy of b's text, kept now if it was not.
func (t *wordTable) get(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	t.once.Do(func() { t.seed = maphash.MakeSeed() })
	p := &t.parts[maphash.Bytes(t.seed, b)%wordParts]
	p.mu.RLock()
	s, ok := p.m[string(b)]
	p.mu.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	if kept, ok := p.m[s]; ok {
		return kept
	}
	if p.m == nil || len(p.m) >= wordMax/wordParts || p.bytes+len(s) > wordMaxBytes/wordParts {
		p.m, p.bytes = map[string]string{}, 0
	}
	p.m[s] = s
	p.bytes += len(s)
	return s
}
