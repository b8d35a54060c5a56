package jsstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gseproc/model"
)

// TestAudit: entries get the stream sequence, come back newest first
// across pages, filter, page back with Before, are bounded by KeepAudit,
// and survive a restart of the NATS server.
func TestAudit(t *testing.T) {
	dir := t.TempDir()
	cfg := natsCfg(t, dir)
	e := startNATS(t, cfg)
	const n, keep = 2*auditPage + 150, 2*auditPage + 100
	s := open(t, e, Options{KeepAudit: keep})
	ctx := tctx(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range n {
		en := model.AuditEntry{Time: t0.Add(time.Duration(i) * time.Second), Action: model.AuditOperate, Result: model.AuditOK,
			Actor: model.Actor{Operator: fmt.Sprintf("op%d", i%100)}, Namespaces: []string{"web"}}
		seq, err := s.AppendAudit(ctx, en)
		if err != nil {
			t.Fatal(err)
		}
		if seq != uint64(i+1) {
			t.Fatalf("entry %d got seq %d", i, seq)
		}
	}
	e.Shutdown()
	s = open(t, startNATS(t, cfg), Options{KeepAudit: keep})

	all, err := s.Audit(ctx, model.AuditQuery{Limit: model.MaxAuditLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != keep || all[0].Seq != n || all[keep-1].Seq != n-keep+1 {
		t.Fatalf("got %d entries %d..%d, want %d newest (%d..%d)", len(all), all[0].Seq, all[len(all)-1].Seq, keep, n, n-keep+1)
	}
	for i, x := range all {
		if want := uint64(n - i); x.Seq != want || x.Actor.Operator != fmt.Sprintf("op%d", (want-1)%100) {
			t.Fatalf("entry %d: %+v, want seq %d", i, x, want)
		}
	}
	// A filter matching one entry in a hundred reads back over pages.
	got, err := s.Audit(ctx, model.AuditQuery{Operator: "op7", Limit: 25})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 21 { // seqs 8, 108, ... within the kept 51..2150
		t.Fatalf("op7: %d entries, want 21", len(got))
	}
	got, err = s.Audit(ctx, model.AuditQuery{Before: 1000, Limit: 3})
	if err != nil || len(got) != 3 || got[0].Seq != 999 || got[2].Seq != 997 {
		t.Fatalf("before 1000: %+v %v", got, err)
	}
	got, err = s.Audit(ctx, model.AuditQuery{Since: t0.Add(time.Duration(n-10) * time.Second), Limit: 100})
	if err != nil || len(got) != 10 {
		t.Fatalf("since the last 10 s: %d entries, %v", len(got), err)
	}
}

// BenchmarkAudit: one entry appended (a publish acknowledged by the
// stream), and a filtered query reading back over pages.
func BenchmarkAudit(b *testing.B) {
	e := startNATS(b, natsCfg(b, b.TempDir()))
	s := open(b, e, Options{Memory: true})
	ctx := context.Background()
	en := model.AuditEntry{Time: time.Now(), Action: model.AuditOperate, Result: model.AuditOK, Op: "restart",
		Actor: model.Actor{App: "app", User: "u", Operator: "op", Via: "api:v1.operate"}, Namespaces: []string{"web"},
		Targets: []string{"namespace=web label=app=nginx"}, TargetCount: 5000, TaskID: "GSETASK:20260101000000:1"}
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.AppendAudit(ctx, en); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("query-3-pages", func(b *testing.B) {
		for range 3 * auditPage {
			if _, err := s.AppendAudit(ctx, en); err != nil {
				b.Fatal(err)
			}
		}
		for b.Loop() {
			if _, err := s.Audit(ctx, model.AuditQuery{Operator: "nobody"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
