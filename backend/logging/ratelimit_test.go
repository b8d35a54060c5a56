package logging

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRateLimit(t *testing.T) {
	var buf bytes.Buffer
	h := RateLimit(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), slog.LevelWarn, 30*time.Second)
	log := slog.New(h).With("component", "nats-server")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	emit := func(at time.Duration, level slog.Level, msg string) {
		r := slog.NewRecord(t0.Add(at), level, msg, 0)
		if err := log.Handler().Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	// A route retry error 4 times a second for 40 s, with a changing attempt number.
	for i := range 160 {
		emit(time.Duration(i)*250*time.Millisecond, slog.LevelError, "Error trying to connect to route (attempt "+itoa(i)+"): dial tcp 127.0.0.1:6222: connect: connection refused")
	}
	emit(time.Second, slog.LevelWarn, "another warning")
	emit(2*time.Second, slog.LevelInfo, "info passes")
	emit(3*time.Second, slog.LevelInfo, "info passes")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var routes []string
	for _, l := range lines {
		if strings.Contains(l, "connect to route") {
			routes = append(routes, l)
		}
	}
	if len(routes) != 2 || !strings.Contains(routes[1], "repeated=119") || !strings.Contains(routes[0], "component=nats-server") {
		t.Fatalf("route errors written %d times, want 2 (the second saying repeated=119):\n%s", len(routes), buf.String())
	}
	if strings.Count(buf.String(), "another warning") != 1 || strings.Count(buf.String(), "info passes") != 2 {
		t.Fatalf("other messages:\n%s", buf.String())
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
