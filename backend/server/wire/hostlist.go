package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gseproc/model"
)

// The list form of a host listing (GET/POST /api/v1/hosts?form=list) is
// what a host list shows of each host, each repeated part sent once: the
// host label pairs and the (process key, process labels) pairs in tables,
// each host an array naming them by index:
//
//	{"labels": [["os","rocky-9.3"], ...],
//	 "procs": [{"proc": "web:nginx", "labels": {"app": "nginx"}}, ...],
//	 "hosts": [["0:10.0.0.7", "online", "2.1.6", "027f...", 1795505560,
//	            [0, 4], [[1, "running", 1234, true], ...]], ...]}
//
// A host is [cloud:ip (as Hosts writes it), agent state, agent version,
// agent id, last seen (unix seconds), its label pairs' indexes, its
// processes], a process [its procs index, state, pid, hosted]. The full
// form sent every host's label map and every process's whole status:
// 82 MB for 98,754 hosts, 3.4 s to encode on the server and 1.4 s to
// decode in the console; the list form of the same hosts is 15 MB,
// written and read by hand (HostListWriter, ReadHostList): 100,000 hosts
// of this package's tests' sample (~2 processes a host) in 0.1-0.2 s
// each way (load 9, 2 cores).

// LabelPair is one label.
type LabelPair struct{ Key, Value string }

// ListProcDef is one entry of a listing's procs table.
type ListProcDef struct {
	Key    string
	Labels map[string]string
}

// ListHost is one host of a listing in the list form.
type ListHost struct {
	Host     model.Host
	State    model.AgentState
	Version  string
	AgentID  string
	LastSeen int64
	Labels   []uint32 // indexes into the labels table
	Procs    []ListProc
}

// ListProc is one process of a ListHost.
type ListProc struct {
	Proc   uint32 // index into the procs table
	State  model.ProcState
	PID    int
	Hosted bool
}

// HostListWriter writes a listing in the list form: Host and Proc add
// the hosts in order, AppendTo writes the whole.
type HostListWriter struct {
	pairIx map[LabelPair]uint32
	pairs  []LabelPair
	procIx map[string][]uint32 // by key: its entries (one per distinct label set)
	procs  []ListProcDef
	hosts  []byte // the hosts array's elements so far (after those in full)
	// full are the hosts array's earlier parts, each about hostChunk
	// bytes: 100,000 hosts (~20 MB) grown in one slice were copied
	// again at every growth, ~90 MB allocated a listing.
	full  [][]byte
	n     int  // hosts so far
	open  bool // a host's procs array is open
	nproc int  // procs of the open host
	// ids and labels are the last host's label pairs (by key) and their
	// indexes in pairs, prevIDs and prev the host's before: hosts listed
	// in turn share many pairs, found there without hashing them.
	ids, prevIDs []uint32
	labels, prev []LabelPair
	// last is the set HostLabels wrote last, whose indexes ids are.
	last model.LabelSet
	// out, once Stream is called, is where the listing goes as it is
	// written; err is why it stopped (a write failed, or a host named
	// what the tables written lack).
	out func([]byte) error
	err error
}

// Host adds a host (its processes follow, by Proc).
func (w *HostListWriter) Host(hi *model.HostInfo) {
	b := w.hostHead(hi)
	// The pairs in key order (and new ones numbered in it): one
	// listing's bytes do not depend on the maps' iteration order.
	w.prev, w.labels = w.labels, w.prev[:0]
	for k, v := range hi.Labels {
		w.labels = append(w.labels, LabelPair{k, v})
	}
	slices.SortFunc(w.labels, func(a, b LabelPair) int { return strings.Compare(a.Key, b.Key) })
	b = appendIDs(b, w.pairIDs())
	w.last = nil // w.ids are this host's
	w.hostTail(b)
}

// HostLabels is Host with hi's labels given as a set (hi.Labels is not
// read): in key order already, and, when it is the set of the host before
// (the same memory: model.LabelSet.Same), its indexes are that host's.
// The dispatcher shares one set among the hosts of the same labels; a map
// made for each host (Host) and taken apart again here were ~200,000
// allocations and a quarter of a 100,000-host listing's CPU
// (BenchmarkHostList100k). The listing is byte for byte the one Host
// writes for the same labels.
//
// (The simulator's 100,000 hosts carry ~62,000 distinct sets: a table of
// each set's indexes, looked up by the set's address, missed the
// processor's caches at nearly every host and cost more than looking its
// pairs up in the table of ~850 pairs, which stays in them.)
func (w *HostListWriter) HostLabels(hi *model.HostInfo, labels model.LabelSet) {
	b := w.hostHead(hi)
	if len(labels) >= 2 {
		if !labels.Same(w.last) {
			w.setLabels(labels)
		}
		b = appendIDs(b, w.ids)
	}
	w.hostTail(b)
}

