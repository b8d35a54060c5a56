package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ReadHostListFrom is ReadHostList reading the listing from r as it
// arrives: each host is parsed and handed to fn as soon as its bytes are
// in, so that a console parses a listing of 100,000 hosts (~16 MB) while
// the rest of it is still on the way, and holds a window of it (a few
// hosts, 64 KiB read at a time) instead of the whole. It reads r in
// chunks, so it may read past the listing: it returns what it read past
// it (an envelope goes on after its data), to be read before the rest of
// r. Errors, offsets in them and what is handed to fn before an error
// are ReadHostList's on the same bytes; a listing whose tables come after
// its hosts (not as the server writes them) has its hosts held until the
// tables are read, as ReadHostList does.
func ReadHostListFrom(r io.Reader, fn func(*HostList, *ListHost)) ([]byte, error) {
	var (
		hl HostList
		hr = hostReader{hl: &hl}
		s  = &streamIn{r: r}
		p  listParts
	)
	err := s.object(func(key string) error {
		if p.twice(key) {
			return s.errorf("%s given twice", key)
		}
		if p.hostsNow(key) {
			return s.hosts(&hr, fn)
		}
		raw, at, err := s.skip()
		if err != nil {
			return err
		}
		if key == "hosts" {
			raw = bytes.Clone(raw) // in the window, which moves on
		}
		return p.take(&hl, key, raw, at)
	})
	if err == nil {
		err = p.end(&hr, fn)
	}
	if err != nil {
		if s.rerr != nil {
			return nil, fmt.Errorf("host list: read: %w", s.rerr)
		}
		return nil, fmt.Errorf("host list: %w", err)
	}
	return s.buf[s.i:], nil
}

// errCut is a value the window's end may cut, read again with more.
var errCut = errors.New("value at the window's end")

// streamChunk is how much a listing read as it arrives reads at a time.
const streamChunk = 64 << 10

// streamIn is a window over a listing being read: buf[i:] is read and
// not yet parsed, off is buf[0]'s offset in the listing.
type streamIn struct {
	r    io.Reader
	buf  []byte
	i    int
	off  int64
	eof  bool  // r has no more (or failed: rerr)
	rerr error // r's error other than io.EOF
}

// at is the offset in the listing of the next byte to parse.
func (s *streamIn) at() int64 { return s.off + int64(s.i) }

// errorf is an error at the next byte to parse, as lexer.errorf says it.
func (s *streamIn) errorf(format string, a ...any) error {
	if s.i >= len(s.buf) {
		s.more(1) // whether the data ends here, as ReadHostList would say
	}
	l := lexer{b: s.buf, i: s.i, base: s.off}
	return l.errorf(format, a...)
}

// more reads more of r: at least want bytes (or to its end), at least
// one. What is not parsed yet moves to the window's start.
func (s *streamIn) more(want int) {
	if s.eof {
		return
	}
	if s.i > 0 {
		n := copy(s.buf, s.buf[s.i:])
		s.buf, s.off, s.i = s.buf[:n], s.off+int64(s.i), 0
	}
	if room := max(want, streamChunk); cap(s.buf)-len(s.buf) < room {
		nb := make([]byte, len(s.buf), len(s.buf)+room)
		copy(nb, s.buf)
		s.buf = nb
	}
	for got, zero := 0, 0; got == 0 || got < want; {
		n, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf, got = s.buf[:len(s.buf)+n], got+n
		switch {
		case err == io.EOF:
			s.eof = true
			return
		case err != nil:
			s.eof, s.rerr = true, err
			return
		case n == 0:
			if zero++; zero > 100 {
				s.eof, s.rerr = true, io.ErrNoProgress
				return
			}
		}
	}
}

// value runs parse over the window until it parses a value: a value cut
// by the window's end fails, and is parsed again with more read (at
// least as much again as the window held: each value is parsed a bounded
// number of times). At the end of r its error is the value's error.
// parse returns how many bytes it parsed.
func (s *streamIn) value(parse func(l *lexer) error) error {
	for {
		l := lexer{b: s.buf[s.i:], base: s.at()}
		err := parse(&l)
		if err == nil {
			s.i += l.i
			return nil
		}
		if s.eof {
			return err
		}
		s.more(len(s.buf) - s.i)
	}
}

// next reads past blanks and returns the next byte (ok false at the
// end of r).
func (s *streamIn) next() (byte, bool) {
	for {
		for s.i < len(s.buf) {
			switch c := s.buf[s.i]; c {
			case ' ', '\t', '\n', '\r':
				s.i++
			default:
				return c, true
			}
		}
		if s.eof {
			return 0, false
		}
		s.more(0)
	}
}

// skip reads past one value (lexer.skip: its syntax checked, its nesting
// bounded) and returns its bytes, valid until the window moves, and their
// offset in the listing.
func (s *streamIn) skip() ([]byte, int64, error) {
	var (
		raw []byte
		at  int64
	)
	err := s.value(func(l *lexer) error {
		l.ws()
		start := l.i
		if err := l.skip(); err != nil {
			return err
		}
		if l.i == len(l.b) && !s.eof {
			// A number has no end of its own: one the window
			// cuts ("12" of "1234") would parse.
			return errCut
		}
		raw, at = l.b[start:l.i], l.base+int64(start)
		return nil
	})
	return raw, at, err
}

// object reads an object as lexer.object does, calling each with every
// key (each reads the value).
func (s *streamIn) object(each func(key string) error) error {
	if c, ok := s.next(); !ok || c != '{' {
		return s.errorf("want an object")
	}
	s.i++
	if c, ok := s.next(); ok && c == '}' {
		s.i++
		return nil
	}
	for {
		var key string
		if err := s.value(func(l *lexer) (err error) {
			key, err = l.key()
			return err
		}); err != nil {
			return err
		}
		if err := each(key); err != nil {
			return err
		}
		c, ok := s.next()
		if !ok {
			return s.errorf("unterminated object")
		}
		s.i++
		switch c {
		case ',':
		case '}':
			return nil
		default:
			s.i--
			return s.errorf("want , or } in an object")
		}
	}
}

// hosts reads the hosts array as hostReader.read does, each host handed
// to fn once parsed.
func (s *streamIn) hosts(r *hostReader, fn func(*HostList, *ListHost)) error {
	if c, ok := s.next(); !ok || c != '[' {
		return fmt.Errorf("hosts: %w", s.errorf("want an array"))
	}
	s.i++
	if c, ok := s.next(); ok && c == ']' {
		s.i++
		return nil
	}
	for i := 0; ; i++ {
		// s.value's loop, written out: the host's parse makes no
		// closure and no lexer on the heap (two allocations a host).
		for {
			r.l = lexer{b: s.buf[s.i:], base: s.at()}
			err := r.host()
			if err == nil {
				s.i += r.l.i
				break
			}
			if s.eof {
				return fmt.Errorf("hosts[%d]%w", i, err)
			}
			s.more(len(s.buf) - s.i)
		}
		fn(r.hl, &r.h)
		c, ok := s.next()
		if !ok {
			return s.errorf("unterminated array")
		}
		s.i++
		switch c {
		case ',':
		case ']':
			return nil
		default:
			s.i--
			return s.errorf("want , or ] in an array")
		}
	}
}
