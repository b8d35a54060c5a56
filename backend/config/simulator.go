package config

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// SimulatorConfig is the [simulator] section: the simulated fleet the
// embedded engine talks to when no real agents are used.
type SimulatorConfig struct {
	// Hosts is the number of simulated hosts (1..1,000,000).
	Hosts int `toml:"hosts"`
	// Seed makes a run repeatable: the same seed gives the same hosts,
	// definitions, latencies and failures (given the same call order per
	// host). The default, 1, gives every command the same fleet, so the
	// hosts `gseproc hosts` lists are the ones `gseproc op` reaches; 0 means
	// "pick one from the clock".
	Seed int64 `toml:"seed"`
	// Clouds is the number of cloud areas (bk_cloud_id 0..clouds-1).
	Clouds int `toml:"clouds"`
	// Namespaces are the namespaces process definitions are generated in.
	Namespaces []string `toml:"namespaces"`
	// Demo adds the hosts and processes the API documents' examples name
	// (0:10.0.0.1, 1:10.0.0.1, 0:127.0.0.1; gse:proc-test, gse:proc-test-1),
	// which never fail at random. It adds up to two hosts to Hosts.
	Demo bool `toml:"demo"`

	// LatencyMedian and LatencyP99 shape the per-op reply delay (a
	// log-normal fitted to both). Zero median means no delay.
	LatencyMedian Duration `toml:"latency_median"`
	LatencyP99    Duration `toml:"latency_p99"`
	// FailureRate is the fraction of command-running ops that fail (65535
	// with command output, or 836 for starts that fail to come up).
	FailureRate float64 `toml:"failure_rate"`
	// OfflineRate is the fraction of hosts whose agent never answers.
	OfflineRate float64 `toml:"offline_rate"`
	// UnreachableRate is the fraction of hosts answered at once with
	// "agent unreachable" (117).
	UnreachableRate float64 `toml:"unreachable_rate"`
	// CrashRate is how often a hosted process crashes, per process per
	// minute; the simulated agent brings it back up.
	CrashRate float64 `toml:"crash_rate"`
}

// MaxSimHosts bounds SimulatorConfig.Hosts.
const MaxSimHosts = 1_000_000

func defaultSimulator() SimulatorConfig {
	return SimulatorConfig{
		Hosts:           300,
		Seed:            1,
		Clouds:          3,
		Namespaces:      []string{"web", "db", "cache", "batch", "gse"},
		LatencyMedian:   Duration(40 * time.Millisecond),
		LatencyP99:      Duration(400 * time.Millisecond),
		FailureRate:     0.01,
		OfflineRate:     0.005,
		UnreachableRate: 0.005,
		CrashRate:       0.001,
	}
}

func (c SimulatorConfig) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Hosts < 1 || c.Hosts > MaxSimHosts {
		bad("simulator.hosts: %d is out of range [1,%d]", c.Hosts, MaxSimHosts)
	}
	if c.Clouds < 1 || c.Clouds > 255 {
		bad("simulator.clouds: %d is out of range [1,255]", c.Clouds)
	}
	if len(c.Namespaces) == 0 {
		bad("simulator.namespaces: needs at least one namespace")
	}
	seen := map[string]bool{}
	for i, ns := range c.Namespaces {
		switch {
		case strings.TrimSpace(ns) == "":
			bad("simulator.namespaces[%d]: must not be empty", i)
		case strings.ContainsAny(ns, ": \t\r\n\x00/"):
			bad("simulator.namespaces[%d]: %q must not contain ':', '/', spaces or control characters", i, ns)
		case seen[ns]:
			bad("simulator.namespaces[%d]: %q is listed twice", i, ns)
		}
		seen[ns] = true
	}
	if c.LatencyMedian < 0 {
		bad("simulator.latency_median: %s must be >= 0", c.LatencyMedian.D())
	}
	if c.LatencyP99 < 0 {
		bad("simulator.latency_p99: %s must be >= 0", c.LatencyP99.D())
	} else if c.LatencyMedian > 0 && c.LatencyP99 > 0 && c.LatencyP99 < c.LatencyMedian {
		bad("simulator.latency_p99: %s must be >= latency_median (%s)", c.LatencyP99.D(), c.LatencyMedian.D())
	}
	for _, r := range []struct {
		name string
		x    float64
	}{
		{"failure_rate", c.FailureRate}, {"offline_rate", c.OfflineRate}, {"unreachable_rate", c.UnreachableRate},
	} {
		if !(r.x >= 0 && r.x <= 1) { // also rejects NaN
			bad("simulator.%s: %v is out of range [0,1]", r.name, r.x)
		}
	}
	if c.OfflineRate+c.UnreachableRate > 1 {
		bad("simulator.offline_rate + unreachable_rate: %v exceeds 1", c.OfflineRate+c.UnreachableRate)
	}
	if !(c.CrashRate >= 0 && c.CrashRate <= 600) {
		bad("simulator.crash_rate: %v is out of range [0,600] (crashes per process per minute)", c.CrashRate)
	}
	return errors.Join(errs...)
}

// Validate checks the section alone (the simulator calls it from New).
func (c SimulatorConfig) Validate() error { return c.validate() }
