package jsstore

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go/jetstream"

	"gseproc/model"
)

// packTask is a store with a running status task over 1,200 targets.
func packTask(t *testing.T) (s *Store, ctx context.Context, now time.Time, tk model.Task, tgs []model.Target) {
	t.Helper()
	s = open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{})
	ctx = tctx(t)
	now = time.Now().UTC().Truncate(time.Second)
	seq, err := s.NextSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tgs = targets(1200)
	tk = model.Task{ID: model.FormatTaskID(now, seq), Op: model.OpStatus, Targets: len(tgs), Status: model.TaskRunning, Created: now}
	if err := s.PutTask(ctx, tk, tgs); err != nil {
		t.Fatal(err)
	}
	return s, ctx, now, tk, tgs
}

// resultsState is the results bucket's stream state now.
func resultsState(t *testing.T, ctx context.Context, s *Store) jetstream.StreamState {
	t.Helper()
	st, err := s.kvStream(ctx, s.on().results)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}

// TestResultPacks: results written together are stored in packs, a few
// messages for many results; Results and WatchResults read them, and a
// result stored later for a target (alone or in a later pack) wins over
// the pack that held its first one. A result stored under its target's
// own key, as every result was before packs, is read alongside.
func TestResultPacks(t *testing.T) {
	s, ctx, now, tk, tgs := packTask(t)
	result := func(i int, msg string) model.Result {
		return model.Result{TaskID: tk.ID, Host: tgs[i].Host, ProcKey: tgs[i].ProcKey, State: model.StateSuccess,
			Seq: int64(i + 1), Message: msg + " " + strconv.Itoa(i) + " " + string(make([]byte, 300))}
	}
	msgs := func() uint64 { return resultsState(t, ctx, s).Msgs }
	before := msgs()

	// Every target but the last 100, in one call: more than packBytes, so
	// several packs, each far fewer messages than results.
	var first []model.Result
	for i := range len(tgs) - 100 {
		first = append(first, result(i, "first"))
	}
	if err := s.PutResults(ctx, first); err != nil {
		t.Fatal(err)
	}
	stored := msgs() - before
	if stored < 2 || stored > 10 {
		t.Fatalf("%d results stored as %d messages, want a few packs (2..10)", len(first), stored)
	}
	// Target 7 again, alone; targets 8 and 9 again in a later pack; the
	// last 100 targets, the first of them as the old layout stored it.
	if err := s.PutResult(ctx, result(7, "again")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutResults(ctx, []model.Result{result(8, "again"), result(9, "again")}); err != nil {
		t.Fatal(err)
	}
	old := result(1100, "old layout")
	data, err := model.AppendResultJSON(nil, &old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.on().results.Put(ctx, enc(tk.ID)+".1100", data); err != nil {
		t.Fatal(err)
	}
	var last []model.Result
	for i := 1101; i < len(tgs); i++ {
		last = append(last, result(i, "last"))
	}
	if err := s.PutResults(ctx, last); err != nil {
		t.Fatal(err)
	}
	want := func(i int) string {
		switch {
		case i >= 7 && i <= 9:
			return result(i, "again").Message
		case i == 1100:
			return old.Message
		case i > 1100:
			return result(i, "last").Message
		}
		return result(i, "first").Message
	}

	rs, err := s.Results(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(tgs) {
		t.Fatalf("%d results, want %d", len(rs), len(tgs))
	}
	for i, r := range rs {
		if r.Host != tgs[i].Host || r.Message != want(i) || r.Seq != int64(i+1) || r.State != model.StateSuccess {
			t.Fatalf("result %d: %s %q seq %d %s, want %s %q", i, r.Host, r.Message[:20], r.Seq, r.State, tgs[i].Host, want(i)[:20])
		}
	}

	// A watch of the task: every target's latest result comes (earlier
	// ones of a target may come too, in no particular order); it ends
	// once the task is stored complete.
	tk.Status, tk.Finished = model.TaskDone, now
	if err := s.UpdateTask(ctx, tk); err != nil {
		t.Fatal(err)
	}
	ch, err := s.WatchResults(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]map[string]bool{}
	for r := range ch {
		i := int(r.Seq - 1)
		if seen[i] == nil {
			seen[i] = map[string]bool{}
		}
		seen[i][r.Message] = true
	}
	for i := range tgs {
		if !seen[i][want(i)] {
			t.Fatalf("watch: target %d's latest result not sent (got %d of its results)", i, len(seen[i]))
		}
	}
}

// TestResultPacksCompressed: packs are stored compressed (an op's
// results are most of what it writes, and the file store holds what is
// written in memory a while), so the results bucket grows by a fraction
// of the results' JSON; they read back whole. A pack written
// uncompressed, as before, is read alongside.
func TestResultPacksCompressed(t *testing.T) {
	s, ctx, now, tk, tgs := packTask(t)
	result := func(i int) model.Result {
		return model.Result{TaskID: tk.ID, Host: tgs[i].Host, ProcKey: tgs[i].ProcKey, State: model.StateSuccess, Seq: int64(i + 1),
			Message: "success", Proc: model.ResultProc{ProcName: "nginx", SetupPath: "/usr/local/nginx", FuncID: "nginx"},
			Status: &model.ProcStatus{ProcKey: tgs[i].ProcKey, ProcName: "nginx", State: model.ProcRunning, PID: 1000 + i,
				StartTime: now.Add(-time.Duration(i) * time.Second), Cmdline: "/usr/local/nginx/sbin/nginx -c /etc/nginx/nginx.conf"},
			Started: now, Finished: now.Add(time.Duration(i) * time.Millisecond)}
	}
	stored := func() uint64 { return resultsState(t, ctx, s).Bytes }
	before := stored()
	var rs []model.Result
	text := 0 // the results' JSON
	for i := range len(tgs) - 1 {
		r := result(i)
		data, err := model.AppendResultJSON(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		text += len(data)
		rs = append(rs, r)
	}
	if err := s.PutResults(ctx, rs); err != nil {
		t.Fatal(err)
	}
	if grew := stored() - before; grew > uint64(text)/2 {
		t.Fatalf("%d results of %d bytes of JSON stored in %d bytes, want under half", len(rs), text, grew)
	}
	// The last target's result in a pack as packs were written before.
	last := result(len(tgs) - 1)
	data, err := model.AppendResultJSON(nil, &last)
	if err != nil {
		t.Fatal(err)
	}
	old := `[{"i":` + strconv.Itoa(len(tgs)-1) + `,"r":` + string(data) + `}]`
	if _, err := s.on().results.Put(ctx, enc(tk.ID)+".p00000000000000ff", []byte(old)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Results(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(tgs) {
		t.Fatalf("%d results, want %d", len(got), len(tgs))
	}
	for i, r := range got {
		want := result(i)
		if r.Host != want.Host || r.Seq != want.Seq || r.Status == nil || r.Status.PID != want.Status.PID || r.Status.Cmdline != want.Status.Cmdline ||
			!r.Finished.Equal(want.Finished) {
			t.Fatalf("result %d: %+v, want %+v", i, r, want)
		}
	}
}

// TestUnpack: a compressed pack's value is refused, not allocated, when
// it is corrupt or says it holds more than a pack may. The length is
// refused by its bound before decoding (bound): s2.Decode also refuses
// that value as corrupt, but only once it has allocated the 64 MiB it
// claims.
func TestUnpack(t *testing.T) {
	huge := binary.AppendUvarint(nil, maxPackText+1)
	for _, tc := range []struct {
		name  string
		value []byte
		ok    bool
		bound bool // refused by maxPackText, not by the decoder
	}{
		{"a pack", s2.Encode(nil, []byte(`[{"i":0,"r":{}}]`)), true, false},
		{"empty", nil, false, false},
		{"not compressed", []byte(`[{"i":0,"r":{}}]`), false, false},
		{"longer than a pack may be", append(huge, 0, 0, 0), false, true},
	} {
		_, err := unpack(tc.value)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok %v", tc.name, err, tc.ok)
		}
		if tc.bound && (errors.Is(err, s2.ErrCorrupt) || !strings.Contains(err.Error(), "more than")) {
			t.Errorf("%s: err %v, want it refused by its length's bound before decoding", tc.name, err)
		}
	}
}
