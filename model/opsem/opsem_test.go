package opsem

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"gseproc/model"
)

var all = Commands{Start: true, Stop: true, Restart: true, Reload: true, Kill: true}

// before builds the input for a resident process with one instance.
func before(state model.ProcState, hosted bool) Before {
	b := Before{State: state, Instances: 1, Hosted: hosted, Type: model.AutoResident}
	if state.Up() {
		b.Live = 1
	}
	b.Pending = state == model.ProcBackoff
	return b
}

func TestDecideEveryOpInEveryState(t *testing.T) {
	states := []model.ProcState{model.ProcStopped, model.ProcStarting, model.ProcRunning, model.ProcBackoff,
		model.ProcStopping, model.ProcExited, model.ProcFatal}
	type want struct {
		action  Action
		code    int
		hosting Hosting
		state   model.ProcState
	}
	// expect is the table, written out per op: what op does in state s,
	// hosted h. Each row says it in words first.
	expect := func(op model.OpType, s model.ProcState, h bool) want {
		live := s.Up()
		switch {
		case !op.Valid():
			return want{Answer, model.CodeIllegalOp, Keep, ""}
		case op == model.OpStatus:
			return want{Answer, 0, Keep, ""}
		case s == model.ProcStopping: // a stop is under way: GSE's 1015012
			return want{Answer, model.CodeStopping, Keep, ""}
		}
		switch op {
		case model.OpStart:
			if live {
				return want{Answer, model.CodeAlreadyRunning, Keep, ""}
			}
			return want{Start, 0, On, model.ProcRunning}
		case model.OpStop, model.OpKill:
			act := Stop
			if op == model.OpKill {
				act = Kill
			}
			switch {
			case live:
				return want{act, 0, Off, model.ProcStopped}
			case s == model.ProcBackoff:
				return want{CancelRestart, 0, Off, model.ProcStopped}
			}
			return want{Answer, model.CodeNotRunning, Keep, ""}
		case model.OpRegister:
			if h {
				return want{Answer, model.CodeAlreadyRegistered, Keep, ""}
			}
			return want{Host, 0, On, ""}
		case model.OpUnregister:
			if !h {
				return want{Answer, model.CodeNotRunning, Keep, ""}
			}
			if s == model.ProcBackoff || s == model.ProcFatal {
				return want{Unhost, 0, Off, model.ProcStopped}
			}
			return want{Unhost, 0, Off, ""}
		case model.OpRestart:
			return want{RestartCmd, 0, Keep, model.ProcRunning}
		case model.OpReload:
			if live {
				return want{Reload, 0, Keep, ""}
			}
			return want{Answer, model.CodeNotRunning, Keep, ""}
		}
		panic(op)
	}
	ops := append(model.AllOps(), 5, 99)
	n := 0
	for _, op := range ops {
		for _, s := range states {
			for _, h := range []bool{false, true} {
				n++
				t.Run(fmt.Sprintf("%s/%s/hosted=%v", op, s, h), func(t *testing.T) {
					w := expect(op, s, h)
					d := Decide(op, before(s, h), all, "nginx")
					if d.Action != w.action || d.Code != w.code || d.Hosting != w.hosting || d.State != w.state {
						t.Fatalf("got %s code %d hosting %s state %q, want %s %d %s %q",
							d.Action, d.Code, d.Hosting, d.State, w.action, w.code, w.hosting, w.state)
					}
					if (d.Code != 0) != (d.Message != "") {
						t.Fatalf("code %d with message %q", d.Code, d.Message)
					}
					// What settling does: success applies, a failure changes no hosting.
					r := d.Settle(0)
					if r.Code != w.code || r.Hosting != w.hosting {
						t.Fatalf("settle(0) = %+v", r)
					}
					if d.Action.Runs() {
						for _, code := range []int{model.CodeCommandFailed, model.CodePostCheckFailed, model.CodeTimeout} {
							if r := d.Settle(code); r.Code != code || r.Hosting != Keep {
								t.Fatalf("settle(%d) = %+v", code, r)
							}
						}
					}
				})
			}
		}
	}
	if n != 10*7*2 {
		t.Fatalf("%d cases", n)
	}
}

