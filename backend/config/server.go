package config

// ServerConfig is the [server] section. (Owned by the server part; extend freely.)
type ServerConfig struct{}

func defaultServer() ServerConfig { return ServerConfig{} }

func (c ServerConfig) validate() error { return nil }
