package engine

// recentRuns keeps the last tasks this engine stored complete, in memory,
// bounded by their targets: a client that watches or reads a task right
// after it ends (the op client's summary, the server's metrics, an API
// poll) is answered from the run instead of listing its results from the
// store. A complete task never changes, so the answer is the store's.
// Guarded by Engine.mu.
type recentRuns struct {
	byID    map[string]*run
	order   []string // oldest first
	targets int      // held by the runs in byID
}

// Bounds of recentRuns: targets held in all, and runs.
const (
	recentMaxTargets = 150_000
	recentMaxRuns    = 4096
)

// add keeps r (complete), dropping the oldest beyond the bounds.
func (x *recentRuns) add(r *run) {
	if x.byID == nil {
		x.byID = map[string]*run{}
	}
	n := len(r.targets)
	if n > recentMaxTargets {
		return
	}
	x.reserve(n, recentMaxRuns-1)
	x.byID[r.task.ID] = r
	x.order = append(x.order, r.task.ID)
	x.targets += n
}

// reserve drops the oldest runs kept until n more targets fit the bound
// and at most runs are kept. A run launched reserves its targets (launch):
// the kept runs and the one running are bounded together, so a fan-out
// over 100,000 hosts does not hold the results of the one before it too
// (each about 50 MB) while it runs.
func (x *recentRuns) reserve(n, runs int) {
	for len(x.order) > 0 && (x.targets+n > recentMaxTargets || len(x.order) > runs) {
		old := x.order[0]
		x.order = x.order[1:]
		if o := x.byID[old]; o != nil {
			x.targets -= len(o.targets)
			delete(x.byID, old)
		}
	}
}

// get returns the kept run of task id, or nil.
func (x *recentRuns) get(id string) *run { return x.byID[id] }
