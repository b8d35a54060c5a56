package cli

import (
	"errors"

	"gseproc/backend"
	"gseproc/backend/config"
)

// newRemote opens a Backend on a gseproc server at url (placeholder until
// the HTTP client lands).
func newRemote(url string, cfg config.Config) (backend.Backend, error) {
	return nil, errors.New("remote mode not built yet")
}
