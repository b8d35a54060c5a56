package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"gseproc/backend/config"
	"gseproc/backend/logging"
)

// loadConfig loads the config file (path, or the usual places when "") and
// prints its warnings (unknown keys) to io.Err.
func loadConfig(path string, io Stdio) (config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return cfg, err
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(io.Err, "warning:", w)
	}
	return cfg, nil
}

// newLogger builds the slog logger of cfg: level debug, info, warn or error
// (default info), format text or json, to cfg.File when set (appended;
// falling back to w when it cannot be opened) or else to w.
func newLogger(cfg config.LogConfig, w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Level)); err != nil || cfg.Level == "" {
		level = slog.LevelInfo
	}
	var fileErr error
	if cfg.File != "" {
		f, err := os.OpenFile(cfg.File, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
		if err != nil {
			fileErr = err
		} else {
			w = f // the process's lifetime: closed on exit
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if strings.EqualFold(cfg.Format, "json") {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	// A failure that repeats (a route to a dead node is retried 4 times a
	// second) is written once per 30 s, with how often it repeated.
	l := slog.New(logging.RateLimit(h, slog.LevelWarn, 30*time.Second))
	if fileErr != nil {
		l.Warn("log file unusable, logging here instead", "file", cfg.File, "err", fileErr)
	}
	return l
}
