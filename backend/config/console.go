package config

// ConsoleConfig is the [console] section. (Owned by the console part; extend freely.)
type ConsoleConfig struct{}

func defaultConsole() ConsoleConfig { return ConsoleConfig{} }

func (c ConsoleConfig) validate() error { return nil }
