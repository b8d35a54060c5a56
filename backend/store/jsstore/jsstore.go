// Package jsstore is the engine's durable Store on NATS JetStream, so that
// a server killed mid-task loses nothing and several servers on one NATS
// cluster share tasks and data.
//
// Layout (bucket and stream names take Options.Prefix, default "gseproc"):
//
//	KV  gseproc_procs     <enc(ns:name)>            -> model.ProcessDef (Rev = KV revision)
//	KV  gseproc_status    <enc(host)>.<enc(proc)>   -> {host, status}
//	KV  gseproc_seq       seq                       -> (empty) NextSeq = revision of a Put
//	KV  gseproc_tasks     <enc(task id)>            -> model.Task (a task of one target: and "target_list": [it], see taskRecord)
//	KV  gseproc_targets   <enc(task id)>.<chunk>    -> []model.Target (2000 a chunk; none for a task of one target)
//	KV  gseproc_results   <enc(task id)>.<index>    -> model.Result of the index-th target
//	                      <enc(task id)>.z<16 hex>  -> a pack: [{"i": index, "r": model.Result}, ...], S2-compressed (batch.go)
//	                      <enc(task id)>.p<16 hex>  -> a pack uncompressed, as written before (read only)
//	                      <enc(task id)>.fence.epoch (empty): its revision fences the task's writes (fence.go)
//	KV  gseproc_leases    <enc(task id)>            -> {owner, ttl_ms, at} of an unfinished task
//	KV  gseproc_cancels   <enc(task id)>            -> task id: a cancel was asked (kept MaxAge)
//	KV  gseproc_rolls     <enc(task id)>            -> {task_id, model.RollControl}: what operators asked of a roll (kept MaxAge)
//	KV  gseproc_groups    <enc(ns)>.<enc(host)>     -> model.ProcessGroup (a namespace's pool on a host)
//	ST  gseproc_events    gseproc.store.events      model.Event, at most MaxEvents kept, one per ID (Nats-Msg-Id)
//	ST  gseproc_audit     gseproc.store.audit       model.AuditEntry (Seq = stream sequence), at most KeepAudit kept
//
// enc keeps [A-Za-z0-9_-] and writes any other byte as =XX (hex) (a token
// that would pass 1024 bytes is "=H" and its SHA-256 instead), so keys
// are valid and readable: "GSETASK:20260101000000:7" -> "GSETASK=3A20260101000000=3A7".
//
// NextSeq: every Put to a KV key gets the stream's next sequence as its
// revision, assigned by the stream leader, so it never repeats for the
// life of the bucket, across restarts and across any number of servers,
// with one round trip and no CAS retry loop. A Put of revision r reserves
// the block of seqBlock numbers from r*seqBlock for the store that made
// it: one round trip per 64 tasks (numbers left in a block when the store
// closes are never used; a later block is above every earlier one). Results are stored by target
// index, one under its own key or many in a pack (batch.go), so Results
// lists them in target order, and a result for a target that is not the
// task's is refused. Listing reads a whole bucket (or one
// task's keys) with one ordered consumer (a KV watch), not a Get per key.
// The registry is never listed per call: one KV watch for the store's life
// keeps an in-memory index of it (registry.go).
//
// Read-your-writes across servers (leader.go): on replicated buckets a key
// is read, and a listing's end is learned, through the stream leader, and
// the registry index waits for the leader's last sequence, so what any
// server wrote is read back by every other at once, never a not-found or
// an older value from a lagging replica.
//
// Leases (engine.Leaser): an engine running a task holds its lease key and
// rewrites it every third of its TTL; every write changes the revision.
// Acquire is a Create, take-over an Update at the revision the taker saw
// unchanged for the TTL, renewal an Update at the revision just read: each
// is a compare-and-set, so exactly one engine wins. The store judges no
// expiry itself (no clocks compared across machines): the engine does.
//
// WatchResults (engine.ResultWatcher) is a KV watch of one task's result
// keys (stored ones, then live) and of its task key: once the task is
// stored complete, it reads on to the results stream's last message for
// the task, then closes.
package jsstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/model"
)

// Options configure the store.
//
// The fields the config carries have their defaults there, once
// (config.Default, which config.Load fills a file over): build them with
// OptionsFromConfig. New refuses a zero one, naming it, instead of
// defaulting it a second time. Prefix and SweepEvery are not in the
// config: their defaults are here, and only here.
type Options struct {
	// Prefix of bucket and stream names (default "gseproc").
	Prefix string
	// Replicas of every bucket and stream: 1 on one server, 3 on a
	// cluster ([nats] replicas).
	Replicas int
	// MaxEvents bounds the event stream ([nats] max_events).
	MaxEvents int
	// MaxAge is how long a finished task stays readable, with its targets
	// and results, counted from its end ([engine] result_max_age).
	MaxAge time.Duration
	// MaxBytes caps the task, target and result buckets together: beyond
	// it the oldest finished tasks go first, whatever their age ([engine]
	// result_max_bytes).
	MaxBytes int64
	// SweepEvery is how often retention is applied (default 1 minute).
	SweepEvery time.Duration
	// KeepAudit bounds the audit stream ([engine] keep_audit).
	KeepAudit int
	// Memory keeps everything in memory on the NATS servers (tests);
	// the default is file storage.
	Memory bool
}

// Store is the JetStream engine.Store. It does not own the JetStream
// context: Close releases nothing of the connection.
type Store struct {
	opts Options
	// cur is what belongs to the connection in use: Rebind moves the store
	// onto a new one (the old connection was closed for good).
	cur                         atomic.Pointer[bound]
	storage                     jetstream.StorageType
	eventsSubject, auditSubject string

	// streams name the JetStream stream of each bucket and stream (they
	// do not change with Rebind): each call says which it waits on (do),
	// so that a verdict on some streams fails only their calls.
	streams streamNames

	reg    *registry          // the procs bucket, indexed by a watch
	ctx    context.Context    // ends at Close: stops the registry watch
	cancel context.CancelFunc // of ctx
	wg     sync.WaitGroup     // the registry watch

	leaseRevs  leaseRevs     // the leases' revisions as written here (lease.go)
	own        ownStatuses   // statuses written here, until the status watch reads them
	swatch     statusWatches // the running status watches (statuswatch.go)
	packs      sync.Pool     // result packs' buffers (*[]byte), reused (packBuf)
	liveness   liveness      // the shared check of an unanswered API call (live.go)
	lastAnswer atomic.Int64  // when JetStream last answered the store, probes included (unix ns; live.go)
	lastCall   atomic.Int64  // when JetStream last answered a call of the store, not a probe (unix ns)

	seqMu           sync.Mutex // held while a block is reserved
	seqNext, seqEnd uint64     // the reserved block's numbers not handed out: [seqNext, seqEnd)
	seqSpare        uint64     // the first number of the next block, reserved ahead (0: none yet)
	seqReserving    bool       // a spare block is being reserved (reserveSeq)

	mu           sync.Mutex
	index        map[string]*taskIndex // task id -> target index, while the task runs (indexMaxTasks)
	indexTargets int                   // targets held by index
	closed       bool
}

// bound is the store's JetStream context and the bucket and stream
// handles opened on it: all of one connection.
type bound struct {
	js                                                  jetstream.JetStream
	procs, status, seq, tasks, targets, results, leases jetstream.KeyValue
	cancels, groups, rolls                              jetstream.KeyValue
	events, audit                                       jetstream.Stream

	mu        sync.Mutex
	kvStreams map[string]jetstream.Stream // bucket -> its stream, looked up once
	ack       *acker                      // made at its first use (acks)
}

