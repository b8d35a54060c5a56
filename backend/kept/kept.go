// Package kept keeps small state files whole across crashes: WriteFile
// replaces a file so that a crash leaves the old one or the new one, never
// a part; ID is an identity made once and kept in a file (the agent's id,
// the server's id), so that a restarted process is the same one.
package kept

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// WriteFile replaces path with b: temp file in the same directory, fsync,
// rename, fsync of the directory.
func WriteFile(path string, b []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// ID is the id (what names it in errors) kept in path, one line. The
// first time, when path does not exist, gen makes one and it is kept
// (its directory made too). A file whose id check refuses is an error,
// never replaced: a process does not change identity silently. check
// returns the id in canonical form.
func ID(path, what string, check func(string) (string, error), gen func() (string, error)) (string, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id, err := check(strings.TrimSpace(string(b)))
		if err != nil {
			return "", fmt.Errorf("%s file %s: %w (remove it to have a new one made)", what, path, err)
		}
		return id, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("read %s: %w", what, err)
	}
	id, err := gen()
	if err != nil {
		return "", fmt.Errorf("make %s: %w", what, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("keep %s: %w", what, err)
	}
	if err := WriteFile(path, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("keep %s: %w", what, err)
	}
	return id, nil
}
