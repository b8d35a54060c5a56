package ui_test

import (
	"context"
	"io"
	"log/slog"

	"gseproc/backend/node"
	"gseproc/ui"
)

func init() {
	ui.PaceMemory = func(ctx context.Context) func() {
		return node.PaceMemory(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
}