// acks is the receiver of the connection's pipelined publishes'
// acknowledgements (acks.go).
func (b *bound) acks() *acker {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ack == nil {
		b.ack = newAcker(b.js.Conn())
	}
	return b.ack
}

// streamNames are the store's streams, by what they hold (Store.streams).
type streamNames struct {
	procs, status, seq, tasks, targets, results, leases, cancels, groups, rolls, events, audit string
}

func newStreamNames(prefix string) streamNames {
	kv := func(bucket string) string { return "KV_" + prefix + "_" + bucket }
	return streamNames{procs: kv("procs"), status: kv("status"), seq: kv("seq"), tasks: kv("tasks"), targets: kv("targets"),
		results: kv("results"), leases: kv("leases"), cancels: kv("cancels"), groups: kv("groups"), rolls: kv("rolls"),
		events: prefix + "_events", audit: prefix + "_audit"}
}

// all are the names of every bucket's and stream's JetStream stream, all
// of which API calls use: the store's probe asks each (live.go).
func (n streamNames) all() []string {
	return []string{n.procs, n.status, n.seq, n.tasks, n.targets, n.results, n.leases, n.cancels, n.groups, n.rolls, n.events, n.audit}
}

// kv is the bucket named bucket on this connection (a handle taken before
// a Rebind is the old connection's); nil when the store has none.
func (b *bound) kv(bucket string) jetstream.KeyValue {
	for _, x := range [...]jetstream.KeyValue{b.procs, b.status, b.seq, b.tasks, b.targets, b.results, b.leases, b.cancels, b.groups, b.rolls} {
		if x != nil && x.Bucket() == bucket {
			return x
		}
	}
	return nil
}

// current is kv as the connection in use has it (kv itself when the store
// has no such bucket).
func (s *Store) current(kv jetstream.KeyValue) jetstream.KeyValue {
	if x := s.on().kv(kv.Bucket()); x != nil {
		return x
	}
	return kv
}

// kvName is the name of kv's stream.
func kvName(kv jetstream.KeyValue) string { return "KV_" + kv.Bucket() }

// streamOf is the stream a message to subject is stored in: a KV key's
// bucket's ($KV.<bucket>.<key>), the events' or the audit's ("" for
// none of the store's).
func (s *Store) streamOf(subject string) string {
	switch {
	case strings.HasPrefix(subject, "$KV."):
		bucket, _, _ := strings.Cut(subject[len("$KV."):], ".")
		return "KV_" + bucket
	case subject == s.eventsSubject:
		return s.streams.events
	case subject == s.auditSubject:
		return s.streams.audit
	}
	return ""
}

// on is the store's current connection and handles.
func (s *Store) on() *bound { return s.cur.Load() }

type taskIndex struct {
	targets targetPairs
	rev     uint64 // the task record's revision as this store last wrote it (0: unknown)
	// inline is the targets' JSON array the task record holds (nil: the
	// targets bucket holds them): every rewrite of the record keeps it.
	inline []byte
	// fence is the fence token a results write of the task last found
	// still its own (PutResultsFencedMany), and fenceAt when that read
	// was sent: a task update that follows within fenceFresh does not
	// read it again (UpdateTaskFenced).
	fence   uint64
	fenceAt time.Time
}

const (
	chunkSize   = 2000
	listTimeout = 30 * time.Second
)

// indexMaxTasks and indexMaxTargets bound the target index cache. A task
// keeps its index from PutTask until it is stored final (forgetIndex); one
// whose index was dropped meanwhile reads its task and targets back for
// its next result write (a listing: one more consumer) and for its final
// update. The bounds are above the tasks one engine runs at once: a bound
// of 64 tasks was passed at 600 operate_proc calls a second.
const (
	indexMaxTasks   = 4096
	indexMaxTargets = 200_000
)

// OptionsFromConfig are the store's options as cfg says: [nats]
// replicas and max_events, [engine] result_max_age, result_max_bytes and
// keep_audit.
func OptionsFromConfig(cfg config.Config) Options {
	return Options{Replicas: cfg.NATS.Replicas, MaxEvents: cfg.NATS.MaxEvents, KeepAudit: cfg.Engine.KeepAudit,
		MaxAge: cfg.Engine.ResultMaxAge.D(), MaxBytes: cfg.Engine.ResultMaxBytes}
}

// check refuses the fields the config fills (see Options) when zero or
// negative, naming each.
func (o Options) check() error {
	var errs []error
	for _, f := range []struct {
		bad        bool
		field, key string
	}{
		{o.Replicas < 1, "Replicas", "[nats] replicas"},
		{o.MaxEvents < 1, "MaxEvents", "[nats] max_events"},
		{o.MaxAge <= 0, "MaxAge", "[engine] result_max_age"},
		{o.MaxBytes <= 0, "MaxBytes", "[engine] result_max_bytes"},
		{o.KeepAudit < 1, "KeepAudit", "[engine] keep_audit"},
	} {
		if f.bad {
			errs = append(errs, fmt.Errorf("Options.%s must be > 0 (%s, filled by config.Load; OptionsFromConfig)", f.field, f.key))
		}
	}
	return errors.Join(errs...)
}

// New creates (or opens) the buckets and the event stream. It refuses
// options whose configured fields are unset (see Options).
func New(ctx context.Context, js jetstream.JetStream, opts Options) (*Store, error) {
	if err := opts.check(); err != nil {
		return nil, fmt.Errorf("jetstream store: %w", err)
	}
	if opts.Prefix == "" {
		opts.Prefix = "gseproc"
	}
	if opts.SweepEvery <= 0 {
		opts.SweepEvery = time.Minute
	}
	storage := jetstream.FileStorage
	if opts.Memory {
		storage = jetstream.MemoryStorage
	}
	s := &Store{opts: opts, storage: storage, index: map[string]*taskIndex{}, streams: newStreamNames(opts.Prefix),
		eventsSubject: opts.Prefix + ".store.events", auditSubject: opts.Prefix + ".store.audit"}
	b, err := s.open(ctx, js)
	if err != nil {
		return nil, err
	}
	s.cur.Store(b)
	s.reg = newRegistry()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Go(func() { s.follow(s.ctx) })
	s.wg.Go(func() { s.sweepLoop(s.ctx) })
	return s, nil
}

// Rebind moves the store onto js, a JetStream context on a new connection
// (the one it used was closed for good; transport.Link dials the new one):
// the buckets and streams are opened again on it, and every later call
// uses them. The registry watch, which ended with the old connection,
// starts again on them by itself.
func (s *Store) Rebind(ctx context.Context, js jetstream.JetStream) error {
	if err := s.check(); err != nil {
		return err
	}
	b, err := s.open(ctx, js)
	if err != nil {
		return err
	}
	s.cur.Store(b)
	return nil
}

