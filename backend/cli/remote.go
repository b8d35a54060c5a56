package cli

import (
	"context"
	"fmt"
	"log/slog"
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

// newRemote opens a Backend on the gseproc servers of one cluster at
// rawURLs (comma-separated) through their native API: requests go to the
// first that answers and fail over to the others. Credentials come from
// [server.client] in the config, then $GSEPROC_APP_CODE,
// $GSEPROC_APP_SECRET and $GSEPROC_USERNAME (the user defaults to the
// local login name). It checks a server answers before returning, so a
// wrong URL or secret is reported at once.
func newRemote(rawURLs []string, cfg config.Config, log *slog.Logger) (backend.Backend, error) {
	urls, err := config.ParseServerURLs(rawURLs)
	if err != nil {
		return nil, fmt.Errorf("--server: %w", err)
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
	c := client.NewCluster(urls, client.WithCredentials(cr.AppCode, cr.AppSecret, cr.Username), client.WithLogger(log))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Info(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}
