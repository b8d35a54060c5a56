package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"strings"
	"time"

	"gseproc/backend"
	"gseproc/backend/client"
	"gseproc/backend/config"
)

// Environment variables a command's backend follows.
const (
	// EnvServer names the servers a command without --server talks to
	// (URL[,URL...]; "none" for a simulated fleet).
	EnvServer = "GSEPROC_SERVER"
	// EnvAppCode, EnvAppSecret and EnvUsername override [server.client]
	// credentials.
	EnvAppCode   = "GSEPROC_APP_CODE"
	EnvAppSecret = "GSEPROC_APP_SECRET"
	EnvUsername  = "GSEPROC_USERNAME"
)

// localProbe is how long ChooseServer waits for the local server's /healthz.
const localProbe = 500 * time.Millisecond

// Embedded reports whether OpenBackend opens the embedded engine (no
// server named by serverURLs or [server.client] servers).
func Embedded(cfg config.Config, serverURLs string) bool {
	return serverURLs == "" && len(cfg.Server.Client.Servers) == 0
}

// OpenBackend opens the backend a command talks to: the servers at
// serverURLs (comma-separated) or else those of [server.client] servers,
// when given, through the HTTP client; else the embedded engine over a
// simulated fleet (OpenEmbedded). The returned func closes everything it
// started.
func OpenBackend(ctx context.Context, cfg config.Config, serverURLs, version string, log *slog.Logger) (backend.Backend, func() error, error) {
	if !Embedded(cfg, serverURLs) {
		urls := cfg.Server.Client.Servers
		if serverURLs != "" {
			urls = []string{serverURLs}
		}
		b, err := openRemote(urls, cfg, log)
		if err != nil {
			return nil, nil, fmt.Errorf("connect to %s: %w", strings.Join(urls, ","), err)
		}
		closer := func() error {
			if c, ok := b.(io.Closer); ok {
				return c.Close()
			}
			return nil
		}
		return b, closer, nil
	}
	e, closer, err := OpenEmbedded(ctx, cfg, version, log)
	if err != nil {
		return nil, nil, err
	}
	return e, closer, nil
}

// openRemote opens a Backend on the gseproc servers of one cluster at
// rawURLs (comma-separated) through their native API: requests go to the
// first that answers and fail over to the others. Credentials come from
// [server.client] in the config, then $GSEPROC_APP_CODE,
// $GSEPROC_APP_SECRET and $GSEPROC_USERNAME (the user defaults to the
// local login name). It checks a server answers before returning, so a
// wrong URL or secret is reported at once.
func openRemote(rawURLs []string, cfg config.Config, log *slog.Logger) (backend.Backend, error) {
	urls, err := config.ParseServerURLs(rawURLs)
	if err != nil {
		return nil, fmt.Errorf("--server: %w", err)
	}
	cr := cfg.Server.Client
	for _, e := range []struct {
		dst *string
		env string
	}{{&cr.AppCode, EnvAppCode}, {&cr.AppSecret, EnvAppSecret}, {&cr.Username, EnvUsername}} {
		if v := os.Getenv(e.env); v != "" {
			*e.dst = v
		}
	}
	if cr.Username == "" && cr.AppCode != "" {
		if me, err := user.Current(); err == nil {
			cr.Username = me.Username
		}
	}
	c := client.NewCluster(urls, client.WithCredentials(cr.AppCode, cr.AppSecret, cr.Username), client.WithLogger(log))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Info(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// Choice is the server a command without --server talks to, as
// ChooseServer found it.
//
// The rules, in order:
//  1. $GSEPROC_SERVER (URL[,URL...]; "none" for a simulated fleet);
//  2. [server.client] servers in the config (OpenBackend uses them);
//  3. a simulated fleet when the command asks for one (--hosts, --seed);
//  4. the local server: `gseproc server` on [server] listen (default
//     127.0.0.1:8080), when it answers /healthz within half a second;
//  5. else a throwaway simulated fleet, whose changes end with the
//     command (the command should say so).
//
// So `gseproc op stop ...` then `gseproc op status ...` act on the same
// fleet whenever a server runs here.
type Choice struct {
	// URL is the server to talk to; "" for OpenBackend's own choice
	// ([server.client] servers, else a simulated fleet).
	URL string
	// Local says URL is the local server, found answering (rule 4).
	Local bool
	// Throwaway is the local URL that did not answer when the command
	// falls to a throwaway simulated fleet (rule 5); "" otherwise.
	Throwaway string
}

// ChooseServer applies Choice's rules; simAsked is rule 3.
func ChooseServer(ctx context.Context, cfg config.Config, simAsked bool) Choice {
	env := os.Getenv(EnvServer)
	switch {
	case env == "none":
		return Choice{}
	case env != "":
		return Choice{URL: env}
	case len(cfg.Server.Client.Servers) > 0:
		return Choice{}
	case simAsked:
		return Choice{}
	}
	url := LocalURL(cfg.Server.Listen)
	if probeLocal(ctx, url) {
		return Choice{URL: url, Local: true}
	}
	return Choice{Throwaway: url}
}

// LocalURL is the URL of a server listening on listen here (an unspecified
// host is this machine).
func LocalURL(listen string) string {
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
