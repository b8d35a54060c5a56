package transport

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
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
	once sync.Once
	seed maphash.Seed
	// recent is, by the texts' hash, the last text looked up there: read
	// without a lock. A reply holds about seven texts and the parts'
	// read locks (two atomic adds each) and map lookups were about a
	// sixth of its decoding, while the texts of an op are a few the
	// whole fleet shares.
	recent [wordRecent]atomic.Pointer[string]
	parts  [wordParts]wordPart
}

type wordPart struct {
	mu sync.RWMutex
	m  map[string]*string // a text's copy, by address (what recent holds)
	// bytes counts the texts' bytes.
	bytes int
	_     [32]byte // its own cache line: the parts' locks are taken from every core
}

const (
	wordParts    = 16
	wordMax      = 1 << 16
	wordMaxBytes = 4 << 20
	// wordRecent bounds recent: what it holds is at most wordRecent
	// texts of a reply's (each of internWord bytes at most), besides the
	// parts' own.
	wordRecent = 1024
)

// get is the kept copy of b's text, kept now if it was not.
func (t *wordTable) get(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	t.once.Do(func() { t.seed = maphash.MakeSeed() })
	h := maphash.Bytes(t.seed, b)
	slot := &t.recent[h%wordRecent]
	if k := slot.Load(); k != nil && *k == string(b) {
		return *k
	}
	k := t.part(h).get(b)
	slot.Store(k)
	return *k
}

// part is the part that keeps the texts of hash h.
func (t *wordTable) part(h uint64) *wordPart {
	// By the bits above recent's: the texts a slot of recent sees are
	// kept by every part, not one.
	return &t.parts[(h/wordRecent)%wordParts]
}

// get is the kept copy of b's text, kept now if it was not.
func (p *wordPart) get(b []byte) *string {
	p.mu.RLock()
	k, ok := p.m[string(b)]
	p.mu.RUnlock()
	if ok {
		return k
	}
	s := string(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	if kept, ok := p.m[s]; ok {
		return kept
	}
	if p.m == nil || len(p.m) >= wordMax/wordParts || p.bytes+len(s) > wordMaxBytes/wordParts {
		p.m, p.bytes = map[string]*string{}, 0
	}
	p.m[s] = &s
	p.bytes += len(s)
	return &s
}