// open creates (or opens, when they exist) the buckets and streams on js.
func (s *Store) open(ctx context.Context, js jetstream.JetStream) (*bound, error) {
	opts := s.opts
	b := &bound{js: js, kvStreams: map[string]jetstream.Stream{}}
	buckets := []struct {
		name string
		kv   *jetstream.KeyValue
	}{
		{"procs", &b.procs}, {"status", &b.status}, {"seq", &b.seq},
		{"tasks", &b.tasks}, {"targets", &b.targets}, {"results", &b.results},
		{"leases", &b.leases}, {"cancels", &b.cancels}, {"groups", &b.groups},
		{"rolls", &b.rolls},
	}
	for _, bk := range buckets {
		name := opts.Prefix + "_" + bk.name
		var ttl time.Duration
		if bk.kv == &b.cancels || bk.kv == &b.rolls {
			ttl = opts.MaxAge // a cancel or a roll's control outlives no task
		}
		var kv jetstream.KeyValue
		err := retry(ctx, func(ctx context.Context) (err error) {
			kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket: name, History: 1, Storage: s.storage, Replicas: opts.Replicas,
				Description: "gseproc " + bk.name, TTL: ttl,
			})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("jsstore: bucket %s: %w", name, err)
		}
		*bk.kv = kv
	}
	name := s.streams.events
	err := retry(ctx, func(ctx context.Context) (err error) {
		b.events, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: name, Subjects: []string{s.eventsSubject}, MaxMsgs: int64(opts.MaxEvents),
			Discard: jetstream.DiscardOld, Storage: s.storage, Replicas: opts.Replicas,
			Duplicates:  EventDuplicates,
			Description: "gseproc host events",
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("jsstore: stream %s: %w", name, err)
	}
	if b.audit, err = s.openAudit(ctx, js); err != nil {
		return nil, err
	}
	return b, nil
}

// retry runs f until it succeeds, fails for good, or ctx ends: a cluster
// that just started has no JetStream leader yet and leaves requests
// unanswered (or answers 503) for a few seconds. Its leader may also know
// fewer peers than the replicas asked for while the other nodes are still
// joining ("no suitable peers for placement"): that is waited out too, for
// failoverWait at most, as it stays so for good when the cluster is
// smaller than the replicas configured.
func retry(ctx context.Context, f func(context.Context) error) error {
	return retryPlacing(ctx, failoverWait, f)
}

// retryPlacing is retry, waiting at most placing for enough peers.
func retryPlacing(ctx context.Context, placing time.Duration, f func(context.Context) error) error {
	var forming time.Time // when the leader first knew too few peers
	for k := 0; ; k++ {
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := f(actx)
		cancel()
		if err != nil && fewPeers(err) {
			if forming.IsZero() {
				forming = time.Now()
			}
			if time.Since(forming) >= placing {
				return fmt.Errorf("the JetStream cluster has had too few peers for the replicas configured for %s: %w",
					time.Since(forming).Round(time.Second), err)
			}
		} else if err == nil || !(transient(err) || errors.Is(err, context.DeadlineExceeded)) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(retryBackoff.Delay(k, rand.Float64())):
		}
	}
}

// transient reports a failure worth retrying: no stream leader at the
// moment (a node died and its replicas are electing one), or no JetStream
// answering at all (503: no meta leader, JetStream not enabled). A KV
// watch creates its consumer with the older JetStream API of nats.go,
// whose errors are a type of their own.
func transient(err error) bool {
	var apiErr *jetstream.APIError
	var oldErr *nats.APIError
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrNoStreamResponse) ||
		(errors.As(err, &apiErr) && apiErr.Code == 503) || (errors.As(err, &oldErr) && oldErr.Code == 503)
}

// fewPeers reports JetStream's refusal to place a stream's replicas: its
// leader knows fewer peers than the replicas (JSClusterNoPeersErrF).
func fewPeers(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrCodeClusterNoPeers
}

// jsErrCodeClusterNoPeers is nats-server's JSClusterNoPeersErrF, which
// nats.go names no constant for.
const jsErrCodeClusterNoPeers jetstream.ErrorCode = 10005

// failoverWait bounds how long an operation waits out a leader election;
// attemptTimeout is how long one request may go unanswered before it is
// tried again (a request to a node that just died is never answered).
const (
	failoverWait   = 60 * time.Second
	attemptTimeout = 3 * time.Second
)

// retryBackoff spaces the attempts of retry and do: 100 ms doubling to
// 1 s, +-20% so that servers retrying together do not stay in step.
var retryBackoff = model.Backoff{Base: 100 * time.Millisecond, Max: time.Second, Jitter: 0.2}

// errStalled is a listing that stopped delivering: tried again.
var errStalled = errors.New("listing stalled")

// do runs f, a call that waits on the stream named on (the store's
// stream it reads or writes), each attempt within attemptTimeout, retrying while it fails
// transiently or goes unanswered, for up to failoverWait or until ctx
// ends; then it fails with model.ErrUnavailable and the last error. f
// must be safe to repeat (every write here is: a Put writes the same
// value again, a Create that finds its own value is success).
//
// With the caller's bound (backend.WithStoreWait: an API call), it
// retries until the bound only, and an attempt still unanswered is judged
// (judge, live.go): when JetStream, or the stream on, is found
// unreachable it fails at once with the reason, within the bound; when
// they answer (or only other streams do not), the attempt is only slow
// and keeps its attemptTimeout.
func do[T any](s *Store, ctx context.Context, on string, f func(context.Context) (T, error)) (T, error) {
	start := time.Now()
	deadline := start.Add(failoverWait)
	bound, bounded := backend.StoreDeadline(ctx)
	if bounded {
		if err := backend.StoreDown(ctx); err != nil {
			var zero T
			return zero, err // an earlier call of the request found the store down
		}
		deadline = bound
	}
	for k := 0; ; k++ {
		v, err, down := attempt(s, ctx, on, bounded, start, bound, f)
		if err != nil && ctx.Err() == nil && errors.Is(down, errDown) {
			err = unavailable(time.Since(start), down)
			backend.MarkStoreDown(ctx, err)
			return v, err
		}
		unanswered := ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errStalled))
		// The connection was closed for good (a NATS server closes one for
		// a protocol violation; transport.Link dials a new one and Rebind
		// moves the store onto it): asked again on the connection then in
		// use, as an unanswered call. A write sent on the old one may have
		// been applied with its answer lost: every f is safe to repeat (a
		// create finds its own value, createOwn). Not once the store is
		// closed (its owner closes the connection after it).
		if errors.Is(err, nats.ErrConnectionClosed) && ctx.Err() == nil && s.check() == nil {
			unanswered = true
		}
		if err == nil || !(transient(err) || unanswered) {
			if ctx.Err() == nil {
				s.answered()
			}
			return v, err
		}
		if bounded && transient(err) {
			// Refused (no leader, no responders): the check's verdict, once
			// in, ends the retries at once instead of at the bound (each
			// refusal of a leaderless group comes after half a second).
			if c := s.live(); c.downFor([]string{on}) {
				err = unavailable(time.Since(start), fmt.Errorf("%w: %w", errDown, c.err))
				backend.MarkStoreDown(ctx, err)
				return v, err
			}
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			err = unavailable(time.Since(start), err)
			backend.MarkStoreDown(ctx, err)
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(min(retryBackoff.Delay(k, rand.Float64()), time.Until(deadline))):
		}
	}
}

// attempt is one attempt of do: f within attemptTimeout and, for a call
// with a bound of its own (bounded), watched by judge (down is then why
// the watch aborted it, if it did). An unbounded call needs no context
// of the watch's.
func attempt[T any](s *Store, ctx context.Context, on string, bounded bool, start, bound time.Time, f func(context.Context) (T, error)) (v T, err, down error) {
	if !bounded {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
		v, err = f(actx)
		return v, err, nil
	}
	pctx, abort := context.WithCancelCause(ctx)
	actx, cancel := context.WithTimeout(pctx, attemptTimeout)
	stop := s.judge(start, bound, []string{on}, abort)
	v, err = f(actx)
	stop()
	down = context.Cause(pctx)
	cancel()
	abort(nil)
	return v, err, down
}

