package kept

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "id")
	n := 0
	gen := func() (string, error) { n++; return "id-" + strings.Repeat("x", n), nil }
	check := func(s string) (string, error) {
		if !strings.HasPrefix(s, "id-") {
			return "", errors.New("not an id")
		}
		return s, nil
	}
	first, err := ID(path, "test id", check, gen)
	if err != nil || first != "id-x" {
		t.Fatalf("first: %q %v", first, err)
	}
	again, err := ID(path, "test id", check, gen)
	if err != nil || again != first || n != 1 {
		t.Fatalf("again: %q %v (made %d times), want %q kept", again, err, n, first)
	}
	if err := os.WriteFile(path, []byte("damaged\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ID(path, "test id", check, gen); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "remove it") {
		t.Fatalf("damaged file: %v, want its path and what to do", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "damaged\n" {
		t.Fatalf("damaged file replaced: %q", b)
	}
	if _, err := ID(filepath.Join(t.TempDir(), "id"), "test id", check, func() (string, error) { return "", errors.New("no entropy") }); err == nil {
		t.Fatal("make's failure not reported")
	}
}

func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, s := range []string{"one", "two"} {
		if err := WriteFile(path, []byte(s)); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != s {
			t.Fatalf("read %q, want %q", b, s)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d files in the directory, want 1 (no temp file left)", len(ents))
	}
}