// setLabels looks labels' pairs up in the table (new ones added): their
// indexes in w.ids, labels the set last looked up.
func (w *HostListWriter) setLabels(labels model.LabelSet) {
	w.prev, w.labels = w.labels, w.prev[:0]
	for i := range labels.Len() {
		k, v := labels.Pair(i)
		w.labels = append(w.labels, LabelPair{k, v})
	}
	w.pairIDs()
	w.last = labels
}

// AddProc adds (key, labels) to the procs table, as Proc of such a
// process would: a table made before the hosts (Stream).
func (w *HostListWriter) AddProc(key string, labels map[string]string) {
	w.init()
	w.procID(key, labels)
}

// AddLabels adds labels' pairs to the labels table, as HostLabels of a
// host with them would: a table made before the hosts (Stream). The
// sets of hosts in turn may repeat one set: looked up once.
func (w *HostListWriter) AddLabels(labels model.LabelSet) {
	w.init()
	if len(labels) >= 2 && !labels.Same(w.last) {
		w.setLabels(labels)
	}
}

// Stream writes the listing's head (its tables as made so far, by
// AddProc and AddLabels) to out, and then its hosts as they are added,
// about writeChunk bytes at a time, each host whole; Finish writes the
// rest. The reply's first byte no longer waits for the listing's last
// host, and the reader (ReadHostListFrom) reads hosts while the others
// are being written. Every process and label pair of the hosts added
// afterwards must be in those tables: one that is not stops the listing
// there (Finish's error), cut. Parts and AppendTo are not for a
// streamed listing. out's slice is the writer's (reused after out
// returns).
func (w *HostListWriter) Stream(out func([]byte) error) error {
	w.init()
	if w.n > 0 || w.out != nil {
		return fmt.Errorf("host list: streamed after %d hosts", w.n)
	}
	w.out = out
	w.hosts = make([]byte, 0, writeChunk+writeChunk/4)
	w.write(w.appendHead(nil))
	return w.err
}

// Finish writes what a streamed listing (Stream) has not written yet and
// its end. An error (out's, or a host that named what the tables lack)
// means the listing was cut: what was written is no whole listing.
func (w *HostListWriter) Finish() error {
	if w.out == nil {
		return fmt.Errorf("host list: not streamed")
	}
	w.end()
	w.write(w.hosts)
	w.write([]byte("]}"))
	return w.err
}

// write writes b to out unless writing has stopped.
func (w *HostListWriter) write(b []byte) {
	if w.err == nil {
		w.err = w.out(b)
	}
}

// missing stops a streamed listing: a host named a process or label
// pair its tables (written already) lack.
func (w *HostListWriter) missing(what string) {
	if w.err == nil {
		w.err = fmt.Errorf("host list: %s not in the tables streamed before the hosts", what)
	}
}

// writeChunk is about how many bytes of hosts a streamed listing
// (Stream) writes at a time: the reader starts on the first hosts while
// the server writes the next.
const writeChunk = 64 << 10

// init makes the tables' indexes.
func (w *HostListWriter) init() {
	if w.pairIx == nil {
		w.pairIx, w.procIx = map[LabelPair]uint32{}, map[string][]uint32{}
	}
}

// pairIDs is the indexes of w.labels's pairs in the pairs table (new ones
// added), in w.ids; w.prev is the pairs looked up before.
func (w *HostListWriter) pairIDs() []uint32 {
	w.prevIDs, w.ids = w.ids, w.prevIDs[:0]
	for i, p := range w.labels {
		if i < len(w.prev) && w.prev[i] == p { // as the host before
			w.ids = append(w.ids, w.prevIDs[i])
			continue
		}
		id, ok := w.pairIx[p]
		if !ok {
			if w.out != nil {
				w.missing(fmt.Sprintf("label %s=%s", p.Key, p.Value))
			}
			id = uint32(len(w.pairs))
			w.pairIx[p] = id
			w.pairs = append(w.pairs, p)
		}
		w.ids = append(w.ids, id)
	}
	return w.ids
}

// appendIDs appends ids separated by commas.
func appendIDs(b []byte, ids []uint32) []byte {
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(id), 10)
	}
	return b
}