func TestDecideDetails(t *testing.T) {
	tests := []struct {
		name string
		op   model.OpType
		b    Before
		c    Commands
		want Decision
	}{
		{"start of a partly running process starts the rest", model.OpStart,
			Before{State: model.ProcRunning, Live: 1, Instances: 3, Type: model.AutoResident}, all,
			Decision{Action: Start, Hosting: On, State: model.ProcRunning, ResetRetries: true}},
		{"start of a scheduled periodic job: it counts as running", model.OpStart,
			Before{State: model.ProcExited, Instances: 1, Hosted: true, Scheduled: true, Type: model.AutoPeriodic}, all,
			Decision{Code: model.CodeAlreadyRunning}},
		{"stop of a scheduled periodic job between runs ends the schedule", model.OpStop,
			Before{State: model.ProcExited, Instances: 1, Hosted: true, Scheduled: true, Type: model.AutoPeriodic}, all,
			Decision{Action: Stop, Hosting: Off, State: model.ProcStopped, Schedule: Off}},
		{"start of a periodic job starts its schedule", model.OpStart,
			Before{State: model.ProcStopped, Instances: 1, Type: model.AutoPeriodic}, all,
			Decision{Action: Start, Hosting: On, State: model.ProcRunning, Schedule: On, ResetRetries: true}},
		{"start without start_cmd", model.OpStart, before(model.ProcStopped, false), Commands{},
			Decision{Code: model.CodeCommandFailed}},
		{"restart without restart_cmd: stop, then start", model.OpRestart, before(model.ProcRunning, true), Commands{Start: true},
			Decision{Action: StopStart, State: model.ProcRunning, ResetRetries: true}},
		{"restart with neither command", model.OpRestart, before(model.ProcRunning, true), Commands{},
			Decision{Code: model.CodeCommandFailed}},
		{"restart of a hosted periodic job restarts its schedule", model.OpRestart,
			Before{State: model.ProcRunning, Live: 1, Instances: 1, Hosted: true, Type: model.AutoPeriodic}, all,
			Decision{Action: RestartCmd, State: model.ProcRunning, Schedule: On, ResetRetries: true}},
		{"register of a resident process that is down: the restart policy brings it up", model.OpRegister,
			before(model.ProcStopped, false), all,
			Decision{Action: Host, Hosting: On, Supervise: true, ResetRetries: true}},
		{"register of a running resident process: nothing to bring up", model.OpRegister,
			before(model.ProcRunning, false), all,
			Decision{Action: Host, Hosting: On, ResetRetries: true}},
		{"register of a periodic job starts its schedule", model.OpRegister,
			Before{State: model.ProcStopped, Instances: 1, Type: model.AutoPeriodic}, all,
			Decision{Action: Host, Hosting: On, Schedule: On}},
		{"register of a one-shot job hosts it only", model.OpRegister,
			Before{State: model.ProcExited, Instances: 1, Type: model.AutoOneShot}, all,
			Decision{Action: Host, Hosting: On}},
		{"unregister of a hosted periodic job ends its schedule", model.OpUnregister,
			Before{State: model.ProcExited, Instances: 1, Hosted: true, Scheduled: true, Type: model.AutoPeriodic}, all,
			Decision{Action: Unhost, Hosting: Off, Schedule: Off}},
		{"reload without reload_cmd: SIGHUP", model.OpReload, before(model.ProcRunning, true), Commands{},
			Decision{Action: Reload}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.op, tc.b, tc.c, "x")
			tc.want.Op = tc.op
			got.Message = ""
			if got != tc.want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestMessagesSpeakGSE(t *testing.T) {
	for _, tc := range []struct {
		op   model.OpType
		b    Before
		want string
	}{
		{model.OpStop, before(model.ProcStopped, false), "no need to stop the process(nginx) that is not running"},
		{model.OpKill, before(model.ProcStopped, false), "no need to kill the process(nginx) that is not running"},
		{model.OpStart, before(model.ProcRunning, false), "no need to start the process(nginx) that is already running"},
		{model.OpUnregister, before(model.ProcRunning, false), "no need to unregister the process(nginx) that is not hosted"},
		{model.OpRegister, before(model.ProcRunning, true), "Fail to register, for the process info already exists."},
		{model.OpType(5), before(model.ProcRunning, true), "op_type 5 is not one of 0,1,2,3,4,7,8,9"},
	} {
		if got := Decide(tc.op, tc.b, all, "nginx").Message; !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.op, got, tc.want)
		}
	}
}

