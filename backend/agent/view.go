//go:build linux

package agent

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"gseproc/model"
)

// What a status op reads. A status op takes no lock: it reads the view
// each entry publishes (entryView, an immutable value behind an atomic
// pointer) and then the process itself in /proc. Every change of what a
// status reports is made under the agent-wide lock and published before
// that lock is released (publishLocked: the state machine's transitions,
// setStateLocked, publish on their own), so a status sees each critical
// section whole or not at all, and never waits behind one: in a crash
// storm the lock is wanted by hundreds of watchers, restarts and their
// launches at once, and a status queued behind them waited seconds.

// agentLock is the agent-wide lock. beforeUnlock, when set, runs with the
// lock still held just before each release: the tests check there that
// every published view is the state it was taken from (checkViews).
type agentLock struct {
	sync.Mutex
	beforeUnlock func()
}

func (l *agentLock) Unlock() {
	if l.beforeUnlock != nil {
		l.beforeUnlock()
	}
	l.Mutex.Unlock()
}

// entryView is what a status report needs of an entry, as of the last
// change made under the agent lock.
type entryView struct {
	procName     string
	hosted       bool
	registerTime int64
	units        []unitView
}

// unitView is what a status report needs of a unit; the process itself is
// read when the status is made.
type unitView struct {
	seen                 unitSeen
	state                model.ProcState
	msg, held            string
	lastStart            int64
	restarts, exitStatus int
	cpu, mem             float64
	rss                  uint64
	threads              int
}

// viewLocked takes e's view; a.mu is held (or e is not shared yet).
func viewLocked(e *entry) *entryView {
	v := &entryView{procName: e.p.Spec.Identity.ProcName, hosted: e.hosted, registerTime: e.registerTime,
		units: make([]unitView, len(e.units))}
	for i, u := range e.units {
		v.units[i] = u.viewLocked()
	}
	return v
}

func (u *unit) viewLocked() unitView {
	return unitView{seen: u.seenLocked(), state: u.state, msg: u.msg, held: u.held, lastStart: u.lastStart,
		restarts: u.restarts, exitStatus: u.exitStatus, cpu: u.cpu, mem: u.mem, rss: u.rss, threads: u.threads}
}

// publishLocked makes e's current state what a status op reads. Every
// change of a field viewLocked reads calls it before the lock is released.
func publishLocked(e *entry) { e.view.Store(viewLocked(e)) }

// checkViews reports the first entry whose published view is not its
// state now ("" when all are); a.mu is held. It allocates nothing unless
// it finds one: the tests run it at every release of the lock.
func (a *Agent) checkViews() string {
	for _, e := range a.procs {
		v := e.view.Load()
		same := v != nil && v.procName == e.p.Spec.Identity.ProcName && v.hosted == e.hosted &&
			v.registerTime == e.registerTime && len(v.units) == len(e.units)
		for i := 0; same && i < len(e.units); i++ {
			same = v.units[i] == e.units[i].viewLocked()
		}
		if !same {
			return fmt.Sprintf("%s: published %+v, state %+v", e.key, v, viewLocked(e))
		}
	}
	return ""
}

// lookup is the entry known under key, without the agent lock (entries
// are never forgotten: the index only grows, in entryLocked).
func (a *Agent) lookup(key string) (*entry, bool) {
	e, ok := a.index.Load(key)
	if !ok {
		return nil, false
	}
	return e.(*entry), true
}

// Statuses reports every process the agent knows (one per definition;
// instance 1 when there are several, with a count in Message). It takes
// no lock.
func (a *Agent) Statuses() []model.ProcStatus {
	var es []*entry
	a.index.Range(func(_, e any) bool {
		es = append(es, e.(*entry))
		return true
	})
	sort.Slice(es, func(i, j int) bool { return es[i].key < es[j].key })
	out := make([]model.ProcStatus, 0, len(es))
	for _, e := range es {
		out = append(out, a.statusOf(e))
	}
	return out
}

// statusOf reports e (instance 1, with a count when there are several)
// from its published view and its processes now; it takes no lock.
func (a *Agent) statusOf(e *entry) model.ProcStatus {
	v := e.view.Load()
	st := model.ProcStatus{ProcKey: e.key, ProcName: v.procName, Hosted: v.hosted,
		RegisterTime: v.registerTime, ReportTime: time.Now().Unix(), PID: -1}
	up := 0
	for i, u := range v.units {
		var pid int
		var ps procStat
		var live bool
		switch u.state {
		case model.ProcBackoff, model.ProcStarting, model.ProcFatal:
			// The agent is the authority here: a pid file may name a
			// stranger until the restart rewrites it.
			if u.seen.pid > 0 {
				ps, live = alive(u.seen.pid)
				pid, live = u.seen.pid, live && (u.seen.tick == 0 || ps.StartTick == u.seen.tick)
			}
		default:
			pid, ps, live = u.seen.probe()
		}
		if live {
			up++
		}
		if i > 0 {
			continue
		}
		st.State, st.Message = u.state, u.msg
		if u.held != "" {
			st.Message = u.held
		}
		st.LastStartTime, st.Restarts, st.ExitStatus = u.lastStart, u.restarts, u.exitStatus
		if live {
			if !u.state.Up() {
				st.State = model.ProcRunning
			}
			st.PID = pid
			st.StartTime = tickTime(ps.StartTick)
			st.Cmdline = readCmdline(pid)
			st.Threads = ps.Threads
			st.MemRSS = ps.RSSPages * a.m.pageSize
			if a.m.memTotal > 0 {
				st.Mem = round2(float64(st.MemRSS) * 100 / float64(a.m.memTotal))
			}
			if u.seen.pid == pid {
				st.CPU = round2(u.cpu)
				if u.rss > 0 {
					st.MemRSS, st.Mem, st.Threads = u.rss, round2(u.mem), u.threads
				}
			}
		} else if u.state == model.ProcRunning {
			st.State = model.ProcExited
		}
	}
	if len(v.units) > 1 {
		st.Message = strings.TrimSpace(fmt.Sprintf("%d/%d instances running. %s", up, len(v.units), st.Message))
	}
	return st
}
