package store

import (
	"context"
	"fmt"

	"gseproc/model"
)

// RollControl returns taskID's roll control (engine.RollBoard), kept with
// the task (and dropped with it).
func (m *Memory) RollControl(_ context.Context, taskID string) (model.RollControl, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	rec, ok := m.tasks[taskID]
	if !ok {
		return model.RollControl{}, fmt.Errorf("roll control of %s: %w", taskID, model.ErrNotFound)
	}
	return rec.roll, nil
}

// UpdateRollControl applies fn to taskID's roll control and tells the
// watchers.
func (m *Memory) UpdateRollControl(_ context.Context, taskID string, fn func(model.RollControl) model.RollControl) (model.RollControl, error) {
	m.mu.Lock()
	rec, ok := m.tasks[taskID]
	if !ok {
		m.mu.Unlock()
		return model.RollControl{}, fmt.Errorf("roll control of %s: %w", taskID, model.ErrNotFound)
	}
	rec.roll = fn(rec.roll)
	c := rec.roll
	subs := make(map[chan string]context.Context, len(m.rollSubs))
	for ch, ctx := range m.rollSubs {
		subs[ch] = ctx
	}
	m.mu.Unlock()
	for ch, ctx := range subs {
		select {
		case ch <- taskID:
		case <-ctx.Done():
		}
	}
	return c, nil
}

// WatchRollControls sends the id of every task whose roll control is
// written from the call on, until ctx ends. A writer waits for the
// receiver: read the channel until it closes.
func (m *Memory) WatchRollControls(ctx context.Context) (<-chan string, error) {
	ch := make(chan string, 16)
	m.mu.Lock()
	if m.rollSubs == nil {
		m.rollSubs = map[chan string]context.Context{}
	}
	m.rollSubs[ch] = ctx
	m.mu.Unlock()
	out := make(chan string)
	go func() {
		defer close(out)
		defer func() {
			m.mu.Lock()
			delete(m.rollSubs, ch)
			m.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case id := <-ch:
				select {
				case out <- id:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}