func TestSettleFailures(t *testing.T) {
	tests := []struct {
		name  string
		op    model.OpType
		b     Before
		c     Commands
		code  int
		state model.ProcState
	}{
		{"a failed start leaves it stopped", model.OpStart, before(model.ProcStopped, false), all, model.CodeCommandFailed, model.ProcStopped},
		{"a start that does not come up leaves it stopped", model.OpStart, before(model.ProcStopped, true), all, model.CodePostCheckFailed, model.ProcStopped},
		{"restart_cmd failing leaves the old process as it was", model.OpRestart, before(model.ProcRunning, true), all, model.CodeCommandFailed, ""},
		{"restart_cmd that does not come up: stopped", model.OpRestart, before(model.ProcRunning, true), all, model.CodePostCheckFailed, model.ProcStopped},
		{"stop then a start that fails: stopped", model.OpRestart, before(model.ProcRunning, true), Commands{Start: true}, model.CodeCommandFailed, model.ProcStopped},
		{"a failed stop leaves it as it was", model.OpStop, before(model.ProcRunning, true), all, model.CodePostCheckFailed, ""},
		{"a failed reload leaves it as it was", model.OpReload, before(model.ProcRunning, true), all, model.CodeCommandFailed, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Decide(tc.op, tc.b, tc.c, "x").Settle(tc.code)
			if r != (Result{Code: tc.code, State: tc.state}) {
				t.Fatalf("%+v", r)
			}
		})
	}
}

func TestRestartPolicy(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := Policy{Retries: 3, Base: 100 * time.Millisecond, Max: time.Second, StableAfter: 10 * time.Second, Jitter: 0.2}
	resident := func(now time.Time) Exit {
		return Exit{Status: 1, Hosted: true, Type: model.AutoResident, Now: now}
	}
	type step struct {
		name    string
		exit    Exit
		started bool // the restart came up at exit.Now (before the next event)
		verdict Verdict
		delay   time.Duration
		attempt int
		state   model.ProcState
	}
	// One instance's life: each step is an event and the policy's answer.
	steps := []step{
		{"crash after a long run: restart at once", resident(t0), false, Restart, 0, 1, model.ProcBackoff},
		{"the restart failed: wait base", Exit{Status: -1, StartFailed: true, Hosted: true, Type: model.AutoResident, Now: t0}, true, Restart, 100 * time.Millisecond, 2, model.ProcBackoff},
		{"up, died at once: twice base", resident(t0.Add(time.Second)), true, Restart, 200 * time.Millisecond, 3, model.ProcBackoff},
		{"died again within stable_after: given up", resident(t0.Add(2 * time.Second)), false, GiveUp, 0, 3, model.ProcFatal},
	}
	var tr Tracker
	tr = tr.Started(t0.Add(-time.Hour))
	for _, s := range steps {
		next, nt := p.OnExit(tr, s.exit, 0.5)
		if next.Verdict != s.verdict || next.Delay != s.delay || next.Attempt != s.attempt || next.State != s.state {
			t.Fatalf("%s: got %+v", s.name, next)
		}
		tr = nt
		if s.started {
			tr = tr.Started(s.exit.Now)
		}
	}

	// Staying up for stable_after resets the count.
	tr = Tracker{Attempts: 3}.Started(t0)
	if next, nt := p.OnExit(tr, resident(t0.Add(10*time.Second)), 0.5); next.Verdict != Restart || next.Delay != 0 || nt.Attempts != 1 {
		t.Fatalf("after a stable run: %+v %+v", next, nt)
	}
	// start_interval wins over the base.
	pi := p
	pi.Interval, pi.Max = 3*time.Second, time.Minute
	if next, _ := pi.OnExit(Tracker{Attempts: 1}, resident(t0), 0.5); next.Delay != 3*time.Second {
		t.Fatalf("start_interval: %s", next.Delay)
	}
	// Jitter stays within +-20%.
	lo, _ := p.OnExit(Tracker{Attempts: 2}, resident(t0), 0)
	hi, _ := p.OnExit(Tracker{Attempts: 2}, resident(t0), 0.999)
	if lo.Delay != 160*time.Millisecond || hi.Delay < 239*time.Millisecond || hi.Delay > 240*time.Millisecond {
		t.Fatalf("jitter: %s %s", lo.Delay, hi.Delay)
	}

	leave := []struct {
		name string
		e    Exit
		want Verdict
	}{
		{"not hosted", Exit{Status: 1, Type: model.AutoResident, Now: t0}, Leave},
		{"held over a limit", Exit{Status: 1, Hosted: true, Held: true, Type: model.AutoResident, Now: t0}, Leave},
		{"a periodic run ended", Exit{Status: 3, Hosted: true, Type: model.AutoPeriodic, Now: t0}, Leave},
		{"a one-shot exited 0", Exit{Status: 0, Hosted: true, Type: model.AutoOneShot, Now: t0}, Done},
		{"a one-shot not our child", Exit{Status: -1, Hosted: true, Type: model.AutoOneShot, Now: t0}, Done},
		{"a one-shot failed: retried", Exit{Status: 4, Hosted: true, Type: model.AutoOneShot, Now: t0}, Restart},
		{"a one-shot whose restart failed: retried", Exit{Status: -1, StartFailed: true, Hosted: true, Type: model.AutoOneShot, Now: t0}, Restart},
	}
	for _, l := range leave {
		if next, _ := p.OnExit(Tracker{}, l.e, 0.5); next.Verdict != l.want {
			t.Errorf("%s: %s, want %s", l.name, next.Verdict, l.want)
		}
	}
	// Retries 0: the first exit gives up.
	if next, _ := (Policy{}).OnExit(Tracker{}, resident(t0), 0.5); next.Verdict != GiveUp {
		t.Fatalf("retries 0: %s", next.Verdict)
	}
}

