package cli

import (
	"context"
	"errors"
)

// runAgent is not built yet (placeholder until its part lands).
func runAgent(ctx context.Context, args []string, io Stdio) error { return errors.New("not built yet") }
