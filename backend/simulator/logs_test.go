package simulator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gseproc/model"
)

func simTail(t *testing.T, f *Fleet, h model.Host, p model.Process, tr model.TailRequest) model.AgentReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := f.Dispatch(ctx, h, model.AgentRequest{Process: p, Tail: &tr})
	require.NoError(t, err)
	return r
}

// A simulated process's log is served through the agent's tail protocol:
// whole lines from a line boundary, a follow continues where the last
// answer ended, a restart is a new file, and a stopped process ends it.
func TestSimulatedLogTail(t *testing.T) {
	f := New(quiet(10))
	now := time.Now()
	f.now = func() time.Time { return now }
	h := model.Host{IP: "10.0.0.1", CloudID: 0}
	p := inline("svc")
	p.Spec.Identity.LogPath = "/data/app/logs"
	dispatch(t, f, h, model.OpStart, p)
	now = now.Add(time.Minute)

	r := simTail(t, f, h, p, model.TailRequest{Stream: model.LogStdout, Offset: -1, Back: 1000})
	require.Zero(t, r.Code, r.Message)
	c := *r.Tail
	require.True(t, c.Running)
	require.Greater(t, c.Offset, int64(0))
	lines := strings.Split(strings.TrimSuffix(c.Data, "\n"), "\n")
	require.Greater(t, len(lines), 3)
	require.LessOrEqual(t, len(c.Data), 1000)
	require.Contains(t, lines[len(lines)-1], "#00000120", "a minute at two lines a second")
	for _, l := range lines {
		require.Len(t, l, len(lines[0]), "whole lines, all of one width")
	}

	// Nothing new yet: a follow with no wait answers empty at once.
	r = simTail(t, f, h, p, model.TailRequest{Stream: model.LogStdout, Offset: c.Next, Inode: c.Inode})
	require.Empty(t, r.Tail.Data)
	now = now.Add(2 * time.Second)
	r = simTail(t, f, h, p, model.TailRequest{Stream: model.LogStdout, Offset: c.Next, Inode: c.Inode})
	require.Equal(t, 4, strings.Count(r.Tail.Data, "\n"))
	require.Contains(t, r.Tail.Data, "#00000121")

	// The log file under log_path; another name is refused, an escape too.
	r = simTail(t, f, h, p, model.TailRequest{Stream: model.LogFile, Offset: 0, Max: 200})
	require.Zero(t, r.Code, r.Message)
	require.Equal(t, "svc.log", r.Tail.Path)
	r = simTail(t, f, h, p, model.TailRequest{Stream: model.LogFile, File: "../../etc/passwd", Offset: 0})
	require.Equal(t, model.CodeIllegalOp, r.Code)
	require.Contains(t, r.Message, `".." segment`)

	// A restart is a new file: the follower is told to start over.
	dispatch(t, f, h, model.OpRestart, p)
	now = now.Add(10 * time.Second)
	r = simTail(t, f, h, p, model.TailRequest{Stream: model.LogStdout, Offset: c.Next, Inode: c.Inode})
	require.True(t, r.Tail.Reset)
	require.Contains(t, r.Tail.Data, "#00000001")

	// Stopped: read to its end, the follow is done.
	dispatch(t, f, h, model.OpStop, p)
	r = simTail(t, f, h, p, model.TailRequest{Stream: model.LogStdout, Offset: 0, Wait: 2 * time.Second})
	require.False(t, r.Tail.Running)
	require.True(t, r.Tail.Done())
}
