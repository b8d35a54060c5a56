package config

// SimulatorConfig is the [simulator] section. (Owned by the simulator part; extend freely.)
type SimulatorConfig struct{}

func defaultSimulator() SimulatorConfig { return SimulatorConfig{} }

func (c SimulatorConfig) validate() error { return nil }
