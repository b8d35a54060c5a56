package cli

import (
	"context"
	"errors"
)

// runOp is not built yet (placeholder until its part lands).
func runOp(ctx context.Context, args []string, io Stdio) error { return errors.New("not built yet") }

// runHosts is not built yet (placeholder until its part lands).
func runHosts(ctx context.Context, args []string, io Stdio) error { return errors.New("not built yet") }

// runProcs is not built yet (placeholder until its part lands).
func runProcs(ctx context.Context, args []string, io Stdio) error { return errors.New("not built yet") }
