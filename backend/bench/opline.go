package bench

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math/bits"
	"slices"
	"strings"
	"time"

	"gseproc/model"
)

// opLine is what the harness reads of each line `gseproc op --json`
// prints (one per host result).
type opLine struct {
	TaskID   string            `json:"task_id"`
	State    model.ResultState `json:"state"`
	Started  time.Time         `json:"started"`
	Finished time.Time         `json:"finished"`
}

// readOpLine reads l from an op client's line as json.Unmarshal would
// from a valid JSON line (TestReadOpLine compares the two; the rest of the
// line is not checked: the lines are the op client's), but reads only the
// object's own string members it needs and crosses the rest: the harness
// shares the two cores with the server, the sim and the op client, and
// encoding/json's scan of every ~1 KB line was 150-210 ms of its CPU per
// op over 10,000 hosts, more than the sim's or the client's. Anything it
// does not take (an escape or a byte outside printable ASCII in a member
// read, an escape in a member's name, a name matching one only as
// json.Unmarshal matches names, regardless of case, a member read that is
// not a string, a repeated one, white space around its colon, a line that
// is not one object) is left to json.Unmarshal.
func readOpLine(line []byte, l *opLine) error {
	if readOpLineFast(line, l) {
		return nil
	}
	*l = opLine{}
	return json.Unmarshal(line, l)
}

// readOpLineFast is readOpLine's reader: false when it does not take the
// line.
func readOpLineFast(line []byte, l *opLine) bool {
	// The previous line's task id and state, shared when this one's are
	// the same (a string each was most of what a line allocated).
	task, state := l.TaskID, l.State
	*l = opLine{}
	b := bytes.TrimSpace(line)
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	var seen [4]bool
	depth := 0
	expectKey := false // at depth 1, the next string is a member's name
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '{', '[':
			depth++
			expectKey = depth == 1 && c == '{'
		case '}', ']':
			depth--
			if depth < 0 || (depth == 0 && i != len(b)-1) {
				return false
			}
		case ',':
			expectKey = depth == 1
		case '"':
			end, esc := stringEnd(b, i)
			if end < 0 {
				return false
			}
			if !expectKey || depth != 1 {
				i = end
				continue
			}
			expectKey = false
			if esc {
				return false // a member's name with an escape: json.Unmarshal matches names loosely
			}
			name := string(b[i+1 : end])
			i = end
			k := -1
			switch name {
			case "task_id":
				k = 0
			case "state":
				k = 1
			case "started":
				k = 2
			case "finished":
				k = 3
			}
			if k < 0 {
				for _, w := range [...]string{"task_id", "state", "started", "finished"} {
					if strings.EqualFold(name, w) {
						return false // json.Unmarshal would take it
					}
				}
				continue
			}
			// Its value: a string without escapes.
			j := i + 1
			if j >= len(b) || b[j] != ':' || j+1 >= len(b) || b[j+1] != '"' || seen[k] {
				return false
			}
			vend, vesc := stringEnd(b, j+1)
			if vend < 0 || vesc {
				return false
			}
			v := b[j+2 : vend]
			for _, c := range v {
				if c < 0x20 || c >= 0x80 {
					return false // json.Unmarshal makes invalid UTF-8 valid
				}
			}
			seen[k] = true
			switch k {
			case 0:
				if l.TaskID = task; string(v) != task {
					l.TaskID = string(v)
				}
			case 1:
				if l.State = state; string(v) != string(state) {
					l.State = model.ResultState(v)
				}
			case 2, 3:
				t := &l.Started
				if k == 3 {
					t = &l.Finished
				}
				if err := t.UnmarshalJSON(b[j+1 : vend+1]); err != nil {
					return false
				}
			}
			i = vend
		}
	}
	return depth == 0
}

