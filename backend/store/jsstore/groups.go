package jsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"gseproc/model"
)

// groupKey is the key of namespace ns's process group on host, built from
// the host's canonical identity.
func groupKey(ns string, host model.Host) (string, error) {
	if ns == "" {
		return "", fmt.Errorf("process group on %s: namespace is empty", host)
	}
	id, err := host.ID()
	if err != nil {
		return "", fmt.Errorf("process group of %s: %w", ns, err)
	}
	return enc(ns) + "." + enc(id.String()), nil
}

// PutGroups creates or replaces process groups (by namespace and host); a
// group whose resource limits nothing is deleted. Puts and deletes alike
// are pipelined (publishAll).
func (s *Store) PutGroups(ctx context.Context, gs []model.ProcessGroup) error {
	if err := s.check(); err != nil {
		return err
	}
	var errs []error
	msgs := make([]pubMsg, 0, len(gs))
	for _, g := range gs {
		key, err := groupKey(g.Namespace, g.Host)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !g.Resource.Limited() {
			msgs = append(msgs, pubMsg{subject: kvSubject(s.on().groups, key), del: true,
				what: fmt.Sprintf("delete process group %s on %s", g.Namespace, g.Host)})
			continue
		}
		data, err := json.Marshal(g)
		if err != nil {
			errs = append(errs, fmt.Errorf("put process group %s on %s: %w", g.Namespace, g.Host, err))
			continue
		}
		msgs = append(msgs, pubMsg{subject: kvSubject(s.on().groups, key), data: data, what: fmt.Sprintf("put process group %s on %s", g.Namespace, g.Host)})
	}
	errs = append(errs, s.publishAll(ctx, msgs))
	return errors.Join(errs...)
}

// Groups lists the process groups of namespace ns ("" for every one), by
// namespace and host.
func (s *Store) Groups(ctx context.Context, ns string) ([]model.ProcessGroup, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	filter := ">"
	if ns != "" {
		filter = enc(ns) + ".*"
	}
	out := []model.ProcessGroup{}
	err := s.each(ctx, s.on().groups, filter, func(e jetstream.KeyValueEntry) error {
		var g model.ProcessGroup
		if err := json.Unmarshal(e.Value(), &g); err != nil {
			return fmt.Errorf("decode %s: %w", e.Key(), err)
		}
		out = append(out, g)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list process groups: %w", err)
	}
	model.SortGroups(out)
	return out, nil
}
