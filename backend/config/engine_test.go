package config

import (
	"testing"
	"time"
)

func TestEngineSection(t *testing.T) {
	tests := []sectionCase[EngineConfig]{
		{"defaults", "", "", func(c EngineConfig) bool { return c == defaultEngine() }},
		{"values", "[engine]\nconcurrency = 16\nmax_targets = 50\ndeadline_slack = \"500ms\"\nkeep_tasks = 3\nkeep_events = 9\nread_only = true\n", "",
			func(c EngineConfig) bool {
				return c.Concurrency == 16 && c.MaxTargets == 50 && c.DeadlineSlack.D() == 500*time.Millisecond &&
					c.KeepTasks == 3 && c.KeepEvents == 9 && c.ReadOnly
			}},
		{"concurrency", "[engine]\nconcurrency = 0\n", "engine.concurrency", nil},
		{"max targets", "[engine]\nmax_targets = -1\n", "engine.max_targets", nil},
		{"slack", "[engine]\ndeadline_slack = \"-1s\"\n", "engine.deadline_slack", nil},
		{"slack syntax", "[engine]\ndeadline_slack = \"soon\"\n", "not a duration", nil},
		{"keep", "[engine]\nkeep_tasks = 0\nkeep_events = 0\n", "engine.keep_events", nil},
		{"retention", "[engine]\nresult_max_age = \"72h\"\nresult_max_bytes = 2147483648\n", "",
			func(c EngineConfig) bool { return c.ResultMaxAge.D() == 72*time.Hour && c.ResultMaxBytes == 2<<30 }},
		{"retention age", "[engine]\nresult_max_age = \"10s\"\n", "engine.result_max_age", nil},
		{"retention bytes", "[engine]\nresult_max_bytes = 1000\n", "engine.result_max_bytes", nil},
	}
	testSection(t, tests, func(c Config) EngineConfig { return c.Engine })
}
