package config

import (
	"reflect"
	"testing"
)

// The documented example must load cleanly (no unknown keys: every key it
// names exists) and, as it promises, hold exactly the defaults.
func TestExampleConfig(t *testing.T) {
	cfg, err := Load("../../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) > 0 {
		t.Fatalf("config.example.toml has unknown keys: %v", cfg.Warnings)
	}
	def := Default()
	cfg.Path, def.Path = "", ""
	for _, s := range []struct {
		name      string
		got, want any
	}{
		{"log", cfg.Log, def.Log}, {"console", normConsole(cfg.Console), normConsole(def.Console)},
		{"simulator", cfg.Simulator, def.Simulator}, {"engine", cfg.Engine, def.Engine},
		{"server", normServer(cfg.Server), normServer(def.Server)}, {"nats", normNATS(cfg.NATS), normNATS(def.NATS)},
		{"agent", normAgent(cfg.Agent), normAgent(def.Agent)},
	} {
		if !reflect.DeepEqual(s.got, s.want) {
			t.Errorf("[%s] in config.example.toml differs from the defaults:\n got %+v\nwant %+v", s.name, s.got, s.want)
		}
	}
}

// Empty lists and maps in the example decode as empty, not nil.
func normConsole(c ConsoleConfig) ConsoleConfig {
	if len(c.ProtectedNamespaces) == 0 {
		c.ProtectedNamespaces = nil
	}
	if len(c.Keys) == 0 {
		c.Keys = nil
	}
	return c
}

func normServer(c ServerConfig) ServerConfig {
	if len(c.Apps) == 0 {
		c.Apps = nil
	}
	return c
}

func normNATS(c NATSConfig) NATSConfig {
	if len(c.Cluster.Routes) == 0 {
		c.Cluster.Routes = nil
	}
	if len(c.URLs) == 0 {
		c.URLs = nil
	}
	if len(c.Hosts) == 0 {
		c.Hosts = nil
	}
	return c
}

func normAgent(c AgentConfig) AgentConfig {
	if len(c.Labels) == 0 {
		c.Labels = nil
	}
	return c
}
