package model

import (
	"strings"
	"testing"
	"time"
)

func TestAuditQueryMatch(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e := AuditEntry{Seq: 10, Time: t0, Actor: Actor{App: "a", User: "u", Operator: "o", Via: "ssh"}, Action: AuditOperate,
		Op: "stop", Namespaces: []string{"db", "web"}, TaskID: "T1", Result: AuditOK}
	cases := []struct {
		name string
		q    AuditQuery
		want bool
	}{
		{"empty", AuditQuery{}, true},
		{"since equal", AuditQuery{Since: t0}, true},
		{"since after", AuditQuery{Since: t0.Add(time.Nanosecond)}, false},
		{"until equal", AuditQuery{Until: t0}, false},
		{"until after", AuditQuery{Until: t0.Add(time.Second)}, true},
		{"before seq", AuditQuery{Before: 10}, false},
		{"before next", AuditQuery{Before: 11}, true},
		{"app", AuditQuery{App: "a"}, true},
		{"other app", AuditQuery{App: "b"}, false},
		{"user", AuditQuery{User: "x"}, false},
		{"operator", AuditQuery{Operator: "o"}, true},
		{"one of the namespaces", AuditQuery{Namespace: "web"}, true},
		{"no such namespace", AuditQuery{Namespace: "we"}, false},
		{"action", AuditQuery{Action: AuditCancel}, false},
		{"op", AuditQuery{Op: "stop"}, true},
		{"task", AuditQuery{TaskID: "T2"}, false},
		{"result", AuditQuery{Result: AuditRefused}, false},
		{"all at once", AuditQuery{App: "a", User: "u", Operator: "o", Namespace: "db", Action: AuditOperate, Op: "stop", TaskID: "T1", Result: AuditOK}, true},
	}
	for _, c := range cases {
		if got := c.q.Match(e); got != c.want {
			t.Errorf("%s: Match = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestAuditQueryValidate(t *testing.T) {
	t0 := time.Now()
	cases := []struct {
		q      AuditQuery
		fields string
	}{
		{AuditQuery{}, ""},
		{AuditQuery{Limit: MaxAuditLimit}, ""},
		{AuditQuery{Limit: MaxAuditLimit + 1}, "limit"},
		{AuditQuery{Limit: -1}, "limit"},
		{AuditQuery{Since: t0, Until: t0}, "until"},
		{AuditQuery{Action: "explode", Result: "meh"}, "action,result"},
		{AuditQuery{Operator: "a\x00b", App: " x", User: strings.Repeat("u", MaxActorField+1), Namespace: "\xff"}, "app,user,operator,namespace"},
	}
	for _, c := range cases {
		v := &Validator{}
		c.q.ValidateInto(v)
		if got := strings.Join(v.Errors().Fields(), ","); got != c.fields {
			t.Errorf("%+v: fields %q, want %q", c.q, got, c.fields)
		}
	}
}

func TestCapTargets(t *testing.T) {
	names := make([]string, MaxAuditTargets+7)
	got := CapTargets(names)
	if len(got) != MaxAuditTargets+1 || got[MaxAuditTargets] != "... and 7 more" {
		t.Fatalf("CapTargets: %d names, last %q", len(got), got[len(got)-1])
	}
	if got := CapTargets(names[:3]); len(got) != 3 {
		t.Fatalf("short list changed: %v", got)
	}
}
