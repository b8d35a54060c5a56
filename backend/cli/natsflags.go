package cli

import (
	"flag"
	"strings"

	"gseproc/backend/config"
)

// natsClientFlags are the connection flags of the commands that connect to
// NATS as a client (agent, sim). Each overrides its [nats] key only when
// given.
type natsClientFlags struct {
	urls, user, password, seed, creds string
	tlsCA, tlsCert, tlsKey            string
}

func (n *natsClientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&n.urls, "nats", "", "NATS `URL`s to connect to, comma-separated (default [nats] urls, else nats://"+config.DefaultNATSListen+")")
	fs.StringVar(&n.user, "user", "", "NATS `user` (overrides [nats] user)")
	fs.StringVar(&n.password, "password", "", "NATS `password` (overrides [nats] password)")
	fs.StringVar(&n.seed, "nkey-seed", "", "NATS nkey seed `FILE` (overrides [nats] nkey_seed_file)")
	fs.StringVar(&n.tlsCA, "tls-ca", "", "trust NATS servers whose certificate `FILE` (PEM CA) signed (overrides [nats.tls] ca)")
	fs.StringVar(&n.tlsCert, "tls-cert", "", "present the client certificate `FILE` (PEM) to NATS (overrides [nats.tls] cert)")
	fs.StringVar(&n.tlsKey, "tls-key", "", "key `FILE` of --tls-cert (overrides [nats.tls] key)")
	fs.StringVar(&n.creds, "creds", "", "NATS credentials `FILE` (user JWT and seed, for decentralised JWT auth; overrides [nats] creds_file)")
}

// load loads the config at path (see loadConfig) and writes into its
// [nats] section the flags that were set on the command line. It returns
// the config and the names of every flag set, for the command's own
// overrides.
func (n *natsClientFlags) load(fs *flag.FlagSet, path string, io Stdio) (config.Config, map[string]bool, error) {
	cfg, err := loadConfig(path, io)
	if err != nil {
		return cfg, nil, &ExitError{Code: 2, Err: err}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["nats"] {
		cfg.NATS.URLs = strings.Split(n.urls, ",")
	}
	if set["user"] {
		cfg.NATS.User = n.user
	}
	if set["password"] {
		cfg.NATS.Password = n.password
	}
	if set["nkey-seed"] {
		cfg.NATS.NKeySeedFile = n.seed
	}
	if set["creds"] {
		cfg.NATS.CredsFile = n.creds
	}
	if set["tls-ca"] {
		cfg.NATS.TLS.CA = n.tlsCA
	}
	if set["tls-cert"] {
		cfg.NATS.TLS.Cert = n.tlsCert
	}
	if set["tls-key"] {
		cfg.NATS.TLS.Key = n.tlsKey
	}
	return cfg, set, nil
}
