// Package config loads gseproc's TOML configuration. Every section has its
// own file and its own defaults; a missing file means all defaults.
//
// Defaults are applied once, here: Default holds every configurable
// default and Load decodes a file over it, so a key the file leaves out
// keeps its default and the result is validated whole. The parts built
// from a config (the engine, the JetStream store, the NATS dispatcher and
// serving, the simulator, the SSH console, the console) take it as it is:
// each refuses, naming the field and its key, a zero where the config has
// a default, instead of defaulting it a second time. A value a part has
// that the config does not carry (a bucket prefix, a queue size) keeps its
// default in that part, and only there. Tests that build parts directly
// start from Default (or the part's XFromConfig), the same single source.
// A zero that means something (a seed of 0 draws one; a rate of 0 is none)
// keeps its meaning.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/BurntSushi/toml"
)

// Config is the whole file. Each section is documented in config.example.toml.
type Config struct {
	Log       LogConfig       `toml:"log"`
	Console   ConsoleConfig   `toml:"console"`
	Simulator SimulatorConfig `toml:"simulator"`
	Engine    EngineConfig    `toml:"engine"`
	Server    ServerConfig    `toml:"server"`
	NATS      NATSConfig      `toml:"nats"`
	Agent     AgentConfig     `toml:"agent"`
	SSH       SSHConfig       `toml:"ssh"`

	// Path is the file that was loaded ("" when none).
	Path string `toml:"-"`
	// Warnings lists unknown keys and other non-fatal findings.
	Warnings []string `toml:"-"`
}

// LogConfig sets slog output.
type LogConfig struct {
	Level  string `toml:"level"`  // debug, info, warn, error
	Format string `toml:"format"` // text or json
	File   string `toml:"file"`   // "" = stderr (the console logs to a file or nowhere)
}

// Default returns the configuration used when no file is found.
func Default() Config {
	return Config{
		Log:       LogConfig{Level: "info", Format: "text"},
		Console:   defaultConsole(),
		Simulator: defaultSimulator(),
		Engine:    defaultEngine(),
		Server:    defaultServer(),
		NATS:      defaultNATS(),
		Agent:     defaultAgent(),
		SSH:       defaultSSH(),
	}
}

// EnvVar names the environment variable that points at a config file.
const EnvVar = "GSEPROC_CONFIG"

// Candidates lists where the config file is looked for, in order, when no
// path is given: $GSEPROC_CONFIG, $XDG_CONFIG_HOME/gseproc/config.toml (or
// ~/.config/gseproc/config.toml), /etc/gseproc/config.toml.
func Candidates() []string {
	var out []string
	if p := os.Getenv(EnvVar); p != "" {
		out = append(out, p)
	}
	if d, err := os.UserConfigDir(); err == nil {
		out = append(out, filepath.Join(d, "gseproc", "config.toml"))
	}
	return append(out, "/etc/gseproc/config.toml")
}

// Load reads path, or the first existing candidate when path is "". A path
// given explicitly (flag or env var) must exist; candidates may be absent.
// Unknown keys do not fail: they are listed in Warnings with their names.
func Load(path string) (Config, error) {
	cfg := Default()
	explicit := path != ""
	if !explicit {
		for i, c := range Candidates() {
			if _, err := os.Stat(c); err == nil {
				path = c
				explicit = i == 0 && os.Getenv(EnvVar) != ""
				break
			} else if i == 0 && os.Getenv(EnvVar) != "" {
				return cfg, fmt.Errorf("config %s (from $%s): %w", c, EnvVar, err)
			}
		}
	}
	if path == "" {
		return cfg, nil
	}
	md, err := toml.DecodeFile(path, &cfg)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !explicit {
			return Default(), nil
		}
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	cfg.Path = path
	for _, k := range md.Undecoded() {
		cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("config %s: unknown key %q ignored", path, k.String()))
	}
	cfg.Warnings = append(cfg.Warnings, cfg.Console.keyWarnings(path)...)
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// Validate checks every section.
func (c Config) Validate() error {
	var errs []error
	for _, e := range []error{c.Console.validate(), c.Simulator.validate(), c.Engine.validate(),
		c.Server.validate(), c.NATS.validate(), c.Agent.validate(), c.SSH.validate()} {
		if e != nil {
			errs = append(errs, e)
		}
	}
	return errors.Join(errs...)
}
