package model

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func checkAuditJSON(t *testing.T, e AuditEntry) {
	t.Helper()
	want, werr := json.Marshal(e)
	got, gerr := AppendAuditJSON([]byte("prefix"), &e)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%+v: AppendAuditJSON error %v, json.Marshal %v", e, gerr, werr)
	}
	if werr == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("AppendAuditJSON differs from json.Marshal:\n got %s\nwant prefix%s", got, want)
	}
}

// TestAuditJSON: the appender writes what json.Marshal writes for an
// operation's entries, a bare one and one with a time json refuses.
func TestAuditJSON(t *testing.T) {
	op := AuditEntry{Seq: 3, Time: time.Date(2026, 11, 24, 7, 25, 0, 5, time.UTC), Actor: Actor{App: "bench", User: "u", Via: "api:gse.operate_proc"},
		Action: AuditOperate, Op: "status", Namespaces: []string{"gse"}, Targets: []string{"name bkmonitorbeat · hosts 0:10.0.0.1"},
		TargetCount: 1, TaskID: "GSETASK:20261124072500:1", Result: AuditOK, Summary: "task created over 1 (host, process) targets"}
	bad := op
	bad.Time = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, e := range []AuditEntry{{}, op, {Actor: Actor{Operator: "<&>"}, Targets: []string{"a", "\xff"}}, bad} {
		checkAuditJSON(t, e)
	}
}

func FuzzAuditJSON(f *testing.F) {
	f.Add("bench", "", "op", "api:x", "operate", "status", "gse", "GSETASK:1", "ok", "created", uint64(3), int64(1_700_000_000), 2)
	f.Add("", "<&>", "\u2028", "", "", "", "", "", "", "\xff", uint64(0), int64(-5), 0)
	f.Fuzz(func(t *testing.T, app, user, operator, via, action, op, ns, task, result, summary string, seq uint64, unix int64, n int) {
		e := AuditEntry{Seq: seq, Time: time.Unix(unix%(1<<35), unix%1e9).In(time.FixedZone("z", int(unix%50000))),
			Actor: Actor{App: app, User: user, Operator: operator, Via: via}, Action: action, Op: op,
			TargetCount: n, TaskID: task, Result: result, Summary: summary}
		if ns != "" {
			e.Namespaces = []string{ns, op}
			e.Targets = []string{summary}
		}
		checkAuditJSON(t, e)
	})
}
