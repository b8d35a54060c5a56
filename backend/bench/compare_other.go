//go:build !linux

package bench

import (
	"context"
	"errors"
)

// Compare needs Linux: the agent, /proc and the process events.
func Compare(ctx context.Context, o CompareOptions) (Report, error) {
	return Report{}, errors.New("bench compare: gseproc's agent and the measure need Linux")
}
