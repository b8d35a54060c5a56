package server

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
)

// Codes of the reply envelope (top-level "code"). The 13 06 xxx family is
// the API gateway's (gse-api.md §7.3), 1241002 and 1210001 are JOB's
// (§7.4), 1000115 is GSE's "task not yet dispatched" (§7.2).
const (
	CodeOK                = 0
	CodeTaskNotDispatched = 1000115 // result queries: poll again
	CodeOperatorRequired  = 1306401 // neither bk_username nor bk_token
	CodeUserDenied        = 1306402 // bk_username not among the app's users
	CodeAppDenied         = 1306403 // unknown app, wrong secret, scope or namespace not allowed
	CodeNotFound          = 1306404 // no such endpoint; native API: no such task/process
	CodeArgument          = 1306406 // malformed JSON, wrong types, oversized body, meta form and native API validation
	CodeRateLimited       = 1306429 // the app's token bucket is empty
	CodeSystem            = 1306000 // internal error
	CodeIllegalParam      = 1241002 // JOB process_infos form: field validation (ILLEGAL_PARAM)
	CodeGSE               = 1210001 // the engine refused or failed to create the task (GSE_ERROR)
)

// envelope is every reply: {result, code, message, data, permission, request_id}.
type envelope struct {
	Result     bool   `json:"result"`
	Code       int    `json:"code"`
	Message    string `json:"message"`
	Data       any    `json:"data"`
	Permission any    `json:"permission"`
	RequestID  string `json:"request_id"`
}

// apiError is a refusal: an HTTP status, an envelope code and a message.
type apiError struct {
	status     int
	code       int
	msg        string
	data       any // native API: {"kind": ..., "errors": [...]}
	permission any
	// denied is the namespace a refusal by scope was about: the refusal
	// is audited (Server.run).
	denied     string
	retryAfter int // seconds; sent as Retry-After (a rate-limit refusal)
}

func (e *apiError) Error() string { return e.msg }

func errArg(msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: CodeArgument, msg: msg}
}

// newRequestID returns 32 random hex digits, as the gateway's request ids.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// rawData is a reply's data encoded already (by a writer of package
// wire): the envelope is written around it as it is, not encoded again
// (encoding/json would check and copy a 100,000-host listing once more).
type rawData []byte

// rawParts is a reply's data encoded already in parts (a host listing,
// wire.HostListWriter.Parts), written in turn as rawData is: the ~20 MB
// of a 100,000-host listing are neither joined nor copied into the
// envelope's buffer before the reply is written.
type rawParts [][]byte

func writeEnvelope(w http.ResponseWriter, status int, env envelope) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	var parts rawParts
	switch d := env.Data.(type) {
	case rawData:
		parts = rawParts{d}
	case rawParts:
		parts = d
	}
	if parts != nil {
		// The bytes encoding/json writes for env with the parts joined
		// as its data (TestRawDataEnvelope): the envelope's head, the
		// parts, its tail.
		head, tail := envelopeHead(env), envelopeTail(env)
		n := len(head) + len(tail)
		for _, p := range parts {
			n += len(p)
		}
		// Its length, known before the first byte: a client sees a cut reply
		// as cut, and a console can size its read.
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.WriteHeader(status)
		if _, err := w.Write(head); err != nil {
			return // the client is gone: the rest would fail alike
		}
		for _, p := range parts {
			if _, err := w.Write(p); err != nil {
				return
			}
		}
		_, _ = w.Write(tail)
		return
	}
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(env)
}

// envelopeHead is env as encoding/json writes it up to its data (with
// no permission: a success's envelope).
func envelopeHead(env envelope) []byte {
	head := make([]byte, 0, len(env.Message)+100)
	head = append(head, `{"result":`...)
	head = strconv.AppendBool(head, env.Result)
	head = append(head, `,"code":`...)
	head = strconv.AppendInt(head, int64(env.Code), 10)
	head = append(head, `,"message":`...)
	head = appendString(head, env.Message)
	return append(head, `,"data":`...)
}

// envelopeTail is env as encoding/json writes it after its data (with no
// permission), the encoder's newline included.
func envelopeTail(env envelope) []byte {
	tail := make([]byte, 0, len(env.RequestID)+50)
	tail = append(tail, `,"permission":null,"request_id":`...)
	tail = appendString(tail, env.RequestID)
	return append(tail, "}\n"...)
}

// appendString appends s as the envelope's encoder writes it (HTML
// characters not escaped).
func appendString(b []byte, s string) []byte {
	q, _ := compactJSON(s) // a string always encodes
	return append(b, q...)
}
