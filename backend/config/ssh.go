package config

import (
	"errors"
	"fmt"
	"time"
)

// SSHConfig is the [ssh] section: the console served over SSH by
// `gseproc ssh`. Who may log in, under which operator name and over which
// namespaces is in the authorized-keys file (see backend/sshconsole).
type SSHConfig struct {
	// Listen is the SSH address (host:port).
	Listen string `toml:"listen"`
	// HostKey is the server's private key file: an ed25519 key is
	// generated there (mode 0600) on first start and kept.
	HostKey string `toml:"host_key"`
	// AuthorizedKeys is the file of public keys allowed in, each with its
	// operator name and namespaces.
	AuthorizedKeys string `toml:"authorized_keys"`
	// IdleTimeout ends a session after this long without a key press.
	IdleTimeout Duration `toml:"idle_timeout"`
	// MaxSessions bounds the sessions open at once.
	MaxSessions int `toml:"max_sessions"`
}

func defaultSSH() SSHConfig {
	return SSHConfig{Listen: "127.0.0.1:2222", HostKey: "/var/lib/gseproc/ssh_host_ed25519_key",
		AuthorizedKeys: "/etc/gseproc/ssh_authorized_keys", IdleTimeout: Duration(15 * time.Minute), MaxSessions: 32}
}

func (c SSHConfig) validate() error {
	var errs []error
	if _, _, err := SplitListen(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("ssh.listen: %w", err))
	}
	if c.HostKey == "" {
		errs = append(errs, errors.New("ssh.host_key: required"))
	}
	if c.AuthorizedKeys == "" {
		errs = append(errs, errors.New("ssh.authorized_keys: required"))
	}
	if d := c.IdleTimeout.D(); d < time.Second || d > 24*time.Hour {
		errs = append(errs, fmt.Errorf("ssh.idle_timeout: %s is out of range [1s,24h]", d))
	}
	if c.MaxSessions < 1 || c.MaxSessions > 10000 {
		errs = append(errs, fmt.Errorf("ssh.max_sessions: %d is out of range [1,10000]", c.MaxSessions))
	}
	return errors.Join(errs...)
}
