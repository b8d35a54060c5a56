package transporttest

import "time"

// StallMeter measures how long this process was kept from running while it
// runs (a loaded machine): a ticker every 10 ms, the lateness of each tick
// beyond 20 ms summed. A test that bounds how long the product takes
// bounds the time it took less the stalls: the time the product chose to
// wait, which a loaded machine does not stretch.
type StallMeter struct {
	stop chan struct{}
	done chan time.Duration
}

// MeterStalls starts a StallMeter; Stop ends it.
func MeterStalls() *StallMeter {
	m := &StallMeter{stop: make(chan struct{}), done: make(chan time.Duration, 1)}
	go func() {
		const every = 10 * time.Millisecond
		tick := time.NewTicker(every)
		defer tick.Stop()
		var stalled time.Duration
		last := time.Now()
		late := func(now time.Time) {
			if d := now.Sub(last); d > 2*every {
				stalled += d - 2*every
			}
			last = now
		}
		for {
			select {
			case <-m.stop:
				late(time.Now())
				m.done <- stalled
				return
			case now := <-tick.C:
				late(now)
			}
		}
	}()
	return m
}

// Stop ends the meter and returns the stalls it saw.
func (m *StallMeter) Stop() time.Duration {
	close(m.stop)
	return <-m.done
}
