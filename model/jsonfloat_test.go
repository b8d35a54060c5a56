package model

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
)

// checkJSONFloat: AppendJSONFloat writes f as json.Marshal does, or
// refuses it where json.Marshal refuses it or writes an exponent; and
// shortFloat reads that text as strconv.ParseFloat does.
func checkJSONFloat(t *testing.T, f float64) {
	t.Helper()
	want, werr := json.Marshal(f)
	got, ok := AppendJSONFloat([]byte("x"), f)
	switch {
	case ok && (werr != nil || string(got) != "x"+string(want)):
		t.Fatalf("%v: AppendJSONFloat %s, json.Marshal %s (%v)", f, got, want, werr)
	case !ok && string(got) != "x":
		t.Fatalf("%v: refused, and appended %q", f, got)
	case !ok && werr == nil:
		for _, c := range want {
			if c == 'e' {
				return
			}
		}
		t.Fatalf("%v: refused, json.Marshal writes %s", f, want)
	case ok:
		lit := got[1:]
		p, err := strconv.ParseFloat(string(lit), 64)
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := shortFloat(lit); ok && math.Float64bits(s) != math.Float64bits(p) {
			t.Fatalf("%s: shortFloat %v, ParseFloat %v", lit, s, p)
		}
		if !floatExact(lit, p) && len(lit) <= 15 {
			t.Fatalf("%s: written so, and not exact", lit)
		}
	}
}

func TestAppendJSONFloat(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 0.05, 0.01, 0.1, 0.3, 0.29, 1.15, 12.34, -12.34, 99.99, 100, 1e14 + 0.25,
		999999999999.99, 9999999999999.99, 1e15, 1e20, 1e21, 1e-6, 1e-7, 0.30000000000000004, 1.005, 2.675, 0.125, 123456.789,
		math.MaxFloat64, math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1), math.Inf(-1), 4503599627370495.5, 0.015,
		0.0625, 24.9375, 0.0001, -0.0001, 0.00005, 99999999999.9999, 100000000000.0001, 1.0001, 1.10001} {
		checkJSONFloat(t, f)
	}
	// shortFloat, of texts ParseFloat reads.
	for _, s := range []string{"0", "-0", "1.5", "0.1", "0.000000000000001", "123456789012345", "1234567890123456", "9007199254740993",
		"0.3", "2.675", "1.005", "99.99", "-0.25", "12345678901234.5"} {
		p, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := shortFloat([]byte(s))
		if ok && math.Float64bits(got) != math.Float64bits(p) {
			t.Fatalf("%s: shortFloat %v, ParseFloat %v", s, got, p)
		}
		if !ok && len(s) <= 15 {
			t.Fatalf("%s: shortFloat refused a short text", s)
		}
	}
}

// FuzzAppendJSONFloat: AppendJSONFloat writes what json.Marshal writes,
// of any float and of the decimals of a few places near it.
func FuzzAppendJSONFloat(f *testing.F) {
	f.Add(12.34)
	f.Add(math.Copysign(0, -1)) // -0 (the constant -0.0 is +0)
	f.Add(1e-7)
	f.Add(123456789.125)
	f.Fuzz(func(t *testing.T, v float64) {
		checkJSONFloat(t, v)
		for _, scale := range []float64{100, 1000, 1e4, 1e5} {
			r := math.Round(v*scale) / scale
			checkJSONFloat(t, r)
			checkJSONFloat(t, math.Nextafter(r, math.Inf(1)))
		}
	})
}
