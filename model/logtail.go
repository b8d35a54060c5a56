package model

import (
	"fmt"
	"path"
	"strings"
	"time"
)

// LogStream names what a log tail reads: the standard output or error of
// a process the agent started (captured by the agent to size-capped,
// rotated files in its data dir), or a file under the process's log_path.
type LogStream string

// The log streams.
const (
	LogStdout LogStream = "stdout"
	LogStderr LogStream = "stderr"
	LogFile   LogStream = "file"
)

// Valid reports whether s is one of the log streams.
func (s LogStream) Valid() bool { return s == LogStdout || s == LogStderr || s == LogFile }

// Tail protocol bounds, the same for the agent, the simulator and the
// server that asks them.
const (
	// MaxTailChunk bounds the bytes of one TailChunk.
	MaxTailChunk = 64 << 10
	// MaxTailWait bounds how long an agent holds a follow request open
	// waiting for new bytes.
	MaxTailWait = 5 * time.Second
	// MaxTailBack bounds how far back from the end a tail may start.
	MaxTailBack = 16 << 20
	// DefaultTailBack is how far back a tail starts when not told.
	DefaultTailBack = 8 << 10
	// DefaultTailRate is the bytes per second one stream is served at
	// most, where the agent's configuration does not say.
	DefaultTailRate = 256 << 10
)

// TailRequest asks a host's agent for the next piece of one process's log
// (AgentRequest.Tail; AgentRequest.Process names the process). A follow
// is a chain of requests, each at the Next offset of the last answer: the
// agent keeps no state between them, and answers each at most at its
// tail rate (the chain of one stream is so bounded in bytes per second).
type TailRequest struct {
	Stream LogStream `json:"stream"`
	// File is the file to read under log_path (stream file), relative;
	// empty: log_path itself when it is a file, else the newest regular
	// file directly in it.
	File string `json:"file,omitempty"`
	// Instance is the process instance (1 when 0) of stdout and stderr.
	Instance int `json:"instance,omitempty"`
	// Offset is where to read from: a Next of an earlier answer, or -1 to
	// start Back bytes before the end (at the next line boundary).
	Offset int64 `json:"offset"`
	Back   int64 `json:"back,omitempty"`
	// Inode is the identity of the file Offset belongs to (0: unknown): a
	// file replaced since (rotated) is read again from its start.
	Inode uint64 `json:"inode,omitempty"`
	// Max bounds the answer's bytes (at most MaxTailChunk).
	Max int `json:"max,omitempty"`
	// Wait: with nothing new to read, wait up to this long (at most
	// MaxTailWait) for new bytes, or for the process to exit.
	Wait time.Duration `json:"wait,omitempty"`
}

// TailChunk is an agent's answer to a TailRequest: whole lines (a line
// longer than the chunk, or the last line of a process that is no longer
// running, may come in parts).
type TailChunk struct {
	// Path is the file read (for stream file, relative to log_path).
	Path string `json:"path,omitempty"`
	// Data are the bytes at Offset (invalid UTF-8 replaced); Next is the
	// offset to ask for next.
	Data   string `json:"data"`
	Offset int64  `json:"offset"`
	Next   int64  `json:"next"`
	// Size is the file's size when read, Inode its identity.
	Size  int64  `json:"size"`
	Inode uint64 `json:"inode,omitempty"`
	// Reset: the file was truncated or replaced since the request's
	// offset; reading restarted at its start.
	Reset bool `json:"reset,omitempty"`
	// Running: the process is up, so the log may grow.
	Running bool `json:"running"`
	// Host is the host the chunk is from (filled by the server).
	Host Host `json:"host,omitzero"`
	// Error, on the last chunk of a stream, says why it ended early
	// (the agent unreachable, the request refused).
	Error string `json:"error,omitempty"`
}

// CheckTailChunk checks a chunk an agent answered (untrusted) against
// the tail protocol: it stands for at most MaxTailChunk bytes of the log,
// from Offset (not negative) to Next (not before Offset), and its Data
// are those bytes with invalid UTF-8 replaced (each run of invalid bytes
// by U+FFFD, 3 bytes): at most 3 times as long. A chunk past that is
// refused whole, not clipped: Data cannot be cut so that Next still names
// the first byte not shown (where the replacements were is unknown), and
// a follow would skip or repeat bytes.
func CheckTailChunk(c *TailChunk) error {
	read := c.Next - c.Offset
	switch {
	case c.Offset < 0 || c.Next < c.Offset:
		return fmt.Errorf("chunk from offset %d to next %d: not a range of the log", c.Offset, c.Next)
	case read > MaxTailChunk:
		return fmt.Errorf("chunk of %d bytes of the log (offset %d to next %d), more than %d (model.MaxTailChunk)", read, c.Offset, c.Next, MaxTailChunk)
	case int64(len(c.Data)) > 3*read:
		return fmt.Errorf("chunk data of %d bytes for %d bytes of the log (offset %d to next %d): more than they make with invalid UTF-8 replaced (at most 3 times, %d bytes of the log at most: model.MaxTailChunk)",
			len(c.Data), read, c.Offset, c.Next, MaxTailChunk)
	}
	return nil
}

// Done reports whether a follow ends with c: everything written is read
// and the process is no longer running.
func (c TailChunk) Done() bool { return !c.Running && c.Next >= c.Size }

// CheckLogFile checks a file name relative to a log_path, lexically: not
// absolute, no ".." segment, no NUL, at most 1024 bytes. (The agent also
// refuses one that resolves, through symlinks, outside log_path.)
func CheckLogFile(name string) error {
	switch {
	case len(name) > 1024:
		return fmt.Errorf("%d bytes: longer than 1024", len(name))
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("contains a NUL byte")
	case strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`):
		return fmt.Errorf("%q is absolute: name a file under log_path, relative to it", name)
	}
	for _, seg := range strings.Split(strings.ReplaceAll(name, `\`, "/"), "/") {
		if seg == ".." {
			return fmt.Errorf("%q has a \"..\" segment: it would leave log_path", name)
		}
	}
	if path.Clean("/"+name) == "/" && name != "" {
		return fmt.Errorf("%q names log_path itself: leave it empty", name)
	}
	return nil
}

// Validate checks a request at the entrance: every bad field named
// (prefix names the request).
func (r TailRequest) Validate(v *Validator, prefix string) {
	f := func(s string) string {
		if prefix == "" {
			return s
		}
		return prefix + "." + s
	}
	if !r.Stream.Valid() {
		v.Addf(f("stream"), "%q: want stdout, stderr or file", string(r.Stream))
	}
	if r.File != "" {
		if r.Stream != LogFile {
			v.Add(f("file"), "only for stream file")
		} else if err := CheckLogFile(r.File); err != nil {
			v.Add(f("file"), err.Error())
		}
	}
	if r.Instance < 0 || r.Instance > 1000 {
		v.Addf(f("instance"), "%d is out of range [0,1000]", r.Instance)
	}
	if r.Offset < -1 {
		v.Addf(f("offset"), "%d: want -1 (from the end) or an offset", r.Offset)
	}
	if r.Back < 0 || r.Back > MaxTailBack {
		v.Addf(f("back"), "%d is out of range [0,%d]", r.Back, MaxTailBack)
	}
	if r.Max < 0 || r.Max > MaxTailChunk {
		v.Addf(f("max"), "%d is out of range [0,%d]", r.Max, MaxTailChunk)
	}
	if r.Wait < 0 || r.Wait > MaxTailWait {
		v.Addf(f("wait"), "%s is out of range [0,%s]", r.Wait, MaxTailWait)
	}
}
