package cli

import (
	"context"
	"errors"
)

// runSim is not built yet (placeholder until its part lands).
func runSim(ctx context.Context, args []string, io Stdio) error { return errors.New("not built yet") }
