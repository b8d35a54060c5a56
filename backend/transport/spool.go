package transport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"gseproc/model"
)

// spool keeps an agent's events on disk from the moment it publishes them
// until JetStream has acknowledged them, so that an agent killed (or a
// machine restarted) meanwhile publishes them again when it starts: the
// stream and the store keep each id once. It is one append-only file of
// lines, "E <event JSON>" for an event and "A <id>" for one acknowledged
// (or dropped): what is left after the A lines are applied is pending.
// Events are written in batches with one fsync each (writeEvents); A lines
// are not synced (a lost one makes a harmless repeat). The file is emptied
// whenever nothing is pending and rewritten with only the pending events
// when it passes spoolCompactAt and twice what the last rewrite left (so
// that a spool holding more than spoolCompactAt pending, a long outage, is
// not rewritten whole at every acknowledgement). Used by one goroutine
// (the session's).
type spool struct {
	path string
	f    *os.File
	size int64
	kept int64 // the size the last rewrite left
}

// spoolFile is the spool's file name in its directory; spoolCompactAt the
// size beyond which it is rewritten with only the pending events.
const (
	spoolFile      = "events.pending"
	spoolCompactAt = 8 << 20
	spoolMaxLine   = maxEventSize + 1024
)

// openSpool opens (creating it) the spool in dir and returns the events
// it holds pending, oldest first; the file is rewritten with just those.
func openSpool(dir string) (*spool, []model.Event, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("event spool: %w", err)
	}
	s := &spool{path: filepath.Join(dir, spoolFile)}
	pending, err := readSpool(s.path)
	if err != nil {
		return nil, nil, err
	}
	if err := s.rewrite(pending); err != nil {
		return nil, nil, err
	}
	return s, pending, nil
}

// readSpool is the pending events of the spool file at path (none when it
// does not exist). A line that does not parse (the last one, torn by a
// crash mid-write) is skipped.
func readSpool(path string) ([]model.Event, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("event spool: %w", err)
	}
	defer f.Close()
	var order []string
	byID := map[string]model.Event{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), spoolMaxLine)
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("E ")):
			var e model.Event
			if json.Unmarshal(line[2:], &e) != nil || checkEventID(e.ID) != nil {
				continue
			}
			if _, dup := byID[e.ID]; !dup {
				order = append(order, e.ID)
			}
			byID[e.ID] = e
		case bytes.HasPrefix(line, []byte("A ")):
			delete(byID, string(line[2:]))
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		return nil, fmt.Errorf("event spool: read %s: %w", path, err)
	}
	out := make([]model.Event, 0, len(byID))
	for _, id := range order {
		if e, ok := byID[id]; ok {
			out = append(out, e)
			delete(byID, id)
		}
	}
	return out, nil
}

// rewrite replaces the file with the events pending (synced, then
// renamed over it) and appends to it from then on.
func (s *spool) rewrite(pending []model.Event) error {
	var buf bytes.Buffer
	for _, e := range pending {
		if err := appendEventLine(&buf, e); err != nil {
			return err
		}
	}
	tmp := s.path + ".tmp"
	if err := writeSynced(tmp, buf.Bytes()); err != nil {
		return fmt.Errorf("event spool: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("event spool: %w", err)
	}
	if d, err := os.Open(filepath.Dir(s.path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("event spool: %w", err)
	}
	if s.f != nil {
		_ = s.f.Close()
	}
	s.f, s.size, s.kept = f, int64(buf.Len()), int64(buf.Len())
	return nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func appendEventLine(w io.Writer, e model.Event) error {
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("event spool: encode: %w", err)
	}
	_, _ = w.Write([]byte("E "))
	_, _ = w.Write(data)
	_, err = w.Write([]byte("\n"))
	return err
}

// writeEvents appends evs and syncs the file once.
func (s *spool) writeEvents(evs []model.Event) error {
	if len(evs) == 0 {
		return nil
	}
	var buf bytes.Buffer
	for _, e := range evs {
		if err := appendEventLine(&buf, e); err != nil {
			return err
		}
	}
	err := s.append(buf.Bytes())
	if err == nil {
		err = s.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("event spool: write: %w", err)
	}
	return nil
}

// append writes data at the file's end; a write that fails half-way (a
// disk full, a size limit) is cut off, so that no torn line swallows the
// next one.
func (s *spool) append(data []byte) error {
	n, err := s.f.Write(data)
	if err != nil && n > 0 {
		if s.f.Truncate(s.size) == nil {
			n = 0
		}
	}
	s.size += int64(n)
	return err
}

// done records ids as acknowledged (or dropped); none says nothing is
// pending after them, which empties the file. pending is what is: asked
// for only when the file has grown past spoolCompactAt and twice its size
// at the last rewrite, and is rewritten with just that (not at every
// acknowledgement: a backlog of EventBuffer events was copied each time).
func (s *spool) done(ids []string, none bool, pending func() []model.Event) error {
	if len(ids) == 0 {
		return nil
	}
	if none {
		if err := s.f.Truncate(0); err != nil {
			return fmt.Errorf("event spool: truncate: %w", err)
		}
		s.size, s.kept = 0, 0
		return nil
	}
	var buf bytes.Buffer
	for _, id := range ids {
		buf.WriteString("A ")
		buf.WriteString(id)
		buf.WriteByte('\n')
	}
	if err := s.append(buf.Bytes()); err != nil {
		return fmt.Errorf("event spool: write: %w", err)
	}
	if s.size > max(spoolCompactAt, 2*s.kept) {
		return s.rewrite(pending())
	}
	return nil
}

func (s *spool) close() error {
	if s == nil || s.f == nil {
		return nil
	}
	return s.f.Close()
}