func TestConformanceTableIsWellFormed(t *testing.T) {
	for _, c := range Conformance {
		if len(c.Steps) == 0 || c.Given == "" {
			t.Fatalf("%s: empty", c.Name)
		}
		for i, s := range c.Steps {
			if s.Why == "" || s.State == "" {
				t.Errorf("%s step %d: no reason or state", c.Name, i)
			}
			if s.Outcome != 0 && s.Code != s.Outcome {
				t.Errorf("%s step %d: a failing command answers its own code", c.Name, i)
			}
		}
	}
	if n := len(Conformance[0].Steps); n < 18 {
		t.Fatalf("the ordinary sequence has %d steps", n)
	}
}

func TestAdmit(t *testing.T) {
	for _, c := range []struct {
		known, limit int
		ok           bool
	}{
		{0, 1, true},
		{0, model.MaxHostProcs, true},
		{model.MaxHostProcs - 1, model.MaxHostProcs, true},
		{model.MaxHostProcs, model.MaxHostProcs, false},
		{model.MaxHostProcs + 7, model.MaxHostProcs, false}, // an old registry held more
		{2, 3, true},
		{3, 3, false},
		{0, 0, false},
	} {
		code, msg, ok := Admit(c.known, c.limit, "p1")
		if ok != c.ok {
			t.Errorf("Admit(%d, %d): ok %v, want %v", c.known, c.limit, ok, c.ok)
			continue
		}
		if ok {
			if code != model.CodeSuccess || msg != "" {
				t.Errorf("Admit(%d, %d) admitted with %d %q", c.known, c.limit, code, msg)
			}
			continue
		}
		if code != model.CodeCommandFailed {
			t.Errorf("Admit(%d, %d): code %d, want %d", c.known, c.limit, code, model.CodeCommandFailed)
		}
		for _, want := range []string{"process(p1)", fmt.Sprint(c.limit), "MaxHostProcs"} {
			if !strings.Contains(msg, want) {
				t.Errorf("Admit(%d, %d): message %q does not name %q", c.known, c.limit, msg, want)
			}
		}
	}
}