// hostHead starts a host: everything up to its label indexes.
func (w *HostListWriter) hostHead(hi *model.HostInfo) []byte {
	w.end()
	w.init()
	switch {
	case w.out != nil: // streamed: the hosts so far written out, whole
		if len(w.hosts) >= writeChunk {
			w.write(w.hosts)
			w.hosts = w.hosts[:0]
		}
	case len(w.hosts) >= hostChunk: // a host's text stays in one part
		w.full = append(w.full, w.hosts)
		w.hosts = make([]byte, 0, hostChunk+hostChunk/8)
	}
	b := w.hosts
	if w.n > 0 {
		b = append(b, ',')
	}
	w.n++
	b = append(b, '[')
	b = appendHostText(b, hi.Host)
	b = append(b, ',')
	b = model.AppendJSONString(b, string(hi.State))
	b = append(b, ',')
	b = model.AppendJSONString(b, hi.Version)
	b = append(b, ',')
	b = model.AppendJSONString(b, hi.AgentID)
	b = append(b, ',')
	b = strconv.AppendInt(b, hi.LastSeen, 10)
	return append(b, ",["...)
}

// hostTail ends a host's label indexes (b is the host so far) and opens
// its processes.
func (w *HostListWriter) hostTail(b []byte) {
	b = append(b, "],["...)
	w.hosts, w.open, w.nproc = b, true, 0
}

// Proc adds a process of the last host added. A pid that is no process
// id (validPID: an agent's status is untrusted, and the server keeps its
// pid as reported) is written -1, none: ReadHostList refuses the whole
// listing for it.
func (w *HostListWriter) Proc(key string, labels map[string]string, state model.ProcState, pid int, hosted bool) {
	if !validPID(int64(pid)) {
		pid = -1
	}
	id := w.procID(key, labels)
	b := w.hosts
	if w.nproc > 0 {
		b = append(b, ',')
	}
	w.nproc++
	b = append(b, '[')
	b = strconv.AppendUint(b, uint64(id), 10)
	b = append(b, ',')
	b = model.AppendJSONString(b, string(state))
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(pid), 10)
	b = append(b, ',')
	b = strconv.AppendBool(b, hosted)
	w.hosts = append(b, ']')
}

// procID is the procs entry of (key, labels), added when new.
func (w *HostListWriter) procID(key string, labels map[string]string) uint32 {
	for _, id := range w.procIx[key] {
		if l := w.procs[id].Labels; sameMap(l, labels) || maps.Equal(l, labels) {
			return id
		}
	}
	if w.out != nil {
		w.missing("process " + key)
	}
	id := uint32(len(w.procs))
	w.procs = append(w.procs, ListProcDef{Key: key, Labels: labels})
	w.procIx[key] = append(w.procIx[key], id)
	return id
}

// sameMap reports whether a and b are one map (an engine's listing
// shares its definitions' label maps).
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// end closes the open host.
func (w *HostListWriter) end() {
	if w.open {
		w.hosts = append(w.hosts, "]]"...)
		w.open = false
	}
}

