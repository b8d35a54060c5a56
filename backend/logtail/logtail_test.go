package logtail

import (
	"bytes"
	"context"
	"testing"

	"gseproc/model"
)

func TestWhole(t *testing.T) {
	cases := []struct {
		in    string
		limit int
		hold  bool
		want  string
	}{
		{"a\nb\n", 10, true, "a\nb\n"},
		{"a\nbc", 10, true, "a\n"},        // a line still being written waits
		{"a\nbc", 10, false, "a\nbc"},     // the rest of a finished log
		{"a\nbc", 4, false, "a\n"},        // more follows: cut at the line
		{"abcd", 4, true, "abcd"},         // a line longer than the chunk
		{"abc", 10, true, ""},             // nothing whole yet
		{"abc", 10, false, "abc"},         // the process is gone: all of it
		{"", 10, true, ""},                //
		{"a\n\n", 10, true, "a\n\n"},      //
		{"x\nyyyyyyyy", 10, true, "x\n"},  //
		{"x\nyyyyyyyy", 10, false, "x\n"}, // a full chunk: more may follow
	}
	for _, c := range cases {
		if got := string(Whole([]byte(c.in), c.limit, c.hold)); got != c.want {
			t.Errorf("Whole(%q, %d, %v) = %q, want %q", c.in, c.limit, c.hold, got, c.want)
		}
	}
}

type memSource struct {
	b       []byte
	ino     uint64
	running bool
}

func (m *memSource) Open() (Reader, error) { return memReader{bytes.NewReader(m.b), m}, nil }
func (m *memSource) Running() bool         { return m.running }

type memReader struct {
	*bytes.Reader
	m *memSource
}

func (r memReader) Close() error                 { return nil }
func (r memReader) Stat() (int64, uint64, error) { return int64(len(r.m.b)), r.m.ino, nil }

func TestServeStartsAtLines(t *testing.T) {
	src := &memSource{b: []byte("one\ntwo\nthree\nfour\n"), ino: 7, running: true}
	cases := []struct {
		req  model.TailRequest
		want string
		off  int64
		rst  bool
	}{
		{model.TailRequest{Offset: -1, Back: 7}, "four\n", 14, false},        // 7 back falls in "three"
		{model.TailRequest{Offset: -1, Back: 11}, "three\nfour\n", 8, false}, // exactly at a line start
		{model.TailRequest{Offset: -1, Back: 100}, string(src.b), 0, false},
		{model.TailRequest{Offset: 4, Inode: 7}, "two\nthree\nfour\n", 4, false},
		{model.TailRequest{Offset: 4, Inode: 8}, string(src.b), 0, true},  // replaced: from the start
		{model.TailRequest{Offset: 99, Inode: 7}, string(src.b), 0, true}, // truncated
		{model.TailRequest{Offset: 0, Max: 9}, "one\ntwo\n", 0, false},
	}
	for _, c := range cases {
		got, err := Serve(context.Background(), src, c.req, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		if got.Data != c.want || got.Offset != c.off || got.Reset != c.rst || got.Next != c.off+int64(len(c.want)) {
			t.Errorf("%+v: %q at %d reset %v next %d, want %q at %d reset %v", c.req, got.Data, got.Offset, got.Reset, got.Next, c.want, c.off, c.rst)
		}
	}
}
