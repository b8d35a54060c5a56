package client

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"net/http"
	"strings"

	"gseproc/backend"
	"gseproc/backend/server/wire"
	"gseproc/model"
)

// A reply is decoded as it is read: its envelope key by key, its data
// straight into the caller's value, and the big lists (a listing of
// 100,000 hosts, a task's 218,000 results) element by element, so the
// body is never held whole. Reading it whole and decoding it twice (the
// envelope, then its data) made a 100,000-host listing allocate ~560 MB
// and a big task's reply ~650 MB in the console (remote mode), the peaks
// of its RSS.

// maxReply bounds a reply's body.
const maxReply = 256 << 20

// dataDecoder decodes an envelope's data from the decoder, positioned at
// the data's first token (a value with its own element-wise decoding).
type dataDecoder interface {
	decodeData(dec *json.Decoder) error
}

// streamDecoder decodes an envelope's data by hand from the reply as it
// arrives (a host listing in the list form: encoding/json's scanner alone
// took longer than the whole of its parsing). r starts with the data, or
// the colon before it; it returns r after the data (the envelope's end).
type streamDecoder interface {
	decodeStream(r io.Reader) (io.Reader, error)
}

// headReader keeps the first bytes read through it, to quote a reply that
// is not an envelope.
type headReader struct {
	r    io.Reader
	head []byte
}

func (h *headReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if room := 200 - len(h.head); room > 0 && n > 0 {
		h.head = append(h.head, p[:min(n, room)]...)
	}
	return n, err
}

// readReply reads a reply's envelope from resp's body and decodes its
// data into out (when not nil and the reply is a success), or returns the
// reply's error: a model.ValidationError for a validation refusal, an
// *APIError for another.
func readReply(resp *http.Response, out any) error {
	hr := &headReader{r: io.LimitReader(resp.Body, maxReply)}
	dec := json.NewDecoder(hr)
	var (
		env            envelope
		seenOK, seenCo bool
		seenData       bool
		decoded        bool // data went into out
	)
	notEnvelope := func() error {
		_, _ = io.Copy(io.Discard, io.LimitReader(hr, 200)) // a little more to quote
		return fmt.Errorf("reply %s is not a gseproc envelope: %q", resp.Status, hr.head)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return notEnvelope()
	}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return notEnvelope()
		}
		switch key {
		case "result":
			err, seenOK = dec.Decode(&env.Result), true
		case "code":
			err, seenCo = dec.Decode(&env.Code), true
		case "message":
			err = dec.Decode(&env.Message)
		case "request_id":
			err = dec.Decode(&env.RequestID)
		case "data":
			if seenData {
				// Decoded twice, a list handed over one by
				// one would be handed over twice.
				return notEnvelope()
			}
			seenData = true
			if sd, ok := out.(streamDecoder); ok && seenOK && seenCo && env.Result && env.Code == 0 {
				// The data decoded as the reply arrives, then
				// the envelope's end read on: a decoder at the
				// same place, inside the envelope after a value.
				rest, err := sd.decodeStream(io.MultiReader(dec.Buffered(), hr))
				if err != nil {
					return fmt.Errorf("decode data: %w", err)
				}
				dec = json.NewDecoder(io.MultiReader(strings.NewReader(`{"data":0`), rest))
				for range 3 {
					if _, err := dec.Token(); err != nil {
						return notEnvelope()
					}
				}
				decoded = true
				continue
			}
			if out != nil && seenOK && seenCo && env.Result && env.Code == 0 {
				// A success: its data goes into out as it is read.
				if err = decodeData(dec, out); err != nil {
					return fmt.Errorf("decode data: %w", err)
				}
				decoded = true
				continue
			}
			err = dec.Decode(&env.Data) // an error's (small), or in an unusual order
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return notEnvelope()
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return notEnvelope()
	}
	if _, err := dec.Token(); err != io.EOF { // nothing after the envelope
		return notEnvelope()
	}
	if env.Result && env.Code == 0 {
		if sd, ok := out.(streamDecoder); ok && !decoded && len(env.Data) > 0 {
			if _, err := sd.decodeStream(bytes.NewReader(env.Data)); err != nil {
				return fmt.Errorf("decode data: %w", err)
			}
			return nil
		}
		if out != nil && !decoded && len(env.Data) > 0 {
			sub := json.NewDecoder(bytes.NewReader(env.Data))
			if err := decodeData(sub, out); err != nil {
				return fmt.Errorf("decode data: %w", err)
			}
		}
		return nil
	}
	var ed errData
	if len(env.Data) > 0 && env.Data[0] == '{' {
		_ = json.Unmarshal(env.Data, &ed)
	}
	if ed.Kind == "validation" && len(ed.Errors) > 0 {
		return model.ValidationError(ed.Errors)
	}
	return &APIError{Status: resp.StatusCode, Code: env.Code, Message: env.Message, RequestID: env.RequestID, Kind: ed.Kind}
}

