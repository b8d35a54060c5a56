package ui

import (
	"sort"
	"strconv"
	"strings"

	"github.com/sahilm/fuzzy"

	"gseproc/model"
)

// The hosts filter is structured: field:value matches part of a field,
// field=value all of it; the fields are ip, cloud, state (a process's
// state), agent (the agent's state), version (the agent's), agent_id (its
// GSE 2.0 agent id), proc (a process name) and any label key (of the host or of one of its
// processes). A bare word that looks like an address matches part of the
// IP; any other bare word matches process names fuzzily. Every term must
// match.

// filterHint is the filter's placeholder: its syntax in one line.
const filterHint = "ip:10.0.1 cloud=0 state=stopped agent=offline version:1.2 app=nginx · other words: process names (fuzzy)"

type filterTerm struct {
	field string // "" for a bare word
	value string
	exact bool // field=value (else field:value, a substring)
}

// parseFilter splits the filter text into terms.
func parseFilter(s string) []filterTerm {
	var out []filterTerm
	for _, tok := range strings.Fields(s) {
		i := strings.IndexAny(tok, ":=")
		if i <= 0 || isAddress(tok) {
			out = append(out, filterTerm{value: tok})
			continue
		}
		out = append(out, filterTerm{field: strings.ToLower(tok[:i]), value: tok[i+1:], exact: tok[i] == '='})
	}
	return out
}

// isAddress reports whether s is made of address characters only (an IP,
// a part of one, or cloud:ip): such words match the IP, not names.
func isAddress(s string) bool {
	return s != "" && strings.Trim(s, "0123456789.:abcdefABCDEF") == "" && strings.ContainsAny(s, ".:") && strings.ContainsAny(s, "0123456789")
}

func (t filterTerm) match(got string) bool {
	if t.exact {
		return strings.EqualFold(got, t.value)
	}
	return containsFold(got, t.value)
}

