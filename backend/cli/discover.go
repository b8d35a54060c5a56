package cli

import (
	"context"
	"fmt"

	"gseproc/backend/config"
	"gseproc/backend/node"
)

// Which backend a command without --server uses is node.ChooseServer's
// choice (its rules are in node.Choice); cli says which on stderr.

// serverHelp is what --server's help says about the choice above.
const serverHelp = "talk to the gseproc servers at `URL[,URL...]` (servers of one cluster: the others when one fails). " +
	"Default: $GSEPROC_SERVER (none = a simulated fleet), then [server.client] servers, then the local server " +
	"(gseproc server on [server] listen, default " + config.DefaultListen + ") when it answers, else a throwaway simulated fleet"

// simFlags are --hosts and --seed: the simulated fleet's size and seed.
type simFlags struct {
	hosts   int
	seed    int64
	seedSet bool
	set     bool // one of them was given
}

func (s *simFlags) register(fs interface {
	Func(name, usage string, fn func(string) error)
}) {
	fs.Func("hosts", "`N` hosts in the simulated fleet, on a command that makes one (default [simulator] hosts, 300); implies a simulated fleet", func(v string) error {
		var n int
		if _, err := fmt.Sscan(v, &n); err != nil || n < 1 || n > 1_000_000 {
			return fmt.Errorf("want a number of hosts in 1..1000000")
		}
		s.hosts, s.set = n, true
		return nil
	})
	fs.Func("seed", "the simulated fleet's `seed` (the same seed, the same fleet; default [simulator] seed); implies a simulated fleet", func(v string) error {
		if _, err := fmt.Sscan(v, &s.seed); err != nil {
			return fmt.Errorf("want an integer")
		}
		s.set, s.seedSet = true, true
		return nil
	})
}

// apply sets the flags into cfg's simulator.
func (s simFlags) apply(cfg *config.Config) {
	if s.hosts > 0 {
		cfg.Simulator.Hosts = s.hosts
	}
	if s.seedSet {
		cfg.Simulator.Seed = s.seed
	}
}

// chooseServer is the server a command without --server talks to ("" for
// OpenBackend's own choice), after node.Choice's rules; it tells stderr
// which.
func chooseServer(ctx context.Context, cfg config.Config, sim simFlags, io Stdio) string {
	c := node.ChooseServer(ctx, cfg, sim.set)
	switch {
	case c.Local:
		fmt.Fprintf(io.Err, "gseproc: using the local server %s (--server or $%s chooses another)\n", c.URL, node.EnvServer)
	case c.Throwaway != "":
		fmt.Fprintf(io.Err, "gseproc: no server answers at %s: acting on a throwaway simulated fleet of %d hosts (seed %d); "+
			"what this command changes ends with it (start 'gseproc server', or give --server URL)\n", c.Throwaway, cfg.Simulator.Hosts, cfg.Simulator.Seed)
	}
	return c.URL
}