// unavailable is the error of a call that found the store unreachable for
// all its patience (took), or judged so (errDown).
func unavailable(took time.Duration, err error) error {
	why := "unanswered"
	switch {
	case errors.Is(err, errDown):
		return fmt.Errorf("%w: after %s: %w", model.ErrUnavailable, took.Round(time.Millisecond), err)
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse):
		why = "no JetStream server answers (no quorum, or NATS unreachable)"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, errStalled):
		why = "unanswered (NATS unreachable, or a JetStream leader election)"
	case errors.Is(err, nats.ErrConnectionClosed):
		why = "the NATS connection was closed, and no new one is in use yet"
	case transient(err):
		why = "JetStream has no leader for the store (an election, or no quorum)"
	}
	return fmt.Errorf("%w: JetStream did not answer in %s: %s: %w", model.ErrUnavailable, took.Round(time.Millisecond), why, err)
}

// Close marks the store closed and stops the registry watch; later calls
// fail. It is safe to call twice.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	if b := s.on(); b != nil {
		b.mu.Lock()
		ack := b.ack
		b.mu.Unlock()
		if ack != nil {
			ack.stop()
		}
	}
	return nil
}

func (s *Store) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("jsstore: closed")
	}
	return nil
}

// maxToken bounds one encoded key token. NATS closes a connection whose
// control line (subject included) passes 4096 bytes, so a key must never
// grow with its input: a longer token is replaced by a digest of it.
// Validated input never comes near (a process key is at most 641
// characters, a task id 40).
const maxToken = 1024

// enc makes s a valid KV key token of at most maxToken bytes (see the
// package documentation).
func enc(s string) string {
	if t := encLong(s); len(t) <= maxToken {
		return t
	}
	sum := sha256.Sum256([]byte(s))
	return "=H" + hex.EncodeToString(sum[:])
}

func encLong(s string) string {
	if s == "" {
		return "=" // the empty string still needs a token
	}
	n := len(s)
	for i := 0; i < len(s); i++ {
		if !keyByte(s[i]) {
			n += 2
		}
	}
	if n == len(s) {
		return s
	}
	// One allocation: the key of every task id (its colons escaped) is
	// made several times per task.
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(n)
	for i := 0; i < len(s); i++ {
		if c := s[i]; keyByte(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('=')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

// keyByte says whether c stands for itself in a key token.
func keyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// ---- registry ----

// PutProcess creates or replaces a definition. When def.Rev is not zero it
// must equal the stored revision (optimistic update), else ErrConflict.
func (s *Store) PutProcess(ctx context.Context, def model.ProcessDef) error {
	if err := s.check(); err != nil {
		return err
	}
	key := def.Process.Key()
	want := def.Rev
	def.Rev = 0
	data, err := json.Marshal(def)
	if err != nil {
		return fmt.Errorf("put process %s: %w", key, err)
	}
	k := enc(key)
	if want == 0 {
		_, err = do(s, ctx, s.streams.procs, func(ctx context.Context) (uint64, error) { return s.on().procs.Put(ctx, k, data) })
	} else {
		tries := 0
		_, err = do(s, ctx, s.streams.procs, func(ctx context.Context) (uint64, error) {
			tries++
			return s.on().procs.Update(ctx, k, data, want)
		})
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			// Refused. Asked more than once (do asks again after an
			// unanswered attempt or a closed connection), an earlier
			// attempt may have been applied without its answer arriving:
			// the same definition stored since is ours. A read that
			// fails is not a conflict either.
			e, gerr := s.get(ctx, s.on().procs, k)
			switch {
			case errors.Is(gerr, jetstream.ErrKeyNotFound):
				// Nothing stored: as the memory store, accept.
				_, err = s.createOwn(ctx, s.streams.procs, func(b *bound) jetstream.KeyValue { return b.procs }, k, data,
					func(e jetstream.KeyValueEntry) bool { return bytes.Equal(e.Value(), data) })
			case gerr != nil:
				return fmt.Errorf("put process %s: refused at revision %d, then reading it: %w", key, want, gerr)
			case tries > 1 && e.Revision() > want && bytes.Equal(e.Value(), data):
				err = nil
			default:
				return fmt.Errorf("put process %s: revision %d is not the stored one: %w", key, want, model.ErrConflict)
			}
		}
	}
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("put process %s: %w", key, model.ErrConflict)
		}
		return fmt.Errorf("put process %s: %w", key, err)
	}
	return nil
}

// DeleteProcess removes a definition by key (ErrNotFound when absent).
func (s *Store) DeleteProcess(ctx context.Context, key string) error {
	if err := s.check(); err != nil {
		return err
	}
	e, err := s.get(ctx, s.on().procs, enc(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("delete process %s: %w", key, model.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete process %s: %w", key, err)
	}
	if err := s.on().procs.Delete(ctx, enc(key), jetstream.LastRevision(e.Revision())); err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return fmt.Errorf("delete process %s: changed meanwhile: %w", key, model.ErrConflict)
		}
		return fmt.Errorf("delete process %s: %w", key, err)
	}
	return nil
}

