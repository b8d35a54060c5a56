package model

import (
	"fmt"
	"sort"
)

// A process group (GSE set_process_group_info) pools the processes of one
// namespace on one host: together they may use at most CPUPoolLimit percent
// of the machine's CPU and MemPoolLimit percent of its memory. When the
// pool is over a limit for the agent's breach count of samples in a row,
// the agent stops the member with the highest score (PoolVictim) and
// reports process_group_resource_limit_exceed. The group's id is its
// namespace, as the agent's events name it (process_group_id).

// GroupResource is a pool's limits, in percent of the whole machine (0: no
// limit on that resource), and how the victim is scored per resource:
// weight 0 scores a member by its usage, weight 1 by its usage over its
// own limit (cpu_lmt / mem_lmt; none counts as 100), so that a member
// allowed more is less likely to be stopped.
type GroupResource struct {
	CPUPoolLimit  float64 `json:"cpu_pool_limit"`
	MemPoolLimit  float64 `json:"mem_pool_limit"`
	CPUPoolWeight int     `json:"cpu_pool_weight"`
	MemPoolWeight int     `json:"mem_pool_weight"`
}

// Limited reports whether the pool limits anything.
func (r GroupResource) Limited() bool { return r.CPUPoolLimit > 0 || r.MemPoolLimit > 0 }

// Validate names every bad field under prefix ("spec.process_group[0].resource").
func (r GroupResource) Validate(v *Validator, prefix string) {
	for _, l := range []struct {
		name string
		val  float64
	}{{"cpu_pool_limit", r.CPUPoolLimit}, {"mem_pool_limit", r.MemPoolLimit}} {
		if l.val < 0 || l.val > 100 || l.val != l.val {
			v.Addf(prefix+"."+l.name, "%v is not a percentage of the machine in [0,100] (0: no limit)", l.val)
		}
	}
	for _, w := range []struct {
		name string
		val  int
	}{{"cpu_pool_weight", r.CPUPoolWeight}, {"mem_pool_weight", r.MemPoolWeight}} {
		if w.val != 0 && w.val != 1 {
			v.Addf(prefix+"."+w.name, "%d is not 0 (score by usage) or 1 (usage over the process's own limit)", w.val)
		}
	}
}

// ProcessGroup is the pool of one namespace's processes on one host, as
// set on its agent.
type ProcessGroup struct {
	Namespace string        `json:"namespace"`
	Host      Host          `json:"host"`
	Resource  GroupResource `json:"resource"`
	// SupplierID is the bk_supplier_id the API request gave the host: an
	// API detail stored with the group, answered back by
	// get_process_group_info.
	SupplierID int   `json:"bk_supplier_id,omitempty"`
	Updated    int64 `json:"updated,omitempty"` // unix seconds of the last set
}

// Validate is an agent's check of a group it is told to enforce (the
// request's process_group): its namespace and its limits, every bad field
// named under process_group. A real agent and a simulated one refuse the
// same groups.
func (g ProcessGroup) Validate() error {
	v := &Validator{}
	ValidateNamespace(v, "process_group.namespace", g.Namespace)
	g.Resource.Validate(v, "process_group.resource")
	return v.Err()
}

// ValidateNamespace checks a group's namespace under field (the rule of
// meta.namespace).
func ValidateNamespace(v *Validator, field, ns string) {
	v.CheckIdent(field, ns, true, MaxName, namespaceChar, NamespaceChars)
}

// SortGroups orders groups by namespace, then host (CompareHosts).
func SortGroups(gs []ProcessGroup) {
	sort.Slice(gs, func(i, j int) bool {
		if gs[i].Namespace != gs[j].Namespace {
			return gs[i].Namespace < gs[j].Namespace
		}
		return CompareHosts(gs[i].Host, gs[j].Host) < 0
	})
}

// PoolMember is one running process of a pool, as sampled.
type PoolMember struct {
	Key      string  // namespace:name (and instance, when several)
	CPU, Mem float64 // usage, percent of the machine
	// CPULimit and MemLimit are the process's own limits (0: none).
	CPULimit, MemLimit float64
}

// PoolBreach is a pool over one of its limits.
type PoolBreach struct {
	Resource string  // "cpu" or "mem"
	Total    float64 // the members' usage together
	Limit    float64
	Victim   int // index of the member to stop
	Score    float64
}

// PoolVictim decides whether the pool's members are over its limits
// (memory first, then CPU) and, if so, which member to stop: the highest
// score under the resource's weight, ties going to the higher usage, then
// to the lower key. ok is false when the pool is within its limits (or has
// no members).
func (r GroupResource) PoolVictim(members []PoolMember) (b PoolBreach, ok bool) {
	if len(members) == 0 {
		return PoolBreach{}, false
	}
	var cpu, mem float64
	for _, m := range members {
		cpu += m.CPU
		mem += m.Mem
	}
	switch {
	case r.MemPoolLimit > 0 && mem > r.MemPoolLimit:
		b = PoolBreach{Resource: "mem", Total: mem, Limit: r.MemPoolLimit}
	case r.CPUPoolLimit > 0 && cpu > r.CPUPoolLimit:
		b = PoolBreach{Resource: "cpu", Total: cpu, Limit: r.CPUPoolLimit}
	default:
		return PoolBreach{}, false
	}
	use, weight := PoolMember.cpuUse, r.CPUPoolWeight
	if b.Resource == "mem" {
		use, weight = PoolMember.memUse, r.MemPoolWeight
	}
	best, bestScore, bestUse := -1, 0.0, 0.0
	for i, m := range members {
		u, own := use(m)
		score := u
		if weight == 1 {
			if own <= 0 {
				own = 100
			}
			score = u / own
		}
		better := best < 0 || score > bestScore ||
			score == bestScore && (u > bestUse || u == bestUse && m.Key < members[best].Key)
		if better {
			best, bestScore, bestUse = i, score, u
		}
	}
	b.Victim, b.Score = best, bestScore
	return b, true
}

func (m PoolMember) cpuUse() (float64, float64) { return m.CPU, m.CPULimit }
func (m PoolMember) memUse() (float64, float64) { return m.Mem, m.MemLimit }

// String describes the breach for a log line or an event.
func (b PoolBreach) String() string {
	return fmt.Sprintf("process group %s usage %.2f%% over its pool limit %.2f%%", b.Resource, b.Total, b.Limit)
}