// AppendTo appends the listing written so far to b.
func (w *HostListWriter) AppendTo(b []byte) []byte {
	parts := w.Parts()
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	b = slices.Grow(b, n)
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// Parts is the listing written so far in parts, to be written in turn:
// their concatenation is what AppendTo appends. A server writes them as
// they are (a 100,000-host listing is ~20 MB: AppendTo copied it whole
// into one more buffer before the reply was written). They share the
// writer's memory: valid until its next Host or Proc.
func (w *HostListWriter) Parts() [][]byte {
	w.end()
	parts := make([][]byte, 0, len(w.full)+3)
	parts = append(parts, w.appendHead(nil))
	parts = append(parts, w.full...)
	return append(parts, w.hosts, []byte("]}"))
}

// appendHead appends the listing up to its hosts: the labels and procs
// tables and the opening of the hosts array.
func (w *HostListWriter) appendHead(b []byte) []byte {
	b = append(b, `{"labels":[`...)
	for i, p := range w.pairs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = model.AppendJSONString(b, p.Key)
		b = append(b, ',')
		b = model.AppendJSONString(b, p.Value)
		b = append(b, ']')
	}
	b = append(b, `],"procs":[`...)
	for i, p := range w.procs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"proc":`...)
		b = model.AppendJSONString(b, p.Key)
		if len(p.Labels) > 0 {
			b = append(b, `,"labels":{`...)
			for j, k := range slices.Sorted(maps.Keys(p.Labels)) {
				if j > 0 {
					b = append(b, ',')
				}
				b = model.AppendJSONString(b, k)
				b = append(b, ':')
				b = model.AppendJSONString(b, p.Labels[k])
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, `],"hosts":[`...)
}

// hostChunk is about how many bytes of hosts a part of
// HostListWriter.full holds.
const hostChunk = 1 << 20

// appendHostText appends h as Hosts and the list form write it, the
// JSON string "cloud:ip".
func appendHostText(b []byte, h model.Host) []byte {
	if !plainText(h.IP) {
		// Not an address's characters (a host not yet validated):
		// written as a JSON string would be.
		return model.AppendJSONString(b, strconv.Itoa(h.CloudID)+":"+h.IP)
	}
	b = append(b, '"')
	b = strconv.AppendInt(b, int64(h.CloudID), 10)
	b = append(b, ':')
	b = append(b, h.IP...)
	return append(b, '"')
}

// HostList is a listing in the list form being read (ReadHostList): its
// tables, which the hosts handed over name by index.
type HostList struct {
	Labels []LabelPair
	Procs  []ListProcDef
}

// ReadHostList reads the listing in the list form data starts with,
// passing each host to fn in order with the listing's tables (filled
// before the first host), and returns the listing's length in data (what
// follows it is not read: a reply's envelope goes on after its data).
// The host and its slices are reused after fn returns; the tables'
// strings and maps are not changed afterwards. Every host is parsed at
// the entrance: its text by ParseHostText, every index checked against
// its table; a wrong value is an error naming where it is
// (hosts[3][6][0][0]: the procs index of host 3's first process).
func ReadHostList(data []byte, fn func(*HostList, *ListHost)) (int, error) {
	var (
		hl HostList
		r  = hostReader{l: lexer{b: data}, hl: &hl}
		l  = &r.l
		p  listParts
	)
	err := l.object(func(key string) error {
		if p.twice(key) {
			return l.errorf("%s given twice", key)
		}
		if p.hostsNow(key) {
			return r.read(fn)
		}
		start := l.i
		if err := l.skip(); err != nil {
			return err
		}
		return p.take(&hl, key, data[start:l.i], int64(start))
	})
	n := l.i
	if err == nil {
		err = p.end(&r, fn)
	}
	if err != nil {
		return 0, fmt.Errorf("host list: %w", err)
	}
	return n, nil
}

// listParts is what a reader of the list form (ReadHostList,
// ReadHostListFrom) has seen of a listing's members.
type listParts struct {
	seenL, seenP, seenH bool
	hosts               []byte // the hosts, when they came before a table
	hostsAt             int64  // their offset in the listing
}

// twice says whether key is a member already read: read twice, a table
// would change under the hosts read with it, and hosts be handed over
// twice.
func (p *listParts) twice(key string) bool {
	return key == "labels" && p.seenL || key == "procs" && p.seenP || key == "hosts" && p.seenH
}

// hostsNow says whether key is the hosts coming after the tables, as the
// server writes them: read as they come (and now seen).
func (p *listParts) hostsNow(key string) bool {
	if key == "hosts" && p.seenL && p.seenP {
		p.seenH = true
		return true
	}
	return false
}

// take reads member key, whose value is raw (at its offset in the
// listing): a table into hl, the hosts held (raw is kept: the caller's
// to copy if it changes) until the tables are read. Other members are
// read past.
func (p *listParts) take(hl *HostList, key string, raw []byte, at int64) (err error) {
	switch key {
	case "labels":
		p.seenL = true
		hl.Labels, err = readLabels(raw)
	case "procs":
		p.seenP = true
		hl.Procs, err = readProcs(raw)
	case "hosts":
		p.hosts, p.hostsAt, p.seenH = raw, at, true
	}
	return err
}

// end is the listing's end: every member read, and hosts that came
// before a table read now.
func (p *listParts) end(r *hostReader, fn func(*HostList, *ListHost)) error {
	if !(p.seenL && p.seenP && p.seenH) {
		return fmt.Errorf("want labels, procs and hosts")
	}
	if p.hosts == nil {
		return nil
	}
	r.l = lexer{b: p.hosts, base: p.hostsAt} // offsets in the listing
	if err := r.read(fn); err != nil {
		return err
	}
	return r.l.end()
}

// readLabels reads the labels table.
func readLabels(raw []byte) ([]LabelPair, error) {
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	out := make([]LabelPair, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("labels[%d]: %d strings, want 2 (key, value)", i, len(p))
		}
		out[i] = LabelPair{p[0], p[1]}
	}
	return out, nil
}

// readProcs reads the procs table.
func readProcs(raw []byte) ([]ListProcDef, error) {
	var defs []struct {
		Proc   string            `json:"proc"`
		Labels map[string]string `json:"labels"`
	}
	if err := json.Unmarshal(raw, &defs); err != nil {
		return nil, fmt.Errorf("procs: %w", err)
	}
	out := make([]ListProcDef, len(defs))
	for i, d := range defs {
		if d.Proc == "" {
			return nil, fmt.Errorf("procs[%d].proc: empty", i)
		}
		out[i] = ListProcDef{Key: d.Proc, Labels: d.Labels}
	}
	return out, nil
}

// hostReader reads the hosts array of a listing.
type hostReader struct {
	l    lexer
	hl   *HostList
	h    ListHost
	strs map[string]string // versions and states, held once
}

func (r *hostReader) read(fn func(*HostList, *ListHost)) error {
	i := 0
	err := r.l.array(func() error {
		if err := r.host(); err != nil {
			return fmt.Errorf("hosts[%d]%w", i, err)
		}
		fn(r.hl, &r.h)
		i++
		return nil
	})
	if err != nil && i == 0 && !strings.HasPrefix(err.Error(), "hosts[") {
		err = fmt.Errorf("hosts: %w", err)
	}
	return err
}

// host reads one host into r.h.
func (r *hostReader) host() error {
	if r.hostFast() {
		return nil
	}
	return r.hostAny()
}

// hostAny reads one host into r.h, however it is written.
func (r *hostReader) hostAny() error {
	l := &r.l
	h := &r.h
	h.Labels, h.Procs = h.Labels[:0], h.Procs[:0]
	field := 0
	err := l.array(func() error {
		var err error
		switch field {
		case 0:
			var s string
			if s, err = l.str(); err == nil {
				h.Host, err = ParseHostText(s)
			}
		case 1:
			var s []byte
			s, err = l.strBytes()
			h.State = model.AgentState(r.held(s))
		case 2:
			var s []byte
			s, err = l.strBytes()
			h.Version = r.held(s)
		case 3:
			h.AgentID, err = l.str()
		case 4:
			h.LastSeen, err = l.int()
		case 5:
			err = l.array(func() error {
				id, err := r.index(len(r.hl.Labels))
				h.Labels = append(h.Labels, id)
				return err
			})
		case 6:
			j := 0
			err = l.array(func() error {
				h.Procs = append(h.Procs, ListProc{})
				if err := r.proc(&h.Procs[len(h.Procs)-1]); err != nil {
					return fmt.Errorf("[%d]%w", j, err)
				}
				j++
				return nil
			})
		default:
			return fmt.Errorf("[%d]: more than 7 fields", field)
		}
		if err != nil && (len(err.Error()) == 0 || err.Error()[0] != '[') {
			err = fmt.Errorf("[%d]: %w", field, err)
		} else if err != nil {
			err = fmt.Errorf("[%d]%w", field, err)
		}
		field++
		return err
	})
	if err == nil && field != 7 {
		err = fmt.Errorf(": %d fields, want 7", field)
	}
	return err
}

// hostFast reads one host into r.h as host does, when it is written as
// the server writes it: no blanks, strings without escapes or bytes
// outside ASCII, each field of the kind and value host takes. It reports
// false for anything else (a listing from elsewhere, a host cut by a
// window's end), having moved nothing: host reads it then, as before,
// with its errors. The generic reader's closures and checks were ~60% of
// a console's parse of 100,000 hosts.
func (r *hostReader) hostFast() bool {
	b, i := r.l.b, r.l.i
	h := &r.h
	h.Labels, h.Procs = h.Labels[:0], h.Procs[:0]
	if i >= len(b) || b[i] != '[' {
		return false
	}
	var text, state, version, agent []byte
	var ok bool
	if text, i, ok = plainString(b, i+1, ','); !ok {
		return false
	}
	if state, i, ok = plainString(b, i, ','); !ok {
		return false
	}
	if version, i, ok = plainString(b, i, ','); !ok {
		return false
	}
	if agent, i, ok = plainString(b, i, ','); !ok {
		return false
	}
	var seen int64
	if seen, i, ok = plainInt(b, i, ','); !ok {
		return false
	}
	// The label indexes: [] or [n,n,...].
	if i >= len(b) || b[i] != '[' {
		return false
	}
	i++
	if i < len(b) && b[i] == ']' {
		i++
	} else {
		for {
			var id int64
			var end byte
			if id, i, end, ok = plainIntEnd(b, i); !ok || id < 0 || id >= int64(len(r.hl.Labels)) {
				return false
			}
			h.Labels = append(h.Labels, uint32(id))
			if end == ']' {
				break
			}
		}
	}
	if i+1 >= len(b) || b[i] != ',' || b[i+1] != '[' {
		return false
	}
	i += 2
	// The processes: [] or [[proc,"state",pid,hosted],...].
	if i < len(b) && b[i] == ']' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '[' {
				return false
			}
			var p ListProc
			var id, pid int64
			var st []byte
			if id, i, ok = plainInt(b, i+1, ','); !ok || id < 0 || id >= int64(len(r.hl.Procs)) {
				return false
			}
			if st, i, ok = plainString(b, i, ','); !ok {
				return false
			}
			if pid, i, ok = plainInt(b, i, ','); !ok || !validPID(pid) {
				return false
			}
			switch {
			case bytes.HasPrefix(b[i:], []byte("true]")):
				p.Hosted, i = true, i+5
			case bytes.HasPrefix(b[i:], []byte("false]")):
				i += 6
			default:
				return false
			}
			p.Proc, p.State, p.PID = uint32(id), model.ProcState(r.held(st)), int(pid)
			h.Procs = append(h.Procs, p)
			if i >= len(b) {
				return false
			}
			i++
			if b[i-1] == ']' {
				break
			}
			if b[i-1] != ',' {
				return false
			}
		}
	}
	if i >= len(b) || b[i] != ']' {
		return false
	}
	host, ok := hostTextV4(text)
	if !ok {
		var err error
		if host, err = ParseHostText(string(text)); err != nil {
			return false
		}
	}
	h.Host, h.State, h.Version, h.AgentID, h.LastSeen = host, model.AgentState(r.held(state)), r.held(version), string(agent), seen
	r.l.i = i + 1
	return true
}

// plainString reads a string at b[i:] with nothing to decode in it (no
// escape, no control character, no byte outside ASCII) and the byte end
// after it: its text, and where what follows end starts.
func plainString(b []byte, i int, end byte) (text []byte, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			if j+1 >= len(b) || b[j+1] != end {
				return nil, i, false
			}
			return b[i+1 : j], j + 2, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, i, false
		}
	}
	return nil, i, false
}

// hostTextV4 is ParseHostText of text when it is "cloud:ip" with an IPv4
// address in canonical form (what ParseHostText takes as it is), read
// without netip: ok false for any other text, ParseHostText's to read.
func hostTextV4(text []byte) (model.Host, bool) {
	colon := bytes.IndexByte(text, ':')
	if colon <= 0 || colon > 10 || len(text) > model.MaxAgentIDText || colon > 1 && text[0] == '0' {
		return model.Host{}, false
	}
	cloud := 0
	for _, c := range text[:colon] {
		if c < '0' || c > '9' {
			return model.Host{}, false
		}
		cloud = cloud*10 + int(c-'0')
	}
	if cloud > model.MaxCloudID {
		return model.Host{}, false
	}
	ip := text[colon+1:]
	dots, val, digits := 0, 0, 0
	for i, c := range ip {
		switch {
		case '0' <= c && c <= '9':
			if digits > 0 && ip[i-digits] == '0' { // a leading zero
				return model.Host{}, false
			}
			val, digits = val*10+int(c-'0'), digits+1
			if val > 255 {
				return model.Host{}, false
			}
		case c == '.' && digits > 0:
			dots, val, digits = dots+1, 0, 0
		default:
			return model.Host{}, false
		}
	}
	if dots != 3 || digits == 0 {
		return model.Host{}, false
	}
	return model.Host{IP: string(ip), CloudID: cloud}, true
}

// plainInt reads an integer at b[i:] (as lexer.int takes it) and the
// byte end after it.
func plainInt(b []byte, i int, end byte) (n int64, next int, ok bool) {
	n, next, got, ok := plainIntEnd(b, i)
	return n, next, ok && got == end
}

// plainIntEnd reads an integer at b[i:] (as lexer.int takes it) and the
// , or ] after it (end).
func plainIntEnd(b []byte, i int) (n int64, next int, end byte, ok bool) {
	// parseInt's rules, in the one pass that finds the number's end.
	j := i
	neg := j < len(b) && b[j] == '-'
	if neg {
		j++
	}
	start := j
	var u uint64
	for ; j < len(b) && '0' <= b[j] && b[j] <= '9'; j++ {
		if u > (math.MaxUint64-9)/10 {
			return 0, i, 0, false
		}
		u = u*10 + uint64(b[j]-'0')
	}
	switch {
	case j == start, j-start > 1 && b[start] == '0':
		return 0, i, 0, false
	case j >= len(b) || b[j] != ',' && b[j] != ']':
		return 0, i, 0, false
	case !neg && u <= math.MaxInt64:
		n = int64(u)
	case neg && u <= 1<<63:
		n = -int64(u) // -1<<63 too: int64(1<<63) wraps to itself
	default:
		return 0, i, 0, false
	}
	return n, j + 1, b[j], true
}

// proc reads one process of a host into p.
func (r *hostReader) proc(p *ListProc) error {
	l := &r.l
	field := 0
	err := l.array(func() error {
		var err error
		switch field {
		case 0:
			p.Proc, err = r.index(len(r.hl.Procs))
		case 1:
			var s []byte
			s, err = l.strBytes()
			p.State = model.ProcState(r.held(s))
		case 2:
			var n int64
			n, err = l.int()
			if err == nil && !validPID(n) {
				err = fmt.Errorf("pid %d out of range", n)
			}
			p.PID = int(n)
		case 3:
			p.Hosted, err = l.bool()
		default:
			return fmt.Errorf("[%d]: more than 4 fields", field)
		}
		if err != nil {
			err = fmt.Errorf("[%d]: %w", field, err)
		}
		field++
		return err
	})
	if err == nil && field != 4 {
		err = fmt.Errorf(": %d fields, want 4", field)
	}
	return err
}

// validPID reports whether n is a pid the list form carries: a process
// id of 32 bits, or -1 for none.
func validPID(n int64) bool { return n >= -1 && n <= math.MaxInt32 }

// index reads an index into a table of n entries.
func (r *hostReader) index(n int) (uint32, error) {
	v, err := r.l.int()
	if err != nil {
		return 0, err
	}
	if v < 0 || v >= int64(n) {
		return 0, fmt.Errorf("index %d outside the table of %d", v, n)
	}
	return uint32(v), nil
}

// held is b as a string held once (a listing repeats a few versions and
// states): looked up without making a string of it, made one when new.
func (r *hostReader) held(b []byte) string {
	if r.strs == nil {
		r.strs = map[string]string{}
	}
	if k, ok := r.strs[string(b)]; ok {
		return k
	}
	s := string(b)
	if len(r.strs) < 1024 {
		r.strs[s] = s
	}
	return s
}

// lexer reads JSON values from b by hand, for the list form's hosts:
// encoding/json's reflection was most of a listing's decoding.
type lexer struct {
	b []byte
	i int
	// base is b's offset in the listing (a listing read as it arrives,
	// ReadHostListFrom, is lexed a window at a time): errors name the
	// offset in the listing.
	base int64
}

func (l *lexer) ws() {
	for l.i < len(l.b) {
		switch l.b[l.i] {
		case ' ', '\t', '\n', '\r':
			l.i++
		default:
			return
		}
	}
}

func (l *lexer) errorf(format string, a ...any) error {
	if l.i >= len(l.b) {
		return fmt.Errorf("offset %d: unexpected end of the data: %s", l.base+int64(l.i), fmt.Sprintf(format, a...))
	}
	return fmt.Errorf("offset %d: %s", l.base+int64(l.i), fmt.Sprintf(format, a...))
}

// end checks that nothing but blanks is left.
func (l *lexer) end() error {
	l.ws()
	if l.i != len(l.b) {
		return l.errorf("data after the value")
	}
	return nil
}

// array reads an array, calling each at every element (which reads it).
func (l *lexer) array(each func() error) error {
	l.ws()
	if l.i >= len(l.b) || l.b[l.i] != '[' {
		return l.errorf("want an array")
	}
	l.i++
	l.ws()
	if l.i < len(l.b) && l.b[l.i] == ']' {
		l.i++
		return nil
	}
	for {
		if err := each(); err != nil {
			return err
		}
		l.ws()
		if l.i >= len(l.b) {
			return l.errorf("unterminated array")
		}
		c := l.b[l.i]
		l.i++
		switch c {
		case ',':
		case ']':
			return nil
		default:
			l.i--
			return l.errorf("want , or ] in an array")
		}
	}
}

// object reads an object, calling each with every key (each reads the
// value).
func (l *lexer) object(each func(key string) error) error {
	l.ws()
	if l.i >= len(l.b) || l.b[l.i] != '{' {
		return l.errorf("want an object")
	}
	l.i++
	l.ws()
	if l.i < len(l.b) && l.b[l.i] == '}' {
		l.i++
		return nil
	}
	for {
		k, err := l.key()
		if err != nil {
			return err
		}
		if err := each(k); err != nil {
			return err
		}
		l.ws()
		if l.i >= len(l.b) {
			return l.errorf("unterminated object")
		}
		c := l.b[l.i]
		l.i++
		switch c {
		case ',':
		case '}':
			return nil
		default:
			l.i--
			return l.errorf("want , or } in an object")
		}
	}
}

// str reads a string. One of plain characters is taken as it is; one
// with an escape or a byte outside ASCII is decoded by encoding/json (its
// rules for both, invalid UTF-8 made U+FFFD).
// key reads an object's member name and the colon after it.
func (l *lexer) key() (string, error) {
	k, err := l.str()
	if err != nil {
		return "", err
	}
	l.ws()
	if l.i >= len(l.b) || l.b[l.i] != ':' {
		return "", l.errorf("want : after a key")
	}
	l.i++
	return k, nil
}

func (l *lexer) str() (string, error) {
	b, s, plain, err := l.strText()
	if plain {
		return string(b), err
	}
	return s, err
}

// strBytes is str's text as bytes: a plain string's are b's own (valid
// until b changes), made no string of.
func (l *lexer) strBytes() ([]byte, error) {
	b, s, plain, err := l.strText()
	if plain {
		return b, err
	}
	return []byte(s), err
}

// strText reads a string: plain, its text in b; else decoded, in s.
func (l *lexer) strText() (b []byte, s string, plain bool, err error) {
	l.ws()
	if l.i >= len(l.b) || l.b[l.i] != '"' {
		return nil, "", false, l.errorf("want a string")
	}
	start := l.i
	plain = true
	for j := l.i + 1; j < len(l.b); j++ {
		switch c := l.b[j]; {
		case c == '"':
			l.i = j + 1
			if plain {
				return l.b[start+1 : j], "", true, nil
			}
			var dec string // not s: its address taken, s would be on the heap at every call
			if err := json.Unmarshal(l.b[start:j+1], &dec); err != nil {
				l.i = start
				return nil, "", false, l.errorf("%v", err)
			}
			return nil, dec, false, nil
		case c == '\\':
			plain = false
			j++ // the escaped byte cannot end the string
		case c < 0x20:
			l.i = j
			return nil, "", false, l.errorf("control character in a string")
		case c >= 0x80:
			plain = false
		}
	}
	return nil, "", false, l.errorf("unterminated string")
}

// int reads an integer (no fraction, no exponent).
func (l *lexer) int() (int64, error) {
	l.ws()
	start := l.i
	for l.i < len(l.b) && (l.b[l.i] == '-' || '0' <= l.b[l.i] && l.b[l.i] <= '9') {
		l.i++
	}
	n, ok := parseInt(l.b[start:l.i])
	if !ok {
		l.i = start
		return 0, l.errorf("want an integer")
	}
	return n, nil
}

// parseInt parses t as a JSON integer: an optional minus, then 0 or
// digits not starting with 0, within int64 (as strconv.ParseInt, without
// making a string of t: a listing has several integers a host).
func parseInt(t []byte) (int64, bool) {
	neg := len(t) > 0 && t[0] == '-'
	if neg {
		t = t[1:]
	}
	if len(t) == 0 || len(t) > 1 && t[0] == '0' {
		return 0, false
	}
	var u uint64
	for _, c := range t {
		if c < '0' || c > '9' || u > (math.MaxUint64-9)/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), true
	case neg && u <= 1<<63:
		return -int64(u), true // -1<<63 too: int64(1<<63) wraps to itself
	}
	return 0, false
}

// bool reads true or false.
func (l *lexer) bool() (bool, error) {
	l.ws()
	switch {
	case bytes.HasPrefix(l.b[l.i:], []byte("true")):
		l.i += 4
		return true, nil
	case bytes.HasPrefix(l.b[l.i:], []byte("false")):
		l.i += 5
		return false, nil
	}
	return false, l.errorf("want true or false")
}

// maxNesting bounds how deep skip goes into arrays and objects, as
// encoding/json does (10,000): it recurses a level a bracket, and a
// listing is untrusted (a reply of a few MB of "[" grew a goroutine's
// stack past its 1 GB limit, a fatal error no recover catches).
const maxNesting = 10000

// skip reads past one value of any kind, checking its syntax.
func (l *lexer) skip() error { return l.skipIn(0) }

// skipIn is skip for a value nested in depth arrays and objects.
func (l *lexer) skipIn(depth int) error {
	l.ws()
	if l.i >= len(l.b) {
		return l.errorf("want a value")
	}
	switch c := l.b[l.i]; {
	case (c == '[' || c == '{') && depth >= maxNesting:
		return l.errorf("nested deeper than %d", maxNesting)
	case c == '[':
		return l.array(func() error { return l.skipIn(depth + 1) })
	case c == '{':
		return l.object(func(string) error { return l.skipIn(depth + 1) })
	case c == '"':
		_, err := l.str()
		return err
	case c == 't' || c == 'f':
		_, err := l.bool()
		return err
	case c == 'n':
		if bytes.HasPrefix(l.b[l.i:], []byte("null")) {
			l.i += 4
			return nil
		}
	case c == '-' || '0' <= c && c <= '9':
		// Any number: the list form's are integers, others are
		// read past.
		start := l.i
		for l.i < len(l.b) && bytes.IndexByte([]byte("+-.eE0123456789"), l.b[l.i]) >= 0 {
			l.i++
		}
		if json.Valid(l.b[start:l.i]) {
			return nil
		}
		l.i = start
	}
	return l.errorf("want a value")
}
