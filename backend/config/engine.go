package config

import (
	"errors"
	"fmt"
	"time"
)

// EngineConfig is the [engine] section: fan-out, deadlines and bounds.
type EngineConfig struct {
	// Concurrency bounds how many hosts are contacted at once per task.
	Concurrency int `toml:"concurrency"`
	// MaxTargets refuses operations over more (host, process) pairs.
	MaxTargets int `toml:"max_targets"`
	// DeadlineSlack is added to each host's own deadline (op_timeout plus
	// the start-check window) for transport latency.
	DeadlineSlack Duration `toml:"deadline_slack"`
	// KeepTasks is how many finished tasks the in-memory store keeps (the
	// console's embedded engine, server fleet "simulated"): the oldest go
	// first; unfinished tasks are always kept. The durable store keeps
	// tasks by ResultMaxAge and ResultMaxBytes instead.
	KeepTasks int `toml:"keep_tasks"`
	// ResultMaxAge is how long a finished task is kept with its targets
	// and results, from its end: its id stays readable that long (unless
	// ResultMaxBytes, or the in-memory store's KeepTasks, is reached first).
	ResultMaxAge Duration `toml:"result_max_age"`
	// ResultMaxBytes caps what the durable store's tasks, targets and
	// results take: beyond it the oldest finished tasks go first.
	ResultMaxBytes int64 `toml:"result_max_bytes"`
	// KeepEvents is how many host events are kept for RecentEvents.
	KeepEvents int `toml:"keep_events"`
	// KeepAudit is how many audit entries are kept (in memory, or in the
	// JetStream audit stream); the oldest go first.
	KeepAudit int `toml:"keep_audit"`
	// ReadOnly refuses every change: operations other than status, and
	// saving or deleting definitions.
	ReadOnly bool `toml:"read_only"`
	// LeaseTTL is how long a server's hold on a running task lasts without
	// renewal, on a store shared by several servers (JetStream): the
	// holder renews every third of it, and another server takes over the
	// task's unfinished targets once it has seen the lease unrenewed for
	// LeaseTTL. Shorter: faster takeover after a crash; longer: more
	// tolerant of a stalled server.
	LeaseTTL Duration `toml:"lease_ttl"`
	// ServerID is the id this server holds task leases under. It must be
	// unique among the servers sharing a NATS cluster and stable across
	// restarts, so that a restarted server resumes its own tasks at once
	// instead of after LeaseTTL. Empty: the id kept in nats.store_dir
	// (file server-id, made once); with no store_dir, a new one per start.
	ServerID string `toml:"server_id"`
}

// ValidServerID reports whether id is a usable server id: 1-64 of
// [A-Za-z0-9._-].
func ValidServerID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func defaultEngine() EngineConfig {
	return EngineConfig{Concurrency: 2048, MaxTargets: 100000, DeadlineSlack: Duration(2 * time.Second),
		KeepTasks: 1000, KeepEvents: 10000, KeepAudit: 1_000_000, LeaseTTL: Duration(10 * time.Second),
		ResultMaxAge: Duration(7 * 24 * time.Hour), ResultMaxBytes: 1 << 30}
}

func (c EngineConfig) validate() error {
	var errs []error
	if c.Concurrency < 1 || c.Concurrency > 1_000_000 {
		errs = append(errs, fmt.Errorf("engine.concurrency: %d is out of range [1,1000000]", c.Concurrency))
	}
	if c.MaxTargets < 1 {
		errs = append(errs, fmt.Errorf("engine.max_targets: %d must be >= 1", c.MaxTargets))
	}
	if c.DeadlineSlack < 0 {
		errs = append(errs, fmt.Errorf("engine.deadline_slack: %s must be >= 0", c.DeadlineSlack.D()))
	}
	if c.KeepTasks < 1 {
		errs = append(errs, fmt.Errorf("engine.keep_tasks: %d must be >= 1", c.KeepTasks))
	}
	if c.ResultMaxAge.D() < time.Minute {
		errs = append(errs, fmt.Errorf("engine.result_max_age: %s must be >= 1m", c.ResultMaxAge.D()))
	}
	if c.ResultMaxBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("engine.result_max_bytes: %d must be >= 1048576 (1 MiB)", c.ResultMaxBytes))
	}
	if c.KeepEvents < 1 {
		errs = append(errs, fmt.Errorf("engine.keep_events: %d must be >= 1", c.KeepEvents))
	}
	if c.KeepAudit < 1 {
		errs = append(errs, fmt.Errorf("engine.keep_audit: %d must be >= 1", c.KeepAudit))
	}
	if c.LeaseTTL.D() < 300*time.Millisecond || c.LeaseTTL.D() > time.Hour {
		errs = append(errs, fmt.Errorf("engine.lease_ttl: %s is out of range [300ms,1h]", c.LeaseTTL.D()))
	}
	if c.ServerID != "" && !ValidServerID(c.ServerID) {
		errs = append(errs, fmt.Errorf("engine.server_id: %q must be 1-64 of A-Z a-z 0-9 . _ -", c.ServerID))
	}
	return errors.Join(errs...)
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