// containsFold reports whether sub is within s, ignoring case, without
// allocating when both are ASCII (a keystroke tests 100,000 rows).
func containsFold(s, sub string) bool {
	if !isASCII(s) || !isASCII(sub) {
		return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
	}
	n := len(sub)
	for i := 0; i+n <= len(s); i++ {
		if asciiEqualFold(s[i:i+n], sub) {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// asciiEqualFold compares two ASCII strings of the same length ignoring case.
func asciiEqualFold(a, b string) bool {
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// hostMatcher is a parsed filter ready to test rows; fuzzy words are
// matched once against the distinct process names, not per row, and so
// are state terms against the states.
type hostMatcher struct {
	terms []filterTerm
	names map[string]bool // process names matching every fuzzy word; nil when there is none

	// For rows with keys (matchKeyed): nameBits has bit n when names[n]
	// is in m.names (names of more than 64: nameBits unused); one mask of
	// the state bits passing each state term; rest is the other terms.
	nameBits   uint64
	bitsOK     bool
	stateTerms []stateTerm
	rest       []filterTerm
}

type stateTerm struct {
	t    filterTerm
	mask uint16
}

func newHostMatcher(text string, rows []hostRow) hostMatcher {
	return newHostMatcherOf(text, procNames(rows))
}

// Row keys: a keystroke in a list of 100,000 hosts tests the process
// names and states (the terms most typed) on a few bits per row, kept in
// an array of their own, instead of reading every row's processes.

// knownStates are the process states with a bit of their own.
var knownStates = [...]model.ProcState{model.ProcStopped, model.ProcStarting, model.ProcRunning, model.ProcBackoff,
	model.ProcStopping, model.ProcExited, model.ProcFatal, model.ProcUnknown}

const (
	stateNone  = uint16(1) << len(knownStates) // the host has no process
	stateOther = stateNone << 1                // a state not known: test the row itself
)

func stateBit(s model.ProcState) uint16 {
	for i, k := range knownStates {
		if s == k {
			return 1 << i
		}
	}
	return stateOther
}

// rowKey is what a keystroke tests of a row without reading it.
type rowKey struct {
	names  uint64 // bit n: the host runs names[n] (of at most 64 names)
	states uint16 // knownStates' bits of its processes, stateNone, stateOther
}

// keyRows is each row's key, for rows whose distinct process names are
// names (procNames).
func keyRows(rows []hostRow, names []string) []rowKey {
	idx := make(map[string]int, len(names))
	for i, n := range names {
		idx[n] = i
	}
	keys := make([]rowKey, len(rows))
	for i := range rows {
		k := &keys[i]
		procs := rows[i].v.Procs
		if len(procs) == 0 {
			k.states = stateNone
		}
		for _, pv := range procs {
			k.states |= stateBit(pv.State)
			if n, ok := idx[procName(pv.Key)]; ok && n < 64 {
				k.names |= 1 << n
			}
		}
	}
	return keys
}

// procNames is the distinct process names of rows, sorted (a host list
// keeps them from its load: a keystroke does not scan every row for them).
func procNames(rows []hostRow) []string {
	distinct := map[string]bool{}
	for i := range rows {
		for _, pv := range rows[i].v.Procs {
			distinct[procName(pv.Key)] = true
		}
	}
	names := make([]string, 0, len(distinct))
	for n := range distinct {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// newHostMatcherOf parses text for rows whose distinct process names are
// names, sorted (procNames).
func newHostMatcherOf(text string, names []string) hostMatcher {
	m := hostMatcher{bitsOK: len(names) <= 64}
	var words []string
	for _, t := range parseFilter(text) {
		if t.field == "" && !isAddress(t.value) {
			words = append(words, t.value)
			continue
		}
		m.terms = append(m.terms, t)
		if t.field != "state" {
			m.rest = append(m.rest, t)
			continue
		}
		st := stateTerm{t: t}
		for i, k := range knownStates {
			if t.match(string(k)) {
				st.mask |= 1 << i
			}
		}
		if t.match("none") {
			st.mask |= stateNone
		}
		m.stateTerms = append(m.stateTerms, st)
	}
	if len(words) == 0 {
		return m
	}
	m.names = map[string]bool{}
	for i, n := range names {
		all := true
		for _, w := range words {
			if len(fuzzy.Find(w, []string{n})) == 0 {
				all = false
				break
			}
		}
		if all {
			m.names[n] = true
			if i < 64 {
				m.nameBits |= 1 << i
			}
		}
	}
	return m
}

// matchKeyed is match for a row with its key k (from keyRows with the
// names the matcher was made with).
func (m hostMatcher) matchKeyed(k rowKey, r *hostRow) bool {
	if m.names != nil {
		if m.bitsOK {
			if k.names&m.nameBits == 0 {
				return false
			}
		} else if !m.matchNames(r) {
			return false
		}
	}
	for _, st := range m.stateTerms {
		if k.states&stateOther != 0 {
			if !m.matchTerm(st.t, r) {
				return false
			}
		} else if k.states&st.mask == 0 {
			return false
		}
	}
	for _, t := range m.rest {
		if !m.matchTerm(t, r) {
			return false
		}
	}
	return true
}

// matchNames reports whether the row runs a process in m.names.
func (m hostMatcher) matchNames(r *hostRow) bool {
	for _, pv := range r.v.Procs {
		if m.names[procName(pv.Key)] {
			return true
		}
	}
	return false
}

func procName(key string) string {
	_, name, _ := model.SplitKey(key)
	return name
}

// match reports whether the row passes every term.
func (m hostMatcher) match(r *hostRow) bool {
	if m.names != nil && !m.matchNames(r) {
		return false
	}
	for _, t := range m.terms {
		if !m.matchTerm(t, r) {
			return false
		}
	}
	return true
}

func (m hostMatcher) matchTerm(t filterTerm, r *hostRow) bool {
	v := &r.v
	switch t.field {
	case "":
		// An address: part of the IP or of cloud:ip (a word without
		// ':' has a '.', which no cloud id has: it is in the IP or not at
		// all, and a keystroke makes no cloud:ip of 100,000 rows).
		if !strings.Contains(t.value, ":") {
			return strings.Contains(v.Host.IP, t.value)
		}
		return strings.Contains(v.Host.AgentID(), t.value)
	case "ip":
		return t.match(v.Host.IP)
	case "cloud":
		return t.match(strconv.Itoa(v.Host.CloudID))
	case "agent":
		return t.match(string(v.State))
	case "version":
		return t.match(v.Version)
	case "agent_id", "bk_agent_id":
		return t.match(v.AgentID)
	case "state":
		for _, pv := range v.Procs {
			if t.match(string(pv.State)) {
				return true
			}
		}
		return len(v.Procs) == 0 && t.match("none")
	case "proc", "name", "process":
		for _, pv := range v.Procs {
			if t.match(procName(pv.Key)) {
				return true
			}
		}
		return false
	}
	// A label key, of the host or of one of its processes.
	if val, ok := v.labels.get(t.field); ok && t.match(val) {
		return true
	}
	for _, pv := range v.Procs {
		if val, ok := pv.Labels[t.field]; ok && t.match(val) {
			return true
		}
	}
	return false
}
