package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/user"
	"time"

	"gseproc/backend"
	"gseproc/backend/client"
	"gseproc/backend/config"
)

// Environment variables that override [server.client] credentials.
const (
	envAppCode   = "GSEPROC_APP_CODE"
	envAppSecret = "GSEPROC_APP_SECRET"
	envUsername  = "GSEPROC_USERNAME"
)

// newRemote opens a Backend on the gseproc server at rawURL through its
// native API. Credentials come from [server.client] in the config, then
// $GSEPROC_APP_CODE, $GSEPROC_APP_SECRET and $GSEPROC_USERNAME (the user
// defaults to the local login name). It checks the server answers before
// returning, so a wrong URL or secret is reported at once.
func newRemote(rawURL string, cfg config.Config) (backend.Backend, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: want an http:// or https:// URL, e.g. http://127.0.0.1:8080", rawURL)
	}
	cr := cfg.Server.Client
	for _, e := range []struct {
		dst *string
		env string
	}{{&cr.AppCode, envAppCode}, {&cr.AppSecret, envAppSecret}, {&cr.Username, envUsername}} {
		if v := os.Getenv(e.env); v != "" {
			*e.dst = v
		}
	}
	if cr.Username == "" && cr.AppCode != "" {
		if me, err := user.Current(); err == nil {
			cr.Username = me.Username
		}
	}
	c := client.New(rawURL, client.WithCredentials(cr.AppCode, cr.AppSecret, cr.Username))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Info(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}
