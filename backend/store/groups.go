package store

import (
	"context"
	"fmt"

	"gseproc/model"
)

// groupKey is a process group's key: its namespace and host.
type groupKey struct {
	ns   string
	host model.Host
}

// PutGroups creates or replaces process groups (by namespace and host); a
// group whose resource limits nothing is removed.
func (m *Memory) PutGroups(_ context.Context, gs []model.ProcessGroup) error {
	for _, g := range gs {
		if g.Namespace == "" {
			return fmt.Errorf("put process group on %s: namespace is empty", g.Host)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range gs {
		k := groupKey{g.Namespace, g.Host}
		if !g.Resource.Limited() {
			delete(m.groups, k)
			continue
		}
		m.groups[k] = g
	}
	return nil
}

// Groups lists the process groups of namespace ns ("" for every one), by
// namespace and host.
func (m *Memory) Groups(_ context.Context, ns string) ([]model.ProcessGroup, error) {
	m.mu.RLock()
	out := make([]model.ProcessGroup, 0, len(m.groups))
	for k, g := range m.groups {
		if ns == "" || k.ns == ns {
			out = append(out, g)
		}
	}
	m.mu.RUnlock()
	model.SortGroups(out)
	return out, nil
}