// stringEnd is the index of the quote closing the string that opens at
// b[i], and whether the string holds an escape; -1 when it does not end.
// It looks at eight bytes at a time for a quote or a backslash: a line's
// content is a string of ~1 KB, read byte by byte it was half of the
// harness's reading of a line (and bytes.IndexByte, called at every one
// of its escaped quotes, no faster).
func stringEnd(b []byte, i int) (int, bool) {
	esc := false
	for j := i + 1; j < len(b); {
		if j+8 <= len(b) {
			m := quoteOrBackslash(binary.LittleEndian.Uint64(b[j:]))
			if m == 0 {
				j += 8
				continue
			}
			j += bits.TrailingZeros64(m) >> 3
		} else if c := b[j]; c != '"' && c != '\\' {
			j++
			continue
		}
		if b[j] == '"' {
			return j, esc
		}
		esc = true
		j += 2 // the backslash and the byte it escapes
	}
	return -1, esc
}

// quoteOrBackslash has the high bit set in the lowest byte of w that is
// '"' or '\\' (none: 0). Above that byte its bits may be wrong (a borrow
// carries): only the lowest is used.
func quoteOrBackslash(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, s := w^(ones*'"'), w^(ones*'\\')
	return ((q-ones)&^q | (s-ones)&^s) & highs
}

// opOutput is what an op client printed, kept as it arrived: its bytes,
// and for each line the index past its end and when that end was read
// (from the op's start). The harness reads the lines only once the client
// has exited: it shares the two cores with the server, the sim and the op
// client it measures, and reading each line as it came (bufio.Scanner,
// then readOpLine) was ~370 ms of its CPU per op over 100,000 hosts, taken
// from the op. Kept from one run to the next, its room is grown once.
type opOutput struct {
	buf  []byte
	ends []int
	at   []time.Duration
}

// reserve gives o room for n bytes (and lines of about opLineSize), the
// room's pages touched now, before an op: grown while the op ran, the
// room's new pages were faulted in during the op (the first run over
// 100,000 hosts cost the harness 475 ms of CPU, the next ones 85-90 ms).
func (o *opOutput) reserve(n int) {
	if cap(o.buf) < n {
		o.buf = make([]byte, 0, n)
		room := o.buf[:n]
		for i := 0; i < n; i += 4096 {
			room[i] = 0
		}
	}
	if lines := n / opLineSize; cap(o.ends) < lines {
		o.ends, o.at = make([]int, 0, lines), make([]time.Duration, 0, lines)
	}
}

// opLineSize is a little more than the op client prints per host (a
// status result's line over the bench fleet is about 1,530 bytes).
const opLineSize = 1600

// opReadMin is the least room a read is given.
const opReadMin = 256 << 10

// readFrom reads r to its end (io.EOF), the lines' times taken by since
// when each read returns. A line that ends in the middle of a later read
// is timed by that read, as a line reader's would be.
func (o *opOutput) readFrom(r io.Reader, since func() time.Duration) error {
	o.buf, o.ends, o.at = o.buf[:0], o.ends[:0], o.at[:0]
	var at time.Duration
	for {
		if cap(o.buf)-len(o.buf) < opReadMin {
			o.buf = slices.Grow(o.buf, max(cap(o.buf), 4*opReadMin))
		}
		n, err := r.Read(o.buf[len(o.buf):cap(o.buf)])
		if n > 0 {
			at = since()
			from := len(o.buf)
			o.buf = o.buf[:from+n]
			for i := from; ; {
				j := bytes.IndexByte(o.buf[i:], '\n')
				if j < 0 {
					break
				}
				i += j + 1
				o.ends = append(o.ends, i)
				o.at = append(o.at, at)
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			if n := len(o.ends); n == 0 && len(o.buf) > 0 || n > 0 && o.ends[n-1] < len(o.buf) {
				o.ends = append(o.ends, len(o.buf)) // a last line without its '\n'
				o.at = append(o.at, at)
			}
			return nil
		case err != nil:
			return err
		}
	}
}

// lines calls f with each line read (without its line end) and when it
// was read.
func (o *opOutput) lines(f func(line []byte, at time.Duration)) {
	from := 0
	for k, end := range o.ends {
		f(bytes.TrimSuffix(bytes.TrimSuffix(o.buf[from:end], []byte("\n")), []byte("\r")), o.at[k])
		from = end
	}
}
