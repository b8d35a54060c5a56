package model

import (
	"math"
	"strconv"
)

// AppendJSONFloat appends f as json.Marshal writes a float64 when it
// writes it without an exponent (f is 0, or 1e-6 <= |f| < 1e21): the
// shortest decimal that reads back as f (strconv.AppendFloat, 'f', -1).
// false, nothing appended, for the rest: NaN and ±Inf (refused), and the
// values json writes with an exponent (left to json.Marshal).
//
// A usage of a result (its cpu and mem, read and written by the server
// and the op client for every result of a status op) is most often a
// decimal of a few places: written from its ten-thousandths, not by the
// shortest-digits search (a tenth of the op client's CPU).
// TestAppendJSONFloat, FuzzAppendJSONFloat compare with json.Marshal.
func AppendJSONFloat(b []byte, f float64) ([]byte, bool) {
	if out, ok := appendFewPlaces(b, f); ok {
		return out, true
	}
	abs := math.Abs(f)
	if math.IsNaN(f) || math.IsInf(f, 0) || (abs != 0 && (abs < 1e-6 || abs >= 1e21)) {
		return b, false
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64), true
}

// appendFewPlaces appends f as strconv.AppendFloat(b, f, 'f', -1, 64)
// does when f is n/10^4 for an integer n, |n| < 1e15: that decimal reads
// back as f (n/10^4 in float64 is the float nearest it, as reading it
// is), and no other decimal of 15 significant digits or fewer reads back
// as the same float64, so it is the shortest; false otherwise.
func appendFewPlaces(b []byte, f float64) ([]byte, bool) {
	const scale = 1e4
	m := math.Round(f * scale)
	if m/scale != f || math.Abs(m) >= 1e15 { // NaN and ±Inf too
		return b, false
	}
	if math.Signbit(f) {
		b = append(b, '-') // -0 too, as AppendFloat writes it
		m = -m
	}
	n := int64(m)
	b = strconv.AppendInt(b, n/scale, 10)
	if frac := n % scale; frac != 0 {
		d := [5]byte{'.', byte('0' + frac/1000), byte('0' + frac/100%10), byte('0' + frac/10%10), byte('0' + frac%10)}
		k := len(d)
		for d[k-1] == '0' {
			k--
		}
		b = append(b, d[:k]...)
	}
	return b, true
}

// pow10 are the powers of ten a float64 holds exactly, up to 1e15.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// shortFloat is the float64 of lit, -?(0|[1-9][0-9]*)(\.[0-9]+)?, as
// strconv.ParseFloat reads it, when lit has 15 digits or fewer: its
// digits, an integer under 2^53, are a float64 exactly, and divided by
// the power of ten of its places (exact too) the quotient is the float
// nearest lit's value, which is what ParseFloat returns. false when lit
// has more digits.
func shortFloat(lit []byte) (float64, bool) {
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	var n int64
	digits, places := 0, -1
	for _, c := range lit {
		if c == '.' {
			places = 0
			continue
		}
		n = n*10 + int64(c-'0')
		digits++
		if places >= 0 {
			places++
		}
	}
	if digits > 15 {
		return 0, false
	}
	f := float64(n)
	if places > 0 {
		f /= pow10[places]
	}
	if neg {
		f = -f
	}
	return f, true
}
