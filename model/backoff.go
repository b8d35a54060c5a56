package model

import "time"

// Backoff is gseproc's one exponential backoff, for everything that
// retries: restarts of hosted processes, NATS reconnects, stream
// reconnects, store retries. Retry k (0-based) waits Base doubled k times,
// capped at Max (0: no cap) and spread by +-Jitter (0.2 = 20%), never
// beyond Max; with
// Immediate the first retry (k = 0) does not wait and the doubling starts
// at the second.
type Backoff struct {
	Base, Max time.Duration
	Jitter    float64
	Immediate bool
}

// Delay is the wait before retry k; r is a random draw in [0, 1) (the
// caller's, so that the decision stays pure and testable).
func (b Backoff) Delay(k int, r float64) time.Duration {
	if b.Immediate {
		if k <= 0 {
			return 0
		}
		k--
	}
	d := b.Base
	for i := 0; i < k && (b.Max <= 0 || d < b.Max); i++ {
		d *= 2
	}
	if b.Max > 0 {
		d = min(d, b.Max)
	}
	d = time.Duration(float64(d) * (1 - b.Jitter + 2*b.Jitter*r))
	if b.Max > 0 {
		d = min(d, b.Max)
	}
	return d
}
