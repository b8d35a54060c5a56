package config

import "testing"

// TestServerMemoryCeiling: [server] memory_ceiling defaults to 460 MiB,
// takes another or 0 (none), and refuses one under what a small heap is
// paced to.
func TestServerMemoryCeiling(t *testing.T) {
	tests := []sectionCase[ServerConfig]{
		{"default", "", "", func(c ServerConfig) bool { return c.MemoryCeiling == 460<<20 }},
		{"set", "[server]\nmemory_ceiling = 1073741824\n", "", func(c ServerConfig) bool { return c.MemoryCeiling == 1<<30 }},
		{"none", "[server]\nmemory_ceiling = 0\n", "", func(c ServerConfig) bool { return c.MemoryCeiling == 0 }},
		{"too small", "[server]\nmemory_ceiling = 1048576\n", "server.memory_ceiling", nil},
		{"negative", "[server]\nmemory_ceiling = -1\n", "server.memory_ceiling", nil},
	}
	testSection(t, tests, func(c Config) ServerConfig { return c.Server })
}
