package cli

import (
	"context"
	"errors"
)

// runConsole is not built yet (placeholder until its part lands).
func runConsole(ctx context.Context, args []string, io Stdio) error {
	return errors.New("not built yet")
}
