package jsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend/engine"
	"gseproc/model"
)

var _ engine.RollBoard = (*Store)(nil)

// rollControl is a value of the rolls bucket: the control, with its task
// id (a key may be a digest).
type rollControl struct {
	TaskID string `json:"task_id"`
	model.RollControl
}

// RollControl returns taskID's control (zero when none is stored).
func (s *Store) RollControl(ctx context.Context, taskID string) (model.RollControl, error) {
	c, _, err := s.rollControl(ctx, taskID)
	return c, err
}

func (s *Store) rollControl(ctx context.Context, taskID string) (model.RollControl, uint64, error) {
	if err := s.check(); err != nil {
		return model.RollControl{}, 0, err
	}
	e, err := do(s, ctx, s.streams.rolls, func(ctx context.Context) (jetstream.KeyValueEntry, error) {
		return s.leaderGet(ctx, s.on().rolls, enc(taskID))
	})
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return model.RollControl{}, 0, nil
	case err != nil:
		return model.RollControl{}, 0, fmt.Errorf("read roll control of %s: %w", taskID, err)
	}
	var rc rollControl
	if err := json.Unmarshal(e.Value(), &rc); err != nil {
		return model.RollControl{}, 0, fmt.Errorf("read roll control of %s: %w", taskID, err)
	}
	return rc.RollControl, e.Revision(), nil
}

// UpdateRollControl applies fn to taskID's control: a Create or an Update
// at the revision read, repeated when another writer came between.
func (s *Store) UpdateRollControl(ctx context.Context, taskID string, fn func(model.RollControl) model.RollControl) (model.RollControl, error) {
	for attempt := 0; ; attempt++ {
		c, rev, err := s.rollControl(ctx, taskID)
		if err != nil {
			return model.RollControl{}, err
		}
		c = fn(c)
		data, err := json.Marshal(rollControl{TaskID: taskID, RollControl: c})
		if err != nil {
			return model.RollControl{}, fmt.Errorf("write roll control of %s: %w", taskID, err)
		}
		_, err = do(s, ctx, s.streams.rolls, func(ctx context.Context) (uint64, error) {
			if rev == 0 {
				return s.on().rolls.Create(ctx, enc(taskID), data)
			}
			return s.on().rolls.Update(ctx, enc(taskID), data, rev)
		})
		switch {
		case err == nil:
			return c, nil
		case (errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)) && attempt < 10:
			continue
		}
		return model.RollControl{}, fmt.Errorf("write roll control of %s: %w", taskID, err)
	}
}

// WatchRollControls sends the task id of every control written from the
// call on, until ctx ends.
func (s *Store) WatchRollControls(ctx context.Context) (<-chan string, error) {
	return watchNew(s, ctx, "roll controls", func(b *bound) jetstream.KeyValue { return b.rolls },
		func(v []byte) (string, bool) {
			var rc rollControl
			_ = json.Unmarshal(v, &rc) // a value this store did not write names no task: ""
			return rc.TaskID, true
		})
}
