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
		want := httptest.NewRecorder()
		env.Data = json.RawMessage(data)
		writeEnvelope(want, 201, env)
		// The same data whole, and in parts as a host listing writes it.
		for _, d := range []any{rawData(data), rawParts{data[:10], nil, data[10:40], data[40:]}} {
			raw := httptest.NewRecorder()
			env.Data = d
			writeEnvelope(raw, 201, env)
			if raw.Body.String() != want.Body.String() || raw.Code != 201 {
				t.Fatalf("raw data %T: %d %s\nwant %s", d, raw.Code, raw.Body, want.Body)
			}
			if n := raw.Header().Get("Content-Length"); n != strconv.Itoa(raw.Body.Len()) {
				t.Fatalf("%T: Content-Length %q for %d bytes", d, n, raw.Body.Len())
			}
			if ct := raw.Header().Get("Content-Type"); ct != want.Header().Get("Content-Type") {
				t.Fatalf("%T: Content-Type %q", d, ct)
			}
		}
	}
}
