package config

// NATSConfig is the [nats] section. (Owned by the nats part; extend freely.)
type NATSConfig struct{}

func defaultNATS() NATSConfig { return NATSConfig{} }

func (c NATSConfig) validate() error { return nil }
