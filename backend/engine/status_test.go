package engine

import (
	"hash/maphash"
	"reflect"
	"testing"
	"time"

	"gseproc/model"
)

func TestStoreStatus(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	seed := maphash.MakeSeed()
	base := model.ProcStatus{ProcKey: "web:nginx", ProcName: "nginx", State: model.ProcRunning, PID: 42, Hosted: true,
		StartTime: start, ReportTime: 1_700_000_100, CPU: 1.5, Mem: 2.5, MemRSS: 1 << 20, Threads: 3, Version: "1.2"}
	with := func(f func(*model.ProcStatus)) model.ProcStatus {
		s := base
		f(&s)
		return s
	}
	for _, c := range []struct {
		name string
		st   model.ProcStatus
		want bool
	}{
		{"same", base, false},
		{"readings only", with(func(s *model.ProcStatus) {
			s.CPU, s.Mem, s.MemRSS, s.Threads, s.ReportTime = 9, 9, 9, 9, s.ReportTime+60
		}), false},
		{"same start in another zone", with(func(s *model.ProcStatus) { s.StartTime = start.In(time.FixedZone("x", 8*3600)) }), false},
		{"refresh due", with(func(s *model.ProcStatus) { s.ReportTime += statusRefresh }), true},
		{"report time went back", with(func(s *model.ProcStatus) { s.ReportTime-- }), true},
		{"state", with(func(s *model.ProcStatus) { s.State = model.ProcStopped }), true},
		{"pid", with(func(s *model.ProcStatus) { s.PID = 43 }), true},
		{"start", with(func(s *model.ProcStatus) { s.StartTime = start.Add(time.Second) }), true},
		{"hosted", with(func(s *model.ProcStatus) { s.Hosted = false }), true},
		{"restarts", with(func(s *model.ProcStatus) { s.Restarts++ }), true},
		{"exit status", with(func(s *model.ProcStatus) { s.ExitStatus = 1 }), true},
		{"version", with(func(s *model.ProcStatus) { s.Version = "1.3" }), true},
		{"message", with(func(s *model.ProcStatus) { s.Message = "x" }), true},
		{"last start", with(func(s *model.ProcStatus) { s.LastStartTime = 5 }), true},
	} {
		if got := storeStatus(printStatus(seed, &base), printStatus(seed, &c.st)); got != c.want {
			t.Errorf("%s: storeStatus = %v, want %v", c.name, got, c.want)
		}
	}
	if !storeStatus(statusPrint{}, printStatus(seed, &base)) {
		t.Error("a status the store may not have (its write failed): not stored again")
	}
}

// BenchmarkRecordStatus: a status op's result over a fleet whose process
// did not change (only its readings): the status is not stored again.
func BenchmarkRecordStatus(b *testing.B) {
	e := &Engine{statusSeed: maphash.MakeSeed()}
	e.writes.init(false)
	e.statuses.init()
	h := model.Host{IP: "10.0.0.1"}
	st := model.ProcStatus{ProcKey: "web:nginx", ProcName: "nginx", State: model.ProcRunning, PID: 42, Hosted: true,
		StartTime: time.Unix(1_700_000_000, 0), ReportTime: 1_700_000_100, Version: "1.2", Cmdline: "/usr/sbin/nginx -g daemon off;"}
	first := st
	e.recordStatus(h, &first) // stored once (enqueued: the writer is not running)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s := st // each reply's status is its own: the engine keeps it
		s.CPU = float64(i % 100)
		e.recordStatus(h, &s)
	}
}

// TestApplyReplyKeepsStatus: the status a reply carries is completed (key,
// name, report time) and kept as it is by the result of a status op and
// the last known statuses, not copied (Dispatcher: it is the engine's).
func TestApplyReplyKeepsStatus(t *testing.T) {
	end := time.Unix(1_700_000_000, 0)
	sent := &model.ProcStatus{State: model.ProcRunning, PID: 42}
	res := model.Result{ProcKey: "web:nginx"}
	st := applyReply(&res, model.OpStatus, model.AgentReply{Code: model.CodeSuccess, Status: sent}, "nginx", end)
	if st != sent || res.Status != sent {
		t.Fatalf("status kept %p, result's %p; the reply's %p", st, res.Status, sent)
	}
	if *sent != (model.ProcStatus{ProcKey: "web:nginx", ProcName: "nginx", State: model.ProcRunning, PID: 42, ReportTime: end.Unix()}) {
		t.Fatalf("status not completed: %+v", *sent)
	}
	res = model.Result{ProcKey: "web:nginx"}
	other := &model.ProcStatus{ProcKey: "web:nginx", State: model.ProcStopped, PID: -1}
	if st := applyReply(&res, model.OpStop, model.AgentReply{Code: model.CodeSuccess, Status: other}, "nginx", end); st != other || res.Status != nil {
		t.Fatalf("stop: status kept %p (the reply's %p), result's %v (a status op's only)", st, other, res.Status)
	}
}

// TestPrintStatusFields: every field of model.ProcStatus changes its
// print but the readings (cpu, memory, threads, report time), so a field
// added to the status is one printStatus must write (or a reading named
// here).
func TestPrintStatusFields(t *testing.T) {
	readings := map[string]bool{"CPU": true, "Mem": true, "MemRSS": true, "Threads": true, "ReportTime": true}
	seed := maphash.MakeSeed()
	base := model.ProcStatus{ProcKey: "web:nginx", ProcName: "nginx", State: model.ProcRunning, PID: 42, Hosted: true,
		StartTime: time.Unix(1_700_000_000, 5), RegisterTime: 1, LastStartTime: 2, ReportTime: 1_700_000_100, CPU: 1.5, Mem: 2.5,
		MemRSS: 1 << 20, Restarts: 1, ExitStatus: 3, Version: "1.2", Cmdline: "nginx -g", Threads: 3, Message: "m"}
	want := printStatus(seed, &base).said
	typ := reflect.TypeFor[model.ProcStatus]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		st := base
		v := reflect.ValueOf(&st).Elem().Field(i)
		switch {
		case f.Type == reflect.TypeFor[time.Time]():
			v.Set(reflect.ValueOf(base.StartTime.Add(time.Nanosecond)))
		case v.Kind() == reflect.String:
			v.SetString(v.String() + "x")
		case v.Kind() == reflect.Bool:
			v.SetBool(!v.Bool())
		case v.CanInt():
			v.SetInt(v.Int() + 1)
		case v.CanUint():
			v.SetUint(v.Uint() + 1)
		case v.CanFloat():
			v.SetFloat(v.Float() + 1)
		default:
			t.Fatalf("field %s of kind %s: the test does not change it", f.Name, v.Kind())
		}
		if changed := printStatus(seed, &st).said != want; changed == readings[f.Name] {
			t.Errorf("field %s: print changed %v, want %v", f.Name, changed, !readings[f.Name])
		}
	}
	// Two texts are not one: the boundary between fields counts.
	a, b := base, base
	a.ProcKey, a.ProcName = "web:nginxx", "nginx"
	b.ProcKey, b.ProcName = "web:nginx", "xnginx"
	if printStatus(seed, &a).said == printStatus(seed, &b).said {
		t.Error("a byte moved from one text to the next: same print")
	}
}
