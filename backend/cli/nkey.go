package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nkeys"

	"gseproc/backend/config"
	"gseproc/model"
)

// runNKey issues one NATS credential: `gseproc nkey --host 0:10.0.0.1
// --out FILE` writes a new user nkey seed to FILE (mode 0600, never over an
// existing file) for the agent (`--nkey-seed FILE`), and prints the
// [[nats.users]] entry the server's config needs, bound to that host
// (--sim HOSTS: role sim bound to those hosts; --server: role server).
func runNKey(_ context.Context, args []string, io Stdio) error {
	fs := newFlags("nkey", "nkey --out FILE (--host CLOUD:IP | --sim CLOUD:IP|CLOUD:*,... | --server)", io)
	out := fs.String("out", "", "write the seed to `FILE` (mode 0600; must not exist); the agent reads it with --nkey-seed")
	host := fs.String("host", "", "bind the credential to the agent `CLOUD:IP` (role agent)")
	sim := fs.String("sim", "", "bind the credential to the simulated `HOSTS` of `gseproc sim` (role sim; comma-separated cloud:ip or cloud:*)")
	srv := fs.Bool("server", false, "a credential for another gseproc server (role server, every permission)")
	if err := parseList("nkey", fs, args); err != nil {
		return err
	}
	u := config.NATSUser{}
	n := 0
	if *host != "" {
		h, err := model.ParseAgentID(*host)
		if err != nil {
			return usageError("nkey", "--host: %v", err)
		}
		u.Host, n = h.AgentID(), n+1
	}
	if *sim != "" {
		u.Role, n = config.NATSRoleSim, n+1
		for _, s := range strings.Split(*sim, ",") {
			p, err := model.ParseHostPattern(s)
			if err != nil {
				return usageError("nkey", "--sim: %v", err)
			}
			u.Hosts = append(u.Hosts, p.String())
		}
	}
	if *srv {
		u.Role, n = config.NATSRoleServer, n+1
	}
	if n != 1 {
		return usageError("nkey", "give exactly one of --host, --sim, --server")
	}
	if *out == "" {
		return usageError("nkey", "--out FILE is required (where the seed is written)")
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return fmt.Errorf("create nkey: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return fmt.Errorf("nkey seed: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return fmt.Errorf("nkey public key: %w", err)
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return &ExitError{Code: 2, Err: fmt.Errorf("write seed: %w", err)}
	}
	_, werr := f.Write(append(seed, '\n'))
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("write seed %s: %w", *out, err)
	}
	u.NKey = pub
	fmt.Fprintf(io.Out, "# seed written to %s (keep it on that machine only; the agent reads it with --nkey-seed %s)\n", *out, *out)
	fmt.Fprintf(io.Out, "# add to the server's config:\n[[nats.users]]\nnkey = %q\n", u.NKey)
	switch {
	case u.Host != "":
		fmt.Fprintf(io.Out, "host = %q\n", u.Host)
	case u.Role == config.NATSRoleSim:
		fmt.Fprintf(io.Out, "role = %q\nhosts = [%s]\n", u.Role, quoteList(u.Hosts))
	default:
		fmt.Fprintf(io.Out, "role = %q\n", u.Role)
	}
	return nil
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
