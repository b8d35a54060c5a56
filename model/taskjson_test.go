package model

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func checkTaskJSON(t *testing.T, task Task) {
	t.Helper()
	want, werr := json.Marshal(task)
	got, gerr := AppendTaskJSON([]byte("prefix"), &task)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%+v: AppendTaskJSON error %v, json.Marshal %v", task, gerr, werr)
	}
	if werr == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("AppendTaskJSON differs from json.Marshal:\n got %s\nwant prefix%s", got, want)
	}
}

func sampleTask() Task {
	return Task{ID: "GSETASK:20261124072500:1", Op: OpStatus, Targets: 1, Namespace: []string{"gse"}, Source: "api:gse.operate_proc",
		Operator: "bench", Selection: "name bkmonitorbeat · hosts 0:10.0.0.1", Status: TaskDone,
		Created: time.Date(2026, 11, 24, 7, 25, 0, 123456789, time.UTC), Finished: time.Date(2026, 11, 24, 7, 25, 0, 987654321, time.UTC),
		Counts: Counts{Success: 1}}
}

// TestTaskJSON: the appender writes what json.Marshal writes, for the
// shapes a task takes (fresh, done, with suppliers, a roll left to
// encoding/json, a time json refuses).
func TestTaskJSON(t *testing.T) {
	done := sampleTask()
	fresh := done
	fresh.Finished, fresh.Status, fresh.Counts, fresh.Namespace, fresh.Source, fresh.Operator, fresh.Selection =
		time.Time{}, TaskPending, Counts{Pending: 1}, nil, "", "", ""
	sup := done
	sup.Suppliers = map[string]int{"0:10.0.0.2": 5, "0:10.0.0.1": 3, "<&>": -1}
	sup.Namespace = []string{"a", "b\u2028"}
	roll := done
	roll.Rollout = &Rollout{}
	roll.Roll = &RollState{Batches: 3}
	bad := done
	bad.Created = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	zone := done
	zone.Created = done.Created.In(time.FixedZone("x", 3600+30))
	for _, task := range []Task{{}, done, fresh, sup, roll, bad, zone} {
		checkTaskJSON(t, task)
	}
}

func FuzzTaskJSON(f *testing.F) {
	f.Add("GSETASK:1", "gse", "api:x", "bench", "name a", "done", "0:10.0.0.1", int64(7), int64(1_700_000_000), true)
	f.Add("", "", "", "", "<&>\u2028\xff", "", "\xff", int64(-1), int64(0), false)
	f.Fuzz(func(t *testing.T, id, ns, source, operator, selection, status, supplier string, n, unix int64, finished bool) {
		task := Task{ID: id, Op: OpType(n % 13), Targets: int(n), Source: source, Operator: operator, Selection: selection,
			Status: TaskStatus(status), Created: time.Unix(unix%(1<<35), n%1e9).In(time.FixedZone("z", int(n%50000))),
			Counts: Counts{Pending: int(n), Running: int(-n), Success: int(unix), Failed: 1, Timeout: 2, Unreachable: 3, Cancelled: 4, Skipped: int(n % 7)}}
		if ns != "" {
			task.Namespace = []string{ns, id}
		}
		if supplier != "" {
			task.Suppliers = map[string]int{supplier: int(n), id: int(unix)}
		}
		if finished {
			task.Finished = time.Unix(unix%(1<<35), 0).UTC()
		}
		checkTaskJSON(t, task)
	})
}

func BenchmarkTaskJSON(b *testing.B) {
	task := sampleTask()
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = AppendTaskJSON(buf[:0], &task)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(&task)
		}
	})
}
