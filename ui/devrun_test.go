package ui

import (
	"context"
	"os"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"gseproc/backend/config"
	"gseproc/theme"
)

// TestDevRun runs the console on this terminal (GSEPROC_DEVRUN=1 only).
func TestDevRun(t *testing.T) {
	if os.Getenv("GSEPROC_DEVRUN") == "" {
		t.Skip("interactive")
	}
	lipgloss.SetColorProfile(lipgloss.DefaultRenderer().Output().EnvColorProfile())
	cfg := config.Default()
	e, _ := simBackend(t, cfg.Simulator)
	th, _ := theme.New(os.Getenv("GSEPROC_THEME"), nil, false)
	m, err := New(context.Background(), Options{Backend: e, Config: cfg.Console, Theme: th})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tea.NewProgram(m, tea.WithAltScreen()).Run(); err != nil {
		t.Fatal(err)
	}
}
