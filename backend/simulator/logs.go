package simulator

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"gseproc/backend/logtail"
	"gseproc/model"
)

// Simulated logs. A simulated process's stdout, stderr and log file are
// virtual files served through the agent's own tail protocol
// (logtail.Serve): lines of one width, so that any offset names a line
// and nothing is stored. A run's log starts empty at its start (a new
// inode: a follower sees the restart as a reset) and grows while it runs
// (stdout two lines a second, stderr one every five, its file one a
// second); a process that is not running shows its last run's first five
// minutes, no longer growing.

// simLogRun bounds what a run that stopped shows.
const simLogRun = 5 * time.Minute

// simLogMessages are what simulated processes say, by stream.
var simLogMessages = map[model.LogStream][]string{
	model.LogStdout: {"request served in 3ms", "request served in 12ms", "cache hit ratio 0.97",
		"worker heartbeat ok", "connection accepted", "connection closed by peer", "flushed 128 records"},
	model.LogStderr: {"WARN slow upstream response (812ms)", "WARN retrying connection to backend",
		"ERROR request failed: upstream timeout", "WARN queue above 80% capacity"},
	model.LogFile: {"GET /healthz 200", "GET /api/v1/items 200", "POST /api/v1/items 201",
		"GET /static/app.js 304", "GET /api/v1/items/42 404", "PUT /api/v1/items/7 200"},
}

var simLogPeriod = map[model.LogStream]time.Duration{
	model.LogStdout: 500 * time.Millisecond, model.LogStderr: 5 * time.Second, model.LogFile: time.Second,
}

// tail answers a tail request for host i's process through logtail.
func (f *Fleet) tail(ctx context.Context, i int32, h *simHost, req model.AgentRequest) (model.AgentReply, error) {
	tr := *req.Tail
	v := &model.Validator{}
	tr.Validate(v, "tail")
	if err := v.Err(); err != nil {
		return model.AgentReply{Code: model.CodeIllegalOp, Message: model.CodeText(model.CodeIllegalOp) + ": " + err.Error()}, nil
	}
	p := req.Process
	name := ""
	if tr.Stream == model.LogFile {
		if p.Spec.Identity.LogPath == "" {
			return model.AgentReply{Code: model.CodeCommandFailed, Message: p.Key() + " has no log_path: no log files to tail"}, nil
		}
		name = p.Spec.Identity.ProcName + ".log"
		if tr.File != "" && tr.File != name {
			return model.AgentReply{Code: model.CodeCommandFailed,
				Message: fmt.Sprintf("tail.file: %s under log_path %s: no such file (the simulated host has %s)", tr.File, p.Spec.Identity.LogPath, name)}, nil
		}
	}
	src := &simLog{f: f, i: i, h: h, p: p, stream: tr.Stream}
	c, err := logtail.Serve(ctx, src, tr, model.DefaultTailRate)
	if err != nil {
		return model.AgentReply{Code: model.CodeCommandFailed, Message: err.Error()}, nil
	}
	c.Path = name
	if tr.Stream != model.LogFile {
		c.Path = string(tr.Stream) + ".log"
	}
	return model.AgentReply{Code: model.CodeSuccess, Tail: &c}, nil
}

// simLog is one stream of one simulated process.
type simLog struct {
	f      *Fleet
	i      int32
	h      *simHost
	p      model.Process
	stream model.LogStream
}

func (s *simLog) Running() bool {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return s.f.proc(s.i, s.h, &s.p, false).running
}

func (s *simLog) Open() (logtail.Reader, error) {
	s.h.mu.Lock()
	ps := s.f.proc(s.i, s.h, &s.p, false)
	started, running, pid := ps.started, ps.running, ps.pid
	s.h.mu.Unlock()
	r := &simReader{stream: s.stream, started: started, pid: pid, name: s.p.Spec.Identity.ProcName,
		ino: s.f.seed ^ mix(s.f.seed, hLog, uint64(s.i), uint64(started), uint64(len(s.stream)), uint64(len(s.p.Key())))}
	r.width = len(r.line(0))
	if started != 0 {
		end := s.f.now()
		if !running {
			end = time.Unix(0, started).Add(simLogRun)
			if now := s.f.now(); now.Before(end) {
				end = now
			}
		}
		if n := end.Sub(time.Unix(0, started)) / simLogPeriod[s.stream]; n > 0 {
			r.lines = int64(n)
		}
	}
	return r, nil
}

// simReader is a virtual file of lines lines of width bytes each.
type simReader struct {
	stream  model.LogStream
	started int64
	pid     int32
	name    string
	ino     uint64
	width   int
	lines   int64
}

// line is line n of the file (every line the same width).
func (r *simReader) line(n int64) string {
	msgs := simLogMessages[r.stream]
	msg := msgs[mix(r.ino, uint64(n))%uint64(len(msgs))]
	at := time.Unix(0, r.started).Add(time.Duration(n) * simLogPeriod[r.stream]).UTC()
	return fmt.Sprintf("%s %s[%d]: %-40s #%08d\n", at.Format("2006-01-02T15:04:05.000Z"), r.name, r.pid, msg, n+1)
}

func (r *simReader) Stat() (int64, uint64, error) { return r.lines * int64(r.width), r.ino, nil }

func (r *simReader) Close() error { return nil }

func (r *simReader) ReadAt(b []byte, off int64) (int, error) {
	size := r.lines * int64(r.width)
	if off >= size {
		return 0, nil
	}
	var sb strings.Builder
	n := off / int64(r.width)
	skip := int(off % int64(r.width))
	for int64(sb.Len()) < int64(len(b)+skip) && n < r.lines {
		sb.WriteString(r.line(n))
		n++
	}
	k := copy(b, sb.String()[skip:])
	if k < len(b) {
		return k, io.EOF
	}
	return k, nil
}
