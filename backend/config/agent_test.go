package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAgentSection(t *testing.T) {
	tests := []sectionCase[AgentConfig]{
		{"defaults", "", "", func(c AgentConfig) bool { return reflect.DeepEqual(c, defaultAgent()) }},
		{"values", `[agent]
cloud_id = 2
ip = "10.0.0.7"
data_dir = "/srv/agent"
sample_interval = "500ms"
breach_count = 5
backoff_base = "2s"
backoff_max = "30s"
stable_after = "10s"
min_start_wait = "0s"
output_limit = 1024
event_buffer = 10
[agent.labels]
rack = "r1"
`, "", func(c AgentConfig) bool {
			return c.CloudID == 2 && c.IP == "10.0.0.7" && c.DataDir == "/srv/agent" &&
				c.SampleInterval.D() == 500*time.Millisecond && c.BreachCount == 5 && c.BackoffBase.D() == 2*time.Second &&
				c.BackoffMax.D() == 30*time.Second && c.StableAfter.D() == 10*time.Second && c.MinStartWait == 0 &&
				c.OutputLimit == 1024 && c.EventBuffer == 10 && c.Labels["rack"] == "r1"
		}},
		{"no ip is fine in a file (a server's config)", "[agent]\ncloud_id = 1\n", "", func(c AgentConfig) bool { return c.IP == "" }},
		{"ip", "[agent]\nip = \"10.0.0\"\n", "agent.ip", nil},
		{"cloud", "[agent]\ncloud_id = -1\n", "agent.cloud_id", nil},
		{"label key", "[agent.labels]\n\"a=b\" = \"x\"\n", "agent.labels", nil},
		{"label value with an escape", "[agent.labels]\nzone = \"a\\u001b[8mb\"\n", "control character", nil},
		{"labels at the bound", "[agent.labels]\n" + tomlLabels(64), "", func(c AgentConfig) bool { return len(c.Labels) == 64 }},
		{"labels past the bound", "[agent.labels]\n" + tomlLabels(65), "more than 64", nil},
		{"sample", "[agent]\nsample_interval = \"0s\"\n", "agent.sample_interval", nil},
		{"breaches", "[agent]\nbreach_count = 0\n", "agent.breach_count", nil},
		{"backoff order", "[agent]\nbackoff_base = \"10s\"\nbackoff_max = \"1s\"\n", "agent.backoff_max", nil},
		{"stable", "[agent]\nstable_after = \"-1s\"\n", "agent.stable_after", nil},
		{"output", "[agent]\noutput_limit = 10\n", "agent.output_limit", nil},
		{"output at the bound", "[agent]\noutput_limit = 65536\n", "", func(c AgentConfig) bool { return c.OutputLimit == 65536 }},
		{"output past the bound", "[agent]\noutput_limit = 65537\n", "agent.output_limit", nil},
		{"events", "[agent]\nevent_buffer = 0\n", "agent.event_buffer", nil},
		{"poll", "[agent]\npoll_interval = \"soon\"\n", "not a duration", nil},
	}
	testSection(t, tests, func(c Config) AgentConfig { return c.Agent })
}

// tomlLabels is n labels as lines of a TOML table.
func tomlLabels(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "k%03d = \"v\"\n", i)
	}
	return b.String()
}

func TestAgentValidateForRunning(t *testing.T) {
	c := DefaultAgent()
	c.DataDir = " "
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "agent.ip: required") || !strings.Contains(err.Error(), "agent.data_dir: required") {
		t.Fatalf("err %v", err)
	}
	c.IP, c.DataDir = "127.0.0.1", "/tmp/x"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
