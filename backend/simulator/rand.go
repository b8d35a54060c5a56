package simulator

import (
	"math"
	"time"
)

// The simulator draws every random value from small, explicit generators
// so a seed makes a run repeatable: a per-host stream (latency and failure
// draws, in the order the host is called) and stateless hashes of
// (seed, what, index) for everything generated up front.

// splitmix64 advances *s and returns the next value of the stream.
func splitmix64(s *uint64) uint64 {
	*s += 0x9e3779b97f4a7c15
	z := *s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// mix hashes a seed and a few integers into one well-spread value.
func mix(seed uint64, xs ...uint64) uint64 {
	s := seed
	v := splitmix64(&s)
	for _, x := range xs {
		s ^= x * 0xd6e8feb86659fd93
		v ^= splitmix64(&s)
	}
	return v
}

// unit maps a 64-bit value to [0,1).
func unit(v uint64) float64 { return float64(v>>11) / (1 << 53) }

// hash01 is unit(mix(...)).
func hash01(seed uint64, xs ...uint64) float64 { return unit(mix(seed, xs...)) }

// Hash domains, so independent decisions use independent hashes.
const (
	hKind uint64 = iota + 1
	hRole
	hZone
	hOS
	hRack
	hRNG
	hPID
	hDeploy
	hInit
	hInitHosted
	hInitAge
	hCPU
	hMem
	hFrac
	hMemTotal
	hAgentID
	hLog
)

// latency is a log-normal fitted to a median and a 99th percentile:
// median = e^mu, p99 = e^(mu + 2.3263 sigma).
type latency struct {
	mu, sigma float64
	zero      bool
	max       time.Duration
}

const z99 = 2.326347874040841

func newLatency(median, p99 time.Duration) latency {
	if median <= 0 {
		return latency{zero: true}
	}
	if p99 < median {
		p99 = median
	}
	mu := math.Log(float64(median))
	sigma := (math.Log(float64(p99)) - mu) / z99
	// Cap the tail at 10x p99 so one unlucky draw cannot stall a test.
	return latency{mu: mu, sigma: sigma, max: 10 * p99}
}

// draw returns one latency from the stream s (two values are always taken,
// so the stream advances the same way whatever the profile).
func (l latency) draw(s *uint64) time.Duration {
	u1, u2 := unit(splitmix64(s)), unit(splitmix64(s))
	if l.zero {
		return 0
	}
	d := time.Duration(math.Exp(l.mu + l.sigma*stdNormal(u1, u2)))
	if d > l.max {
		d = l.max
	}
	return d
}

// stdNormal turns two uniforms in [0,1) into a standard normal value
// (Box-Muller; 1-u1 is in (0,1]).
func stdNormal(u1, u2 float64) float64 {
	return math.Sqrt(-2*math.Log(1-u1)) * math.Cos(2*math.Pi*u2)
}

// poisson draws a Poisson(lambda) count from s (normal approximation for
// large lambda).
func poisson(s *uint64, lambda float64) int {
	if lambda <= 0 {
		return 0
	}
	if lambda > 50 {
		n := stdNormal(unit(splitmix64(s)), unit(splitmix64(s)))
		k := int(math.Round(lambda + math.Sqrt(lambda)*n))
		return max(k, 0)
	}
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= unit(splitmix64(s))
		if p <= l {
			return k
		}
		k++
	}
}