// Processes returns every definition sorted by key, from the registry
// index (see registry); their hosts and labels are shared with it and
// must not be modified.
func (s *Store) Processes(ctx context.Context) ([]model.ProcessDef, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	out, err := s.snapshot(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	return out, nil
}

var _ engine.SharedRegistry = (*Store)(nil)

// SharedProcesses is Processes without the copy (engine.SharedRegistry):
// the slice is the index's own, read-only for the caller. The index never
// changes a slice it has lent: a write to the registry makes it build a
// new one on the next read.
func (s *Store) SharedProcesses(ctx context.Context) ([]model.ProcessDef, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	out, err := s.snapshot(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	return out, nil
}

// ---- statuses ----

type statusRec struct {
	Host   model.Host       `json:"host"`
	Status model.ProcStatus `json:"status"`
}

// PutProcStatus records the last known status of st.ProcKey on host.
func (s *Store) PutProcStatus(ctx context.Context, host model.Host, st model.ProcStatus) error {
	return s.PutProcStatuses(ctx, []engine.HostStatus{{Host: host, Status: st}})
}

// statusKey is the key of proc's status on host, built from the host's
// canonical identity.
func statusKey(host model.Host, proc string) (string, error) {
	id, err := host.ID()
	if err != nil {
		return "", fmt.Errorf("put status of %s: %w", proc, err)
	}
	return enc(id.String()) + "." + enc(proc), nil
}

var _ engine.StatusWatcher = (*Store)(nil)

// ownStatuses are the statuses this store is writing, by key, with the
// value each is stored as, until the status watch reads them back: the
// watch hands on the status written instead of decoding its JSON again.
// The first op over 100,000 hosts stores a status for each, and decoding
// them back by reflection was ~4% of the server's CPU over three ops and
// over a million allocations. Only a value read back byte for byte as
// it was written is taken (decoding it gave the status written); any
// other (another server's write, an older one of the key) is decoded as
// before, so the watch sends the same statuses in the same order.
type ownStatuses struct {
	mu       sync.Mutex
	m        map[string]ownStatus
	watchers int
}

type ownStatus struct {
	hs   *engine.HostStatus
	data []byte // as stored
}

// ownMax bounds the statuses kept for the watch: past it (a watch that
// does not keep up) they are decoded as before.
const ownMax = 1 << 18

// watching counts a status watch begun (+1) or ended (-1); with none,
// nothing is kept (and what was, is let go).
func (o *ownStatuses) watching(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.watchers += n
	if o.watchers == 0 {
		o.m = nil
	}
}

// writing keeps each status msgs write (those with a status), before they
// are published, for the watch to take.
func (o *ownStatuses) writing(msgs []pubMsg, keys []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.watchers == 0 {
		return
	}
	if o.m == nil {
		o.m = make(map[string]ownStatus, len(msgs))
	}
	for i := range msgs {
		if len(o.m) >= ownMax {
			return
		}
		o.m[keys[i]] = ownStatus{hs: msgs[i].status, data: msgs[i].data}
	}
}

// failed forgets the statuses of msgs (keys) that were not stored (p): no
// watch reads them back.
func (o *ownStatuses) failed(msgs []pubMsg, keys []string, p published) {
	if p.stop == nil && p.failed == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range msgs {
		if p.errOf(msgs, i) == nil {
			continue
		}
		if w, ok := o.m[keys[i]]; ok && w.hs == msgs[i].status {
			delete(o.m, keys[i])
		}
	}
}

// forget lets go of the status m wrote under key, handed on by the watch
// without being read (an own run); false when it was not kept.
func (o *ownStatuses) forget(key string, m *pubMsg) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if w, ok := o.m[key]; ok && w.hs == m.status {
		delete(o.m, key)
		return true
	}
	return false
}

// take is the status written under key as value, now read by a watch
// (nil: not one this store wrote, or not as it is read).
func (o *ownStatuses) take(key string, value []byte) *engine.HostStatus {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.m[key]
	if !ok || !bytes.Equal(w.data, value) {
		return nil
	}
	delete(o.m, key)
	return w.hs
}

// ProcStatuses returns every last known status by host, each host's sorted by key.
func (s *Store) ProcStatuses(ctx context.Context) (map[model.Host][]model.ProcStatus, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	out := map[model.Host][]model.ProcStatus{}
	err := s.each(ctx, s.on().status, ">", func(e jetstream.KeyValueEntry) error {
		var r statusRec
		if err := json.Unmarshal(e.Value(), &r); err != nil {
			return fmt.Errorf("decode %s: %w", e.Key(), err)
		}
		out[r.Host] = append(out[r.Host], r.Status)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list statuses: %w", err)
	}
	for _, l := range out {
		slices.SortFunc(l, func(a, b model.ProcStatus) int { return strings.Compare(a.ProcKey, b.ProcKey) })
	}
	return out, nil
}

// ---- tasks ----

// NextSeq returns a sequence number never returned before by any store on
// the same buckets (see the package documentation). Once half a block is
// handed out, the next block is reserved in the background (reserveSeq):
// callers do not queue behind its round trip, as they did under seqMu
// (38% of the server's mutex delay under the operate bench). A block
// reserved ahead is a block like another: unused when the store closes.
func (s *Store) NextSeq(ctx context.Context) (uint64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	s.seqMu.Lock()
	defer s.seqMu.Unlock()
	if s.seqNext == s.seqEnd {
		if s.seqSpare != 0 {
			s.seqNext, s.seqEnd, s.seqSpare = s.seqSpare, s.seqSpare+seqBlock, 0
		} else {
			rev, err := do(s, ctx, s.streams.seq, func(ctx context.Context) (uint64, error) { return s.on().seq.Put(ctx, "seq", nil) })
			if err != nil {
				return 0, fmt.Errorf("next task seq: %w", err)
			}
			s.seqNext, s.seqEnd = rev*seqBlock, rev*seqBlock+seqBlock
		}
	}
	s.seqNext++
	if s.seqSpare == 0 && !s.seqReserving && s.seqEnd-s.seqNext <= seqBlock/2 {
		s.reserveSeq()
	}
	return s.seqNext - 1, nil
}

// reserveSeq reserves the next block on a goroutine of the store's (Close
// waits for it); seqMu is held. A failure leaves no spare: the caller that
// finds its block spent reserves one itself, as before.
func (s *Store) reserveSeq() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	s.seqReserving = true
	go func() {
		defer s.wg.Done()
		rev, err := do(s, s.ctx, s.streams.seq, func(ctx context.Context) (uint64, error) { return s.on().seq.Put(ctx, "seq", nil) })
		s.seqMu.Lock()
		defer s.seqMu.Unlock()
		s.seqReserving = false
		if err == nil {
			s.seqSpare = rev * seqBlock
		}
	}()
}

// seqBlock is how many sequence numbers one Put reserves (see NextSeq).
const seqBlock = 64

// PutTask creates a task with its targets (ErrConflict when the id exists).
func (s *Store) PutTask(ctx context.Context, t model.Task, targets []model.Target) error {
	if err := s.check(); err != nil {
		return err
	}
	w, err := s.taskWrites(t, targets)
	if err != nil {
		return err
	}
	// Targets first: a task record always has its targets.
	for _, m := range w.targets {
		if _, err := do(s, ctx, s.streamOf(m.subject), func(ctx context.Context) (*jetstream.PubAck, error) { return s.on().js.PublishMsg(ctx, m.msg()) }); err != nil {
			return fmt.Errorf("put task %s: targets: %w", t.ID, err)
		}
	}
	return s.createTask(ctx, t, w)
}

// inlineTargets is how many targets a task has at most for its record to
// hold them (its "target_list", see taskRecord) instead of the targets
// bucket: one, an operate_proc on one host, a message fewer per task
// (one of eight). The record is a task's first write and holds its
// targets, as the targets written before it did: a task record is never
// stored without its targets either way.
const inlineTargets = 1

// inlineKey is the record's member holding its targets inline (a name no
// field of model.Task has).
const inlineKey = `,"target_list":`

// taskRecord is a task's record: t as json.Marshal encodes it, with its
// targets' JSON array inline as a last member when it holds them (inline
// not nil). A reader of the task decodes it as a model.Task, which
// ignores the member; one of its targets reads them there (storedTask).
func taskRecord(t *model.Task, inline []byte) ([]byte, error) {
	data, err := taskJSON(t)
	if err != nil || inline == nil {
		return data, err
	}
	data = append(data[:len(data)-1], inlineKey...) // before its closing brace
	data = append(data, inline...)
	return append(data, '}'), nil
}

// storedTask is a task record decoded: the task, and its targets when
// the record holds them.
type storedTask struct {
	model.Task
	Inline json.RawMessage `json:"target_list,omitempty"`
}

// inlineOf is the targets a task record holds (nil: none, they are in the
// targets bucket).
func inlineOf(record []byte) ([]byte, error) {
	if !bytes.Contains(record, []byte(inlineKey[1:])) {
		return nil, nil
	}
	var st storedTask
	if err := json.Unmarshal(record, &st); err != nil {
		return nil, err
	}
	return st.Inline, nil
}

// taskWrites are a new task's: its targets' messages (chunkSize targets
// each; none when its record holds them), its record and the index of its
// targets.
type taskWrites struct {
	targets []pubMsg
	record  []byte
	idx     *taskIndex
}

// targetSize is about the size of a target's JSON (AppendTargetsJSON):
// its IP, its process key and its agent id, 70-100 bytes.
const targetSize = 96

func (s *Store) taskWrites(t model.Task, targets []model.Target) (taskWrites, error) {
	pairs, dup := newTargetPairs(targets)
	if dup >= 0 {
		tg := targets[dup]
		return taskWrites{}, fmt.Errorf("put task %s: target %s %s given twice", t.ID, tg.Host, tg.ProcKey)
	}
	w := taskWrites{idx: &taskIndex{targets: pairs}}
	if len(targets) > 0 && len(targets) <= inlineTargets {
		data := model.AppendTargetsJSON(nil, targets)
		w.idx.inline = data
		var err error
		if w.record, err = taskRecord(&t, data); err != nil {
			return w, fmt.Errorf("put task %s: %w", t.ID, err)
		}
		return w, nil
	}
	tk := enc(t.ID)
	for c := 0; c*chunkSize < len(targets) || c == 0; c++ {
		part := targets[c*chunkSize : min((c+1)*chunkSize, len(targets))]
		// At about the size of a target's JSON (its host, process and
		// agent id), not grown by appending.
		data := model.AppendTargetsJSON(make([]byte, 0, len(part)*targetSize), part)
		w.targets = append(w.targets, pubMsg{subject: kvSubject(s.on().targets, tk+"."+strconv.Itoa(c)), data: data,
			what: fmt.Sprintf("put task %s: targets %d", t.ID, c)})
	}
	var err error
	if w.record, err = taskJSON(&t); err != nil {
		return w, fmt.Errorf("put task %s: %w", t.ID, err)
	}
	return w, nil
}

// createTask creates t's record (ErrConflict when it exists) once its
// targets are stored, and keeps its index.
func (s *Store) createTask(ctx context.Context, t model.Task, w taskWrites) error {
	var err error
	// An earlier attempt may have been applied without its answer
	// arriving: the same record is ours.
	w.idx.rev, err = s.createOwn(ctx, s.streams.tasks, func(b *bound) jetstream.KeyValue { return b.tasks }, enc(t.ID), w.record,
		func(e jetstream.KeyValueEntry) bool { return bytes.Equal(e.Value(), w.record) })
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("put task %s: exists: %w", t.ID, model.ErrConflict)
		}
		return fmt.Errorf("put task %s: %w", t.ID, err)
	}
	s.mu.Lock()
	s.cacheIndex(t.ID, w.idx)
	s.mu.Unlock()
	return nil
}

