package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"gseproc/backend/config"
)

// Which backend a command without --server uses, in order:
//  1. $GSEPROC_SERVER (URL[,URL...]; "none" for a simulated fleet);
//  2. [server.client] servers in the config;
//  3. a simulated fleet when --hosts or --seed asks for one;
//  4. the local server: `gseproc server` on [server] listen (default
//     127.0.0.1:8080), when it answers /healthz within localProbe;
//  5. else a throwaway simulated fleet, which the command says on stderr,
//     since its changes end with the command.
// So `gseproc op stop ...` then `gseproc op status ...` act on the same
// fleet whenever a server runs here.

const (
	envServer  = "GSEPROC_SERVER"
	localProbe = 500 * time.Millisecond
)

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
// a simulated fleet), after the rules above; it tells stderr which.
func chooseServer(ctx context.Context, cfg config.Config, sim simFlags, io Stdio) string {
	env := os.Getenv(envServer)
	switch {
	case env == "none":
		return ""
	case env != "":
		return env
	case len(cfg.Server.Client.Servers) > 0:
		return "" // openBackend uses them
	case sim.set:
		return ""
	}
	url := localURL(cfg.Server.Listen)
	if probeLocal(ctx, url) {
		fmt.Fprintf(io.Err, "gseproc: using the local server %s (--server or $%s chooses another)\n", url, envServer)
		return url
	}
	fmt.Fprintf(io.Err, "gseproc: no server answers at %s: acting on a throwaway simulated fleet of %d hosts (seed %d); "+
		"what this command changes ends with it (start 'gseproc server', or give --server URL)\n", url, cfg.Simulator.Hosts, cfg.Simulator.Seed)
	return ""
}

// localURL is the URL of a server listening on listen here (an unspecified
// host is this machine).
func localURL(listen string) string {
	if listen == "" {
		listen = config.DefaultListen
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		host, port, _ = net.SplitHostPort(config.DefaultListen)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// probeLocal reports whether a gseproc server answers /healthz at url.
func probeLocal(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, localProbe)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
	}
	// The API's envelope: {"result": true, "data": {"status": "ok"}, ...}.
	var wrapped struct {
		Data json.RawMessage `json:"data"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK || dec.Decode(&wrapped) != nil {
		return false
	}
	return json.Unmarshal(wrapped.Data, &body) == nil && body.Status == "ok"
}
