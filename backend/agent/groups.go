//go:build linux

package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"sort"
	"strconv"
	"time"

	"gseproc/backend/kept"
	"gseproc/model"
)

// GroupsFile holds the process groups under DataDir (GSE 1.x keeps them
// in procgroupinfo.json too): each namespace's resource pool, so that an
// agent restart keeps enforcing them.
const GroupsFile = "procgroupinfo.json"

type groupsFile struct {
	ProcessGroup []groupRecord `json:"process_group"`
}

type groupRecord struct {
	ID        string              `json:"id"` // the namespace
	Resource  model.GroupResource `json:"resource"`
	Timestamp int64               `json:"timestamp"`
}

// loadGroups reads path; a missing file holds no group.
func loadGroups(path string) (map[string]model.GroupResource, error) {
	out := map[string]model.GroupResource{}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read process groups: %w", err)
	}
	var f groupsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("process groups %s: %w", path, err)
	}
	for _, g := range f.ProcessGroup {
		out[g.ID] = g.Resource
	}
	return out, nil
}

// encodeGroups is the groups file for groups.
func encodeGroups(groups map[string]model.GroupResource) ([]byte, error) {
	f := groupsFile{ProcessGroup: []groupRecord{}}
	now := time.Now().Unix()
	for ns, r := range groups {
		f.ProcessGroup = append(f.ProcessGroup, groupRecord{ID: ns, Resource: r, Timestamp: now})
	}
	sort.Slice(f.ProcessGroup, func(i, j int) bool { return f.ProcessGroup[i].ID < f.ProcessGroup[j].ID })
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode process groups: %w", err)
	}
	return append(b, '\n'), nil
}

// setGroup answers a request that sets (or, limiting nothing, clears) the
// process group of g.Namespace: from the next sample on, the namespace's
// hosted processes are held to the pool's limits. The groups file is
// written (and synced) before the change applies, outside the agent lock;
// groupsMu keeps such writes one at a time.
func (a *Agent) setGroup(g model.ProcessGroup) model.AgentReply {
	if err := g.Validate(); err != nil {
		return model.AgentReply{Code: model.CodeCommandFailed, Message: err.Error()}
	}
	a.groupsMu.Lock()
	defer a.groupsMu.Unlock()
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return model.AgentReply{Code: model.CodeAgentAbnormal, Message: "agent is shutting down"}
	}
	old, had := a.groups[g.Namespace]
	if had == g.Resource.Limited() && (!had || old == g.Resource) {
		// What it holds already (the request repeated or redelivered):
		// nothing is written, and the pool's breaches go on counting.
		a.mu.Unlock()
		return model.AgentReply{Code: model.CodeSuccess, Message: "success"}
	}
	next := maps.Clone(a.groups)
	a.mu.Unlock()
	if g.Resource.Limited() {
		next[g.Namespace] = g.Resource
	} else {
		delete(next, g.Namespace)
	}
	b, err := encodeGroups(next)
	if err == nil {
		err = kept.WriteFile(a.groupsPath, b)
	}
	if err != nil {
		return model.AgentReply{Code: model.CodeAgentAbnormal, Message: "process group not recorded: " + err.Error()}
	}
	a.mu.Lock()
	a.groups = next
	delete(a.poolBreaches, g.Namespace)
	a.mu.Unlock()
	a.log.Info("process group set", "namespace", g.Namespace, "cpu_pool_limit", g.Resource.CPUPoolLimit,
		"mem_pool_limit", g.Resource.MemPoolLimit, "cpu_pool_weight", g.Resource.CPUPoolWeight, "mem_pool_weight", g.Resource.MemPoolWeight)
	return model.AgentReply{Code: model.CodeSuccess, Message: "success"}
}

// checkPoolsLocked holds each process group to its limits after a sample:
// a pool over a limit for BreachCount samples in a row loses its member
// with the highest score (model.GroupResource.PoolVictim), stopped as a
// process over its own limit is (held until a manual start), with a
// process_group_resource_limit_exceed event.
func (a *Agent) checkPoolsLocked() {
	if len(a.groups) == 0 || a.closed {
		return
	}
	for ns, res := range a.groups {
		var members []model.PoolMember
		var units []*unit
		for _, e := range a.procs {
			if !e.hosted || e.p.Meta.Namespace != ns {
				continue
			}
			for _, u := range e.units {
				if u.state != model.ProcRunning || u.pid <= 0 || u.held != "" {
					continue
				}
				key := e.key
				if len(e.units) > 1 {
					key += "#" + strconv.Itoa(u.idx)
				}
				members = append(members, model.PoolMember{Key: key, CPU: u.cpu, Mem: u.mem,
					CPULimit: e.p.Spec.Resource.CPU, MemLimit: e.p.Spec.Resource.Mem})
				units = append(units, u)
			}
		}
		b, over := res.PoolVictim(members)
		if !over {
			delete(a.poolBreaches, ns)
			continue
		}
		a.poolBreaches[ns]++
		n := a.poolBreaches[ns]
		u := units[b.Victim]
		a.log.Info("process group limit breached", "namespace", ns, "resource", b.Resource, "total", round2(b.Total),
			"limit", b.Limit, "breaches", n, "of", a.cfg.BreachCount, "victim", members[b.Victim].Key)
		if n < a.cfg.BreachCount {
			continue
		}
		delete(a.poolBreaches, ns)
		msg := fmt.Sprintf("%s for %d samples: %s (%s %.2f%%, the highest score) stopped, not restarted until a manual start",
			b, a.cfg.BreachCount, u.e.p.Spec.Identity.ProcName, b.Resource, round2(usageOf(members[b.Victim], b.Resource)))
		u.held = msg
		publishLocked(u.e)
		a.emitLocked(u, model.EventGroupLimitExceeded, msg, round2(b.Total))
		a.persistLocked()
		a.wg.Add(1)
		go a.enforce(u, u.gen, msg)
	}
}

func usageOf(m model.PoolMember, resource string) float64 {
	if resource == "mem" {
		return m.Mem
	}
	return m.CPU
}
