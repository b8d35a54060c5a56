package transport

import (
	"encoding/json"
	"reflect"
	"testing"
)

// agreesWithJSON is the fuzzers' check of a scanner: whenever scan takes
// data, encoding/json takes it too and decodes it to the same value.
func agreesWithJSON[T any](t *testing.T, data []byte, scan func([]byte) (T, bool)) {
	t.Helper()
	got, ok := scan(data)
	if !ok {
		return
	}
	var want T
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("%q: the scanner took what encoding/json refuses (%v): %+v", data, err, got)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\nscanner %+v\njson    %+v", data, got, want)
	}
}

// benchDecode measures decode (a scanner and its fallback) and
// json.Unmarshal on the same data.
func benchDecode[T any](b *testing.B, data []byte, decode func([]byte) (T, error)) {
	b.Run("scanner", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v T
			if err := json.Unmarshal(data, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
