package cli

import (
	"context"
	"errors"
)

// runServer is not built yet (placeholder until its part lands).
func runServer(ctx context.Context, args []string, io Stdio) error {
	return errors.New("not built yet")
}
