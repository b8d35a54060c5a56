package config

// AgentConfig is the [agent] section. (Owned by the agent part; extend freely.)
type AgentConfig struct{}

func defaultAgent() AgentConfig { return AgentConfig{} }

func (c AgentConfig) validate() error { return nil }
