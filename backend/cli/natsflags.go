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
	urls, user, password, seed string
}

func (n *natsClientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&n.urls, "nats", "", "NATS `URL`s to connect to, comma-separated (default [nats] urls, else nats://"+config.DefaultNATSListen+")")
	fs.StringVar(&n.user, "user", "", "NATS `user` (overrides [nats] user)")
	fs.StringVar(&n.password, "password", "", "NATS `password` (overrides [nats] password)")
	fs.StringVar(&n.seed, "nkey-seed", "", "NATS nkey seed `FILE` (overrides [nats] nkey_seed_file)")
}

// apply writes the flags that were set on the command line into cfg.
func (n *natsClientFlags) apply(fs *flag.FlagSet, cfg *config.NATSConfig) {
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "nats":
			cfg.URLs = strings.Split(n.urls, ",")
		case "user":
			cfg.User = n.user
		case "password":
			cfg.Password = n.password
		case "nkey-seed":
			cfg.NKeySeedFile = n.seed
		}
	})
}