// decodeData decodes the value at dec into out: element-wise when out
// says how, else whole.
func decodeData(dec *json.Decoder, out any) error {
	if d, ok := out.(dataDecoder); ok {
		return d.decodeData(dec)
	}
	return dec.Decode(out)
}

// listOf decodes a JSON array into *p one element at a time (null leaves
// *p nil, as encoding/json does); each element, once decoded, is passed
// to keep when set.
type listOf[T any] struct {
	p    *[]T
	keep func(*T)
}

func (l listOf[T]) decodeData(dec *json.Decoder) error {
	s := (*l.p)[:0]
	null, err := elements(dec, func() error {
		var zero T
		s = append(s, zero)
		if err := dec.Decode(&s[len(s)-1]); err != nil {
			return err
		}
		if l.keep != nil {
			l.keep(&s[len(s)-1])
		}
		return nil
	})
	switch {
	case err != nil:
		return err
	case null:
		*l.p = nil
	case s == nil:
		*l.p = []T{}
	default:
		*l.p = s
	}
	return nil
}

// elements reads the JSON array at dec, calling each with dec at each
// element in turn (each decodes it); null: none, and null true.
func elements(dec *json.Decoder, each func() error) (null bool, err error) {
	tok, err := dec.Token()
	if err != nil {
		return false, err
	}
	if tok == nil {
		return true, nil
	}
	if tok != json.Delim('[') {
		return false, fmt.Errorf("want an array, got %v", tok)
	}
	for i := 0; dec.More(); i++ {
		if err := each(); err != nil {
			return false, fmt.Errorf("element %d: %w", i, err)
		}
	}
	_, err = dec.Token() // ]
	return false, err
}

// taskViewOf decodes a backend.TaskView, its results element-wise into
// a slice made for the task's targets (its task comes first).
// With skipResults, results are read past without being kept.
type taskViewOf struct {
	v           *backend.TaskView
	skipResults bool
	each        func(*model.Result) // when set, given each result instead
}

func (t taskViewOf) decodeData(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil || tok == nil {
		return err
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("want an object, got %v", tok)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case "task":
			err = dec.Decode(&t.v.Task)
		case "results":
			if t.skipResults {
				err = skipValue(dec)
				break
			}
			if t.each != nil {
				err = eachOf(dec, t.each)
				break
			}
			if n := t.v.Task.Targets; n > 0 && t.v.Results == nil {
				t.v.Results = make([]model.Result, 0, min(n, 1<<20))
			}
			err = listOf[model.Result]{p: &t.v.Results}.decodeData(dec)
		case "roll":
			err = dec.Decode(&t.v.Roll)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return fmt.Errorf("%v: %w", tok, err)
		}
	}
	_, err = dec.Token() // }
	return err
}

// eachOf decodes the array at dec one element at a time into one
// model.Result, passed to fn after each (null: none). Each is decoded by
// a model.ResultDecoder, as a task's stream decodes it: a console
// opening the watch of a task over 100,000 hosts reads ~218,000 results,
// and encoding/json's reflection was ~1.2 s of its CPU.
func eachOf(dec *json.Decoder, fn func(*model.Result)) error {
	var raw json.RawMessage
	var rd model.ResultDecoder
	_, err := elements(dec, func() error {
		raw = raw[:0]
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		r, err := rd.Decode(raw)
		if err != nil {
			return err
		}
		fn(&r)
		return nil
	})
	return err
}

// hostsOf decodes a host listing element-wise, holding each distinct
// host label set, process label set and agent version once: a listing of
// 100,000 hosts came with a label map per host and per process, most of
// them equal (the console keeps the listing). The maps of one listing
// are shared between its hosts: not to be changed.
// With each set, every host is decoded into one view passed to it
// instead of into *p, its host label map too: one map, emptied before
// each host (backend.HostsReader: fn copies what it keeps of it). A
// listing of 100,000 hosts has ~86,000 distinct host label sets: held
// once each, they were still a map a host (~37 MB with their strings in
// the console), which makes them compact instead.
type hostsOf struct {
	p    *[]backend.HostView
	each func(*backend.HostView)
	sets labelSets
}

func (h *hostsOf) keep(v *backend.HostView) {
	v.Labels = h.sets.keep(v.Labels)
	v.Version = h.sets.str(v.Version)
	for i := range v.Procs {
		v.Procs[i].Labels = h.sets.keep(v.Procs[i].Labels)
	}
}

