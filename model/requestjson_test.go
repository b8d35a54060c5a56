package model

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// checkRequestJSON: AppendRequestJSON of r, with ProcessJSON as its
// process's encoding, writes what json.Marshal writes.
func checkRequestJSON(t *testing.T, r AgentRequest) {
	t.Helper()
	pj, err := json.Marshal(r.Process)
	if err != nil {
		t.Fatal(err)
	}
	r.ProcessJSON = pj
	want, werr := json.Marshal(r)
	got, gerr := AppendRequestJSON([]byte("prefix"), &r)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%+v: AppendRequestJSON error %v, json.Marshal %v", r, gerr, werr)
	}
	if werr != nil {
		return
	}
	if !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("AppendRequestJSON differs from json.Marshal:\n got %s\nwant prefix%s", got, want)
	}
	if !bytes.Contains(want, pj) {
		t.Fatalf("the request's encoding does not hold its process's: %s", want)
	}
}

func sampleRequest() AgentRequest {
	return AgentRequest{TaskID: "GSETASK:20260101000000:7", OpID: OpID("GSETASK:20260101000000:7", Host{IP: "10.0.0.1"}, "web:nginx"),
		Op: OpRestart, Deadline: time.Date(2026, 1, 1, 0, 0, 30, 123456789, time.UTC),
		Process: Process{Meta: Meta{Namespace: "web", Name: "nginx", Labels: Labels{"app": "nginx", "<x>": "&"}},
			Spec: Spec{Identity: Identity{ProcName: "nginx", SetupPath: "/usr/sbin"}}}}
}

// The usual requests are written by the appender itself; a group's, a
// tail's, or one without ProcessJSON by encoding/json, alike.
func TestRequestJSON(t *testing.T) {
	r := sampleRequest()
	checkRequestJSON(t, r)
	r.OpID, r.Deadline, r.CancelOp = "", time.Time{}, true
	checkRequestJSON(t, r)
	r.Group = &ProcessGroup{Namespace: "web"}
	checkRequestJSON(t, r)
	r.Group, r.Tail = nil, &TailRequest{}
	checkRequestJSON(t, r)
	r = sampleRequest()
	want, _ := json.Marshal(r)
	if got, err := AppendRequestJSON(nil, &r); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("without ProcessJSON: %s, %v; want %s", got, err, want)
	}
	// ProcessJSON is what goes out: a request carrying another process's
	// encoding sends that one (the sender's promise, not checked).
	r.ProcessJSON = []byte(`{"meta":{"namespace":"other"}}`)
	got, err := AppendRequestJSON(nil, &r)
	if err != nil || !bytes.Contains(got, r.ProcessJSON) {
		t.Fatalf("ProcessJSON not sent: %s, %v", got, err)
	}
	var back AgentRequest
	if err := json.Unmarshal(got, &back); err != nil || back.Process.Meta.Namespace != "other" || back.OpID != r.OpID || !back.Deadline.Equal(r.Deadline) {
		t.Fatalf("decoded %+v, %v", back, err)
	}
}

// FuzzRequestJSON: AppendRequestJSON writes what json.Marshal writes.
func FuzzRequestJSON(f *testing.F) {
	f.Add("GSETASK:1", "op/1", "web", "nginx", "/opt/x", int64(7), int64(1_700_000_000), true)
	f.Add("<&>\u2028\xff", "", "", "\"", "", int64(-1), int64(0), false)
	f.Fuzz(func(t *testing.T, task, opID, ns, name, path string, n, unix int64, cancel bool) {
		r := AgentRequest{TaskID: task, OpID: opID, Op: OpType(n % 13), CancelOp: cancel,
			Process: Process{Meta: Meta{Namespace: ns, Name: name, Labels: Labels{name: task}}, Spec: Spec{Identity: Identity{ProcName: name, SetupPath: path}}}}
		if unix%3 != 0 {
			r.Deadline = time.Unix(unix%(1<<35), n%1e9).In(time.FixedZone("z", int(n%50000)))
		}
		checkRequestJSON(t, r)
	})
}

func BenchmarkRequestJSON(b *testing.B) {
	r := sampleRequest()
	pj, _ := json.Marshal(r.Process)
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		r := r
		r.ProcessJSON = pj
		var buf []byte
		for b.Loop() {
			buf, _ = AppendRequestJSON(buf[:0], &r)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(r)
		}
	})
}
