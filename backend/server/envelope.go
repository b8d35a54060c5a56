package server

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
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

func writeEnvelope(w http.ResponseWriter, status int, env envelope) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(env)
}
