package config

import (
	"fmt"
	"time"
)

// EngineConfig is the [engine] section: fan-out and deadlines.
type EngineConfig struct {
	// Concurrency bounds how many hosts are contacted at once per task.
	Concurrency int `toml:"concurrency"`
	// MaxTargets refuses operations over more (host, process) pairs.
	MaxTargets int `toml:"max_targets"`
	// DeadlineSlack is added to each host's own deadline (op_timeout plus
	// the start-check window) for transport latency.
	DeadlineSlack Duration `toml:"deadline_slack"`
	// KeepTasks is how many finished tasks are kept.
	KeepTasks int `toml:"keep_tasks"`
}

func defaultEngine() EngineConfig {
	return EngineConfig{Concurrency: 2048, MaxTargets: 100000, DeadlineSlack: Duration(2 * time.Second), KeepTasks: 1000}
}

func (c EngineConfig) validate() error {
	if c.Concurrency < 1 {
		return fmt.Errorf("engine.concurrency: %d must be >= 1", c.Concurrency)
	}
	if c.MaxTargets < 1 {
		return fmt.Errorf("engine.max_targets: %d must be >= 1", c.MaxTargets)
	}
	return nil
}

// Duration is a time.Duration written as "1.5s", "2m" in TOML.
type Duration time.Duration

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration like 500ms, 2s, 1m: %w", b, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