// cacheIndex keeps idx, dropping arbitrary others beyond the bounds (idx
// itself is kept whatever its size); s.mu must be held.
func (s *Store) cacheIndex(id string, idx *taskIndex) {
	s.dropIndex(id)
	for k := range s.index {
		if len(s.index) < indexMaxTasks && s.indexTargets+len(idx.targets) <= indexMaxTargets {
			break
		}
		s.dropIndex(k)
	}
	s.index[id] = idx
	s.indexTargets += len(idx.targets)
}

// dropIndex forgets task id's index; s.mu must be held.
func (s *Store) dropIndex(id string) {
	if idx, ok := s.index[id]; ok {
		s.indexTargets -= len(idx.targets)
		delete(s.index, id)
	}
}

// UpdateTask replaces a task's summary (ErrNotFound when absent).
func (s *Store) UpdateTask(ctx context.Context, t model.Task) error {
	if err := s.check(); err != nil {
		return err
	}
	tk := enc(t.ID)
	// The revision this store wrote last saves reading it back (a round
	// trip per task); a revision not known, or not current, is read. The
	// record keeps the targets it holds (as known with the revision, or
	// as read).
	s.mu.Lock()
	idx := s.index[t.ID]
	var rev uint64
	var inline []byte
	if idx != nil {
		rev, inline = idx.rev, idx.inline
	}
	s.mu.Unlock()
	if rev == 0 {
		e, err := s.get(ctx, s.on().tasks, tk)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("update task %s: %w", t.ID, model.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("update task %s: %w", t.ID, err)
		}
		if inline, err = inlineOf(e.Value()); err != nil {
			return fmt.Errorf("update task %s: decode: %w", t.ID, err)
		}
		rev = e.Revision()
	}
	data, err := taskRecord(&t, inline)
	if err != nil {
		return fmt.Errorf("update task %s: %w", t.ID, err)
	}
	// Last writer wins, but never resurrect a task deleted meanwhile.
	newRev, err := do(s, ctx, s.streams.tasks, func(ctx context.Context) (uint64, error) { return s.on().tasks.Update(ctx, tk, data, rev) })
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		e, err := s.get(ctx, s.on().tasks, tk)
		if err != nil {
			return fmt.Errorf("update task %s: %w", t.ID, model.ErrNotFound)
		}
		if inline, err = inlineOf(e.Value()); err != nil {
			return fmt.Errorf("update task %s: decode: %w", t.ID, err)
		}
		if data, err = taskRecord(&t, inline); err != nil {
			return fmt.Errorf("update task %s: %w", t.ID, err)
		}
		newRev, err = do(s, ctx, s.streams.tasks, func(ctx context.Context) (uint64, error) { return s.on().tasks.Put(ctx, tk, data) })
		if err != nil {
			return fmt.Errorf("update task %s: %w", t.ID, err)
		}
	} else if err != nil {
		return fmt.Errorf("update task %s: %w", t.ID, err)
	}
	if idx != nil {
		s.mu.Lock()
		idx.rev = newRev
		s.mu.Unlock()
	}
	s.forgetIndex(t)
	return nil
}

// forgetIndex drops t's target index once t is complete: its results are
// stored, and the cache keeps the running tasks' indexes.
func (s *Store) forgetIndex(t model.Task) {
	if t.Status.Final() {
		s.mu.Lock()
		s.dropIndex(t.ID)
		s.mu.Unlock()
	}
}

var _ engine.TaskModifier = (*Store)(nil)

// ModifyTask reads task taskID through the stream leader, calls modify
// with it and stores what modify returns on the revision read: a task
// changed meanwhile is read again and modify called again (at most 10
// times; then model.ErrConflict).
func (s *Store) ModifyTask(ctx context.Context, taskID string, modify func(context.Context, model.Task) (model.Task, error)) error {
	if err := s.check(); err != nil {
		return err
	}
	tk := enc(taskID)
	for attempt := 0; ; attempt++ {
		e, err := do(s, ctx, s.streams.tasks, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.leaderGet(ctx, s.on().tasks, tk) })
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("modify task %s: %w", taskID, model.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("modify task %s: %w", taskID, err)
		}
		var st storedTask
		if err := json.Unmarshal(e.Value(), &st); err != nil {
			return fmt.Errorf("modify task %s: decode: %w", taskID, err)
		}
		t, err := modify(ctx, st.Task)
		if err != nil {
			return fmt.Errorf("modify task %s: %w", taskID, err)
		}
		if t.ID != taskID {
			return fmt.Errorf("modify task %s: modified into task %q", taskID, t.ID)
		}
		data, err := taskRecord(&t, st.Inline)
		if err != nil {
			return fmt.Errorf("modify task %s: %w", taskID, err)
		}
		_, err = do(s, ctx, s.streams.tasks, func(ctx context.Context) (uint64, error) { return s.on().tasks.Update(ctx, tk, data, e.Revision()) })
		switch {
		case err == nil:
			s.forgetIndex(t)
			return nil
		case !errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			return fmt.Errorf("modify task %s: %w", taskID, err)
		case attempt >= 10:
			return fmt.Errorf("modify task %s: changed meanwhile %d times: %w", taskID, attempt+1, model.ErrConflict)
		}
	}
}

// Task returns a task and its targets (ErrNotFound when absent).
func (s *Store) Task(ctx context.Context, id string) (model.Task, []model.Target, error) {
	if err := s.check(); err != nil {
		return model.Task{}, nil, err
	}
	st, err := s.stored(ctx, id)
	if err != nil {
		return model.Task{}, nil, err
	}
	targets, err := s.loadTargets(ctx, id, st.Inline)
	if err != nil {
		return model.Task{}, nil, err
	}
	return st.Task, targets, nil
}

