package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"gseproc/backend"
	"gseproc/model"
)

// runLogs prints a process's log on a host, following it with -f.
func runLogs(ctx context.Context, args []string, io Stdio) error {
	fs := newFlags("logs", "logs NAMESPACE:NAME --host CLOUD:IP [flags]", io)
	var cf commonFlags
	cf.register(fs)
	var q backend.LogQuery
	var host, stream string
	fs.StringVar(&host, "host", "", "the `host` (cloud:ip)")
	fs.BoolVar(&q.Follow, "f", false, "follow: print new lines as they come, until the process exits (or ctrl+c)")
	fs.BoolVar(&q.Follow, "follow", false, "the same as -f")
	fs.StringVar(&stream, "stream", "stdout", "what to read: `stdout` or stderr (captured by the agent), or file (under the process's log_path)")
	fs.StringVar(&q.File, "file", "", "for --stream file: the `file` under log_path, relative (default: log_path itself when a file, else its newest file)")
	fs.IntVar(&q.Instance, "instance", 0, "the process `instance` (1 when not given)")
	fs.Int64Var(&q.Bytes, "bytes", model.DefaultTailBack, fmt.Sprintf("start `N` bytes before the end (at a line boundary; at most %d)", model.MaxTailBack))
	raw := fs.Bool("raw", false, "print the log as it is, escape sequences and control characters included (default: removed)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("logs", "want one NAMESPACE:NAME")
	}
	q.Process, q.Stream = pos[0], model.LogStream(stream)
	if host == "" {
		return usageError("logs", "--host: required (cloud:ip)")
	}
	if q.Host, err = model.ParseAgentID(host); err != nil {
		return usageError("logs", "--host: %v", err)
	}
	if err := q.Validate(); err != nil {
		return usageError("logs", "%v", err)
	}
	b, closeBackend, err := cf.open(ctx, io)
	if err != nil {
		return err
	}
	defer closeBackend()
	ch, err := b.Logs(ctx, q)
	if err != nil {
		var ve model.ValidationError
		if errors.As(err, &ve) {
			return usageError("logs", "%v", err)
		}
		return err
	}
	for c := range ch {
		if c.Reset {
			fmt.Fprintf(io.Err, "gseproc logs: %s was truncated or replaced (rotated, or the process restarted): from its start\n", cmp.Or(c.Path, string(q.Stream)))
		}
		if c.Error != "" {
			return &ExitError{Code: 1, Err: errors.New(c.Error)}
		}
		data := c.Data
		if !*raw {
			data = model.PlainText(data)
		}
		if _, err := fmt.Fprint(io.Out, data); err != nil {
			return err
		}
		if q.Follow && c.Done() {
			fmt.Fprintf(io.Err, "gseproc logs: %s on %s is not running: end of its log\n", q.Process, q.Host)
		}
	}
	return nil
}