func (h *hostsOf) decodeData(dec *json.Decoder) error {
	if h.each == nil {
		return listOf[backend.HostView]{p: h.p, keep: h.keep}.decodeData(dec)
	}
	var v backend.HostView
	labels := map[string]string{}
	_, err := elements(dec, func() error {
		clear(labels)
		v = backend.HostView{HostInfo: model.HostInfo{Labels: labels}}
		if err := dec.Decode(&v); err != nil {
			return err
		}
		v.Version = h.sets.str(v.Version)
		for i := range v.Procs {
			v.Procs[i].Labels = h.sets.keep(v.Procs[i].Labels)
		}
		h.each(&v)
		return nil
	})
	return err
}

// hostListOf decodes a host listing in the list form
// (wire.ReadHostListFrom) as the reply arrives, each host made a
// backend.HostView passed to each as soon as it is read: one view, its
// label map and its processes reused from host to host, the tables'
// strings and process label maps shared. The reply is never held whole
// (~160 bytes a host, a window of 64 KiB is), and its hosts are parsed
// while the rest of it is on the way. A listing in the full form (an
// array: a server before the list form) is read as hostsOf reads it.
//
// With indexed set instead of each, each host's labels are handed over as
// the list form carries them (HostListIndexed): indexes into the
// listing's table of pairs, no map made.
type hostListOf struct {
	each    func(*backend.HostView)
	indexed func(pairs [][2]string, ids []uint32, v *backend.HostView)
}

func (h *hostListOf) decodeStream(r io.Reader) (io.Reader, error) {
	// The first byte of the data (past the colon after its key, which
	// the envelope's decoder may have left) says its form.
	br := bufio.NewReaderSize(r, 512) // reads of a window's size go around it
	for colon := false; ; {
		c, err := br.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("want the data: %w", err)
		}
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			continue
		case c == ':' && !colon:
			colon = true
			continue
		}
		_ = br.UnreadByte()
		if c == '[' || c == 'n' {
			each := h.each
			if h.indexed != nil {
				each = func(v *backend.HostView) { h.indexed(nil, nil, v) }
			}
			dec := json.NewDecoder(br)
			if err := (&hostsOf{each: each}).decodeData(dec); err != nil {
				return nil, err
			}
			return io.MultiReader(dec.Buffered(), br), nil
		}
		break
	}
	var (
		v      backend.HostView
		labels map[string]string
		pairs  [][2]string // the listing's label table, for indexed
		procs  []backend.ProcView
	)
	if h.indexed == nil {
		labels = map[string]string{}
	}
	rest, err := wire.ReadHostListFrom(br, func(hl *wire.HostList, lh *wire.ListHost) {
		if h.indexed == nil {
			clear(labels)
			for _, id := range lh.Labels {
				p := hl.Labels[id]
				labels[p.Key] = p.Value
			}
		} else if pairs == nil && len(hl.Labels) > 0 { // read before the first host, fixed after
			pairs = make([][2]string, len(hl.Labels))
			for i, p := range hl.Labels {
				pairs[i] = [2]string{p.Key, p.Value}
			}
		}
		procs = procs[:0]
		for _, p := range lh.Procs {
			d := &hl.Procs[p.Proc]
			procs = append(procs, backend.ProcView{Key: d.Key, Labels: d.Labels,
				Status: model.ProcStatus{ProcKey: d.Key, State: p.State, PID: p.PID, Hosted: p.Hosted}})
		}
		v = backend.HostView{HostInfo: model.HostInfo{Host: lh.Host, Labels: labels, State: lh.State,
			LastSeen: lh.LastSeen, Version: lh.Version, AgentID: lh.AgentID}, Procs: procs}
		if len(procs) == 0 {
			v.Procs = nil
		}
		if h.indexed != nil {
			h.indexed(pairs, lh.Labels, &v)
			return
		}
		h.each(&v)
	})
	if err != nil {
		return nil, err
	}
	return io.MultiReader(bytes.NewReader(rest), br), nil
}

// labelSets holds label sets and strings once each.
type labelSets struct {
	seed maphash.Seed
	sets map[uint64][]map[string]string // by setHash
	strs map[string]string
}

// keep returns the set held equal to m, or holds m.
func (l *labelSets) keep(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	if l.sets == nil {
		l.seed, l.sets = maphash.MakeSeed(), map[uint64][]map[string]string{}
	}
	var h uint64
	for k, v := range m { // order-free: a sum of the pairs' hashes
		h += maphash.String(l.seed, k)*31 + maphash.String(l.seed, v)
	}
	for _, s := range l.sets[h] {
		if maps.Equal(s, m) {
			return s
		}
	}
	l.sets[h] = append(l.sets[h], m)
	return m
}

// str returns s held once.
func (l *labelSets) str(s string) string {
	if s == "" {
		return s
	}
	if l.strs == nil {
		l.strs = map[string]string{}
	}
	if kept, ok := l.strs[s]; ok {
		return kept
	}
	l.strs[s] = s
	return s
}

// skipValue reads past the value at dec token by token, holding none of
// it whole.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}