// TaskRecord reads task id's record alone, without its targets
// (engine.TaskRecordReader).
func (s *Store) TaskRecord(ctx context.Context, id string) (model.Task, error) {
	if err := s.check(); err != nil {
		return model.Task{}, err
	}
	return s.task(ctx, id)
}

func (s *Store) task(ctx context.Context, id string) (model.Task, error) {
	st, err := s.stored(ctx, id)
	return st.Task, err
}

// stored reads task id's record.
func (s *Store) stored(ctx context.Context, id string) (storedTask, error) {
	e, err := s.get(ctx, s.on().tasks, enc(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return storedTask{}, fmt.Errorf("task %s: %w", id, model.ErrNotFound)
	}
	if err != nil {
		return storedTask{}, fmt.Errorf("task %s: %w", id, err)
	}
	var st storedTask
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return storedTask{}, fmt.Errorf("task %s: decode: %w", id, err)
	}
	return st, nil
}

// loadTargets reads task id's targets: those its record holds (inline,
// not nil), else the targets bucket's chunks.
func (s *Store) loadTargets(ctx context.Context, id string, inline []byte) ([]model.Target, error) {
	if inline != nil {
		var out []model.Target
		if err := json.Unmarshal(inline, &out); err != nil {
			return nil, fmt.Errorf("targets of task %s: decode: %w", id, err)
		}
		return out, nil
	}
	chunks := map[int][]model.Target{}
	err := s.each(ctx, s.on().targets, enc(id)+".*", func(e jetstream.KeyValueEntry) error {
		_, c, _ := strings.Cut(e.Key(), ".")
		n, err := strconv.Atoi(c)
		if err != nil {
			return fmt.Errorf("target chunk key %s", e.Key())
		}
		var part []model.Target
		if err := json.Unmarshal(e.Value(), &part); err != nil {
			return fmt.Errorf("decode %s: %w", e.Key(), err)
		}
		chunks[n] = part
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("targets of task %s: %w", id, err)
	}
	var out []model.Target
	for c := 0; c < len(chunks); c++ {
		part, ok := chunks[c]
		if !ok {
			return nil, fmt.Errorf("targets of task %s: chunk %d missing", id, c)
		}
		out = append(out, part...)
	}
	return out, nil
}

// targetIndex returns the task's target index, from the cache or the store.
func (s *Store) targetIndex(ctx context.Context, id string) (*taskIndex, error) {
	s.mu.Lock()
	idx := s.index[id]
	s.mu.Unlock()
	if idx != nil {
		return idx, nil
	}
	st, err := s.stored(ctx, id)
	if err != nil {
		return nil, err
	}
	targets, err := s.loadTargets(ctx, id, st.Inline)
	if err != nil {
		return nil, err
	}
	pairs, _ := newTargetPairs(targets)
	idx = &taskIndex{targets: pairs, inline: st.Inline}
	s.mu.Lock()
	s.cacheIndex(id, idx)
	s.mu.Unlock()
	return idx, nil
}

// Tasks lists tasks newest first; limit <= 0 means all.
func (s *Store) Tasks(ctx context.Context, limit int) ([]model.Task, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	all, err := s.allTasks(ctx)
	if err != nil {
		return nil, err
	}
	if limit > 0 && limit < len(all) {
		all = all[:limit]
	}
	return all, nil
}

// allTasks lists every task newest first (creation time, then sequence).
func (s *Store) allTasks(ctx context.Context) ([]model.Task, error) {
	var out []model.Task
	err := s.each(ctx, s.on().tasks, ">", func(e jetstream.KeyValueEntry) error {
		var t model.Task
		if err := json.Unmarshal(e.Value(), &t); err != nil {
			return fmt.Errorf("decode %s: %w", e.Key(), err)
		}
		out = append(out, t)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	slices.SortFunc(out, func(a, b model.Task) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		_, sa, _ := model.ParseTaskID(a.ID)
		_, sb, _ := model.ParseTaskID(b.ID)
		if sa != sb {
			if sa > sb {
				return -1
			}
			return 1
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out, nil
}

// sweepLoop applies retention every SweepEvery until ctx ends.
func (s *Store) sweepLoop(ctx context.Context) {
	t := time.NewTicker(s.opts.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, _ = s.sweep(ctx, time.Now()) // tried again at the next tick
	}
}

// sweep deletes, with their targets and results, the finished tasks that
// ended more than MaxAge before now, then the oldest finished ones while
// the buckets hold more than MaxBytes. Unfinished tasks are never
// deleted. It returns how many tasks it deleted.
func (s *Store) sweep(ctx context.Context, now time.Time) (int, error) {
	all, err := s.allTasks(ctx)
	if err != nil {
		return 0, fmt.Errorf("retention: %w", err)
	}
	ended := func(t model.Task) time.Time {
		if !t.Finished.IsZero() {
			return t.Finished
		}
		return t.Created
	}
	var finished []model.Task // oldest first
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Status.Final() {
			finished = append(finished, all[i])
		}
	}
	slices.SortStableFunc(finished, func(a, b model.Task) int { return ended(a).Compare(ended(b)) })
	n := 0
	for len(finished) > 0 && now.Sub(ended(finished[0])) > s.opts.MaxAge {
		if err := s.deleteTask(ctx, finished[0].ID); err != nil {
			return n, fmt.Errorf("retention: %w", err)
		}
		finished, n = finished[1:], n+1
	}
	for len(finished) > 0 {
		size, err := s.size(ctx)
		if err != nil {
			return n, fmt.Errorf("retention: %w", err)
		}
		if size <= s.opts.MaxBytes {
			break
		}
		// A twentieth of what is left at a time, then measure again.
		batch := max(1, len(finished)/20)
		for _, t := range finished[:batch] {
			if err := s.deleteTask(ctx, t.ID); err != nil {
				return n, fmt.Errorf("retention: %w", err)
			}
		}
		finished, n = finished[batch:], n+batch
	}
	return n, nil
}

// size is the bytes held by the task, target and result buckets.
func (s *Store) size(ctx context.Context) (int64, error) {
	var total int64
	for _, kv := range []jetstream.KeyValue{s.on().tasks, s.on().targets, s.on().results} {
		st, err := s.kvStream(ctx, kv)
		if err != nil {
			return 0, err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return 0, err
		}
		total += int64(info.State.Bytes)
	}
	return total, nil
}

// deleteTask removes a task's results, its targets, then the task, from
// their streams (no delete marker is left behind): cut short, it leaves a
// task the next sweep deletes again, never parts without their task.
func (s *Store) deleteTask(ctx context.Context, id string) error {
	tk := enc(id)
	for _, x := range []struct {
		kv      jetstream.KeyValue
		subject string
	}{{s.on().results, tk + ".>"}, {s.on().targets, tk + ".*"}, {s.on().tasks, tk}} { // results: and the fence
		kv := x.kv
		st, err := s.kvStream(ctx, kv)
		if err != nil {
			return fmt.Errorf("delete task %s: %w", id, err)
		}
		if err := st.Purge(ctx, jetstream.WithPurgeSubject("$KV."+kv.Bucket()+"."+x.subject)); err != nil {
			return fmt.Errorf("delete task %s: purge %s: %w", id, kv.Bucket(), err)
		}
	}
	s.mu.Lock()
	s.dropIndex(id)
	s.mu.Unlock()
	return nil
}

// ---- results ----

// PutResult creates or replaces the sub-result of (r.Host, r.ProcKey);
// ErrNotFound when the task or the target is unknown.
func (s *Store) PutResult(ctx context.Context, r model.Result) error {
	return s.PutResults(ctx, []model.Result{r})
}

// Results returns the sub-results put so far, in target order
// (ErrNotFound when the task is unknown).
func (s *Store) Results(ctx context.Context, taskID string) ([]model.Result, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if _, err := s.task(ctx, taskID); err != nil {
		return nil, fmt.Errorf("results of %w", err)
	}
	// Each target's result of the highest revision (see packBytes).
	type kept struct {
		rev uint64
		r   model.Result
	}
	byIndex := map[int]kept{}
	err := s.each(ctx, s.on().results, enc(taskID)+".*", func(e jetstream.KeyValueEntry) error {
		ps, err := resultsOf(e.Key(), e.Value())
		if err != nil {
			return err
		}
		for _, p := range ps {
			if old, ok := byIndex[p.I]; !ok || e.Revision() >= old.rev {
				byIndex[p.I] = kept{e.Revision(), p.R}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("results of task %s: %w", taskID, err)
	}
	idx := slices.Sorted(maps.Keys(byIndex))
	out := make([]model.Result, len(idx))
	for k, i := range idx {
		out[k] = byIndex[i].r
	}
	return out, nil
}

// ---- events ----

// EventDuplicates is how long the event stream remembers the ids it
// stored: an event appended again within it (each server of a cluster
// appends the agent_online it derived from the same heartbeat; a server
// that died between storing an event and acknowledging it has it
// delivered again) is kept once.
const EventDuplicates = 10 * time.Minute

// AppendEvent adds an event; beyond MaxEvents the oldest are dropped.
func (s *Store) AppendEvent(ctx context.Context, e model.Event) error {
	return s.AppendEvents(ctx, []model.Event{e})
}

// Events returns the last limit events, newest last; limit <= 0 means all kept.
func (s *Store) Events(ctx context.Context, limit int) ([]model.Event, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	info, err := do(s, ctx, s.streams.events, func(ctx context.Context) (*jetstream.StreamInfo, error) { return s.on().events.Info(ctx) })
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	n := info.State.Msgs
	if n == 0 {
		return nil, nil
	}
	if limit > 0 && uint64(limit) < n {
		n = uint64(limit)
	}
	start := info.State.LastSeq - n + 1
	cons, err := do(s, ctx, s.streams.events, func(ctx context.Context) (jetstream.Consumer, error) {
		return s.on().js.OrderedConsumer(ctx, s.on().events.CachedInfo().Config.Name, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	out := make([]model.Event, 0, n)
	for uint64(len(out)) < n {
		batch, err := cons.Fetch(int(min(n-uint64(len(out)), 1000)), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			var e model.Event
			if err := json.Unmarshal(m.Data(), &e); err != nil {
				return nil, fmt.Errorf("events: decode: %w", err)
			}
			out = append(out, e)
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
		if got == 0 {
			break // fewer than counted (some aged out meanwhile)
		}
	}
	return out, nil
}

// ---- listing ----

// each calls fn with the current value of every key of kv matching filter,
// read with one ordered consumer.
func (s *Store) each(ctx context.Context, kv jetstream.KeyValue, filter string, fn func(jetstream.KeyValueEntry) error) error {
	entries, err := do(s, ctx, kvName(kv), func(actx context.Context) ([]jetstream.KeyValueEntry, error) {
		// A listing may take longer than an attempt while it delivers (it
		// fails by itself once silent for attemptTimeout): it stops with
		// the attempt only when the attempt is judged unanswered (do).
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(actx, func() {
			if errors.Is(context.Cause(actx), errDown) {
				cancel()
			}
		})()
		return s.list(lctx, s.current(kv), filter)
	})
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// list reads the current entries of kv matching filter; it fails with
// errStalled when nothing arrives for attemptTimeout.
//
// The watcher's "initial values done" marker (and a delivery's pending
// count) can come early when keys are rewritten during the listing: a
// snapshot message deleted before its delivery is replaced by a newer one
// the watcher delivers later. So the listing goes on until it has seen
// the stream's last message matching filter, as of after the reading:
// every message then current is at or before it, and the watcher
// delivers in sequence order, so every current key has been seen.
func (s *Store) list(ctx context.Context, kv jetstream.KeyValue, filter string) ([]jetstream.KeyValueEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	// The watch lives on ctx; its creation (a consumer) may go unanswered
	// no longer than the rest of the listing may stay silent.
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	unanswered := time.AfterFunc(attemptTimeout, stopWatch)
	w, err := kv.Watch(wctx, filter)
	if !unanswered.Stop() {
		if err == nil {
			_ = w.Stop()
		}
		return nil, errStalled
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	latest := map[string]jetstream.KeyValueEntry{}
	var high uint64 // the highest revision seen
	var want uint64 // keep reading until high >= want
	settled := false
	stall := time.NewTimer(attemptTimeout)
	defer stall.Stop()
	for {
		if settled && high >= want {
			lctx, cancel := context.WithTimeout(ctx, attemptTimeout)
			last, err := s.lastSeq(lctx, kv, filter)
			cancel()
			if err != nil {
				return nil, err
			}
			if high >= last {
				out := make([]jetstream.KeyValueEntry, 0, len(latest))
				for _, e := range latest {
					if e.Operation() == jetstream.KeyValuePut {
						out = append(out, e)
					}
				}
				return out, nil
			}
			want = last
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-stall.C:
			return nil, errStalled
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("watch closed")
			}
			stall.Reset(attemptTimeout)
			if e == nil {
				settled = true
				continue
			}
			if old, ok := latest[e.Key()]; !ok || e.Revision() > old.Revision() {
				latest[e.Key()] = e
			}
			high = max(high, e.Revision())
			if e.Delta() == 0 {
				settled = true
			}
		}
	}
}

// kvStream returns the stream behind kv. It is looked up once per bucket:
// the handle only names the stream, so a listing or a watch does not pay
// a stream info request each time.
func (s *Store) kvStream(ctx context.Context, kv jetstream.KeyValue) (jetstream.Stream, error) {
	b := s.on()
	b.mu.Lock()
	st := b.kvStreams[kv.Bucket()]
	b.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err := b.js.Stream(ctx, "KV_"+kv.Bucket())
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.kvStreams[kv.Bucket()] = st
	b.mu.Unlock()
	return st, nil
}

// lastSeq is the stream sequence of the last message of kv's keys
// matching filter now (0: none): the leader's on a replicated bucket, so
// that a listing read on to it shows every acknowledged write (see
// consistent).
func (s *Store) lastSeq(ctx context.Context, kv jetstream.KeyValue, filter string) (uint64, error) {
	if s.consistent() {
		m, err := s.leaderLast(ctx, "KV_"+kv.Bucket(), "$KV."+kv.Bucket()+"."+filter)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		return m.Seq, nil
	}
	st, err := s.kvStream(ctx, kv)
	if err != nil {
		return 0, err
	}
	m, err := st.GetLastMsgForSubject(ctx, "$KV."+kv.Bucket()+"."+filter)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return m.Sequence, nil
}

// taskJSON is a task record: t as json.Marshal encodes it
// (model.AppendTaskJSON), in a buffer sized for an ordinary task.
func taskJSON(t *model.Task) ([]byte, error) {
	return model.AppendTaskJSON(make([]byte, 0, 512), t)
}
