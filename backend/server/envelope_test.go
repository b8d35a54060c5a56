package server

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"testing"
)

// TestRawDataEnvelope: a reply whose data is encoded already (rawData) is
// the bytes encoding/json writes for the envelope with that data, and
// says its length.
func TestRawDataEnvelope(t *testing.T) {
	data := []byte(`{"labels":[["a","b\u003c"]],"procs":[],"hosts":[["0:10.0.0.1","online","","",0,[0],[]]]}`)
	for _, env := range []envelope{
		{Result: true, Code: CodeOK, Message: "success", RequestID: newRequestID()},
		{Result: false, Code: CodeArgument, Message: `odd "message" <&>` + "\u2028", RequestID: ""},
	} {
		raw := httptest.NewRecorder()
		env.Data = rawData(data)
		writeEnvelope(raw, 201, env)
		want := httptest.NewRecorder()
		env.Data = json.RawMessage(data)
		writeEnvelope(want, 201, env)
		if raw.Body.String() != want.Body.String() || raw.Code != 201 {
			t.Fatalf("raw data: %d %s\nwant %s", raw.Code, raw.Body, want.Body)
		}
		if n := raw.Header().Get("Content-Length"); n != strconv.Itoa(raw.Body.Len()) {
			t.Fatalf("Content-Length %q for %d bytes", n, raw.Body.Len())
		}
		if ct := raw.Header().Get("Content-Type"); ct != want.Header().Get("Content-Type") {
			t.Fatalf("Content-Type %q", ct)
		}
	}
}
