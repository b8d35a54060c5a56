package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"gseproc/model"
)

// AgentConfig is the [agent] section: the identity of a host agent
// (`gseproc agent`) and the tuning of its supervision. The NATS connection
// itself is configured in [nats].
type AgentConfig struct {
	// Identity: the host as the fleet addresses it (bk_cloud_id, ip) and
	// labels for selectors.
	CloudID int               `toml:"cloud_id"`
	IP      string            `toml:"ip"`
	Labels  map[string]string `toml:"labels"`

	// DataDir holds the hosting registry (procinfo.json); it survives agent
	// restarts so hosted processes are re-adopted.
	DataDir string `toml:"data_dir"`

	// SampleInterval is how often cpu and memory of hosted processes are
	// sampled; cpu is the delta of utime+stime between two samples.
	SampleInterval Duration `toml:"sample_interval"`
	// BreachCount consecutive samples over cpu_lmt or mem_lmt stop the process.
	BreachCount int `toml:"breach_count"`

	// BackoffBase is the first restart delay after a quick failure when the
	// process has no start_interval; the delay doubles (with +-20% jitter)
	// per consecutive failure up to BackoffMax. The first restart after a
	// process that ran stably is immediate.
	BackoffBase Duration `toml:"backoff_base"`
	BackoffMax  Duration `toml:"backoff_max"`
	// StableAfter: a process up this long has its failure count reset.
	StableAfter Duration `toml:"stable_after"`

	// MinStartWait is the shortest time the start check waits for the pid
	// file when the process's own window (start_check_secs/end) is shorter,
	// and the shortest time a job (periodic, one-shot) must not fail in to
	// count as started.
	MinStartWait Duration `toml:"min_start_wait"`
	// MinStopWait is the shortest time the stop post-check waits for the
	// process to disappear (when stop_check_secs is 0).
	MinStopWait Duration `toml:"min_stop_wait"`
	// PollInterval is the pid-file poll of the start check and the /proc
	// poll used only where pidfd_open is unavailable.
	PollInterval Duration `toml:"poll_interval"`

	// OutputLimit bounds the command output kept for a result (its tail),
	// at most model.MaxOutput: what a server keeps of any agent's reply.
	OutputLimit int `toml:"output_limit"`
	// EventBuffer bounds the events queued per subscriber; beyond it the
	// oldest are dropped (and counted in the log).
	EventBuffer int `toml:"event_buffer"`

	// Subreaper makes the agent the subreaper of what its commands leave
	// behind (Linux PR_SET_CHILD_SUBREAPER): a daemon whose shell exits
	// becomes the agent's child instead of init's, and the agent reaps it
	// when it exits. An agent that is pid 1 (in a container) reaps them
	// whatever this says.
	Subreaper bool `toml:"subreaper"`

	// LogCapture: the standard output and error of every process the agent
	// starts go to files in DataDir/logs/<namespace>:<name>/ (stdout.log,
	// stderr.log; instance i > 1: stdout.<i>.log ...), which `gseproc logs`
	// tails. A file over LogMaxBytes is rotated (copied to .1, .2 ...; the
	// oldest beyond LogKeep dropped; then emptied in place, so the process
	// keeps writing to it), checked every sample_interval (the files of
	// processes the agent no longer knows, every tenth).
	LogCapture  bool  `toml:"log_capture"`
	LogMaxBytes int64 `toml:"log_max_bytes"`
	LogKeep     int   `toml:"log_keep"`
	// LogTailRate bounds the bytes per second one tail stream is served.
	LogTailRate int `toml:"log_tail_rate"`
}

// DefaultAgentDataDir is where the hosting registry lives by default.
const DefaultAgentDataDir = "/var/lib/gseproc/agent"

func defaultAgent() AgentConfig {
	return AgentConfig{
		DataDir:        DefaultAgentDataDir,
		SampleInterval: Duration(2 * time.Second),
		BreachCount:    3,
		BackoffBase:    Duration(time.Second),
		BackoffMax:     Duration(time.Minute),
		StableAfter:    Duration(time.Minute),
		MinStartWait:   Duration(time.Second),
		MinStopWait:    Duration(time.Second),
		PollInterval:   Duration(50 * time.Millisecond),
		OutputLimit:    4096,
		EventBuffer:    1024,
		LogCapture:     true,
		LogMaxBytes:    10 << 20,
		LogKeep:        3,
		LogTailRate:    model.DefaultTailRate,
	}
}

// DefaultAgent returns the [agent] defaults (for tests and embedding).
func DefaultAgent() AgentConfig { return defaultAgent() }

// validate checks the section as a config file gives it. The identity may
// be absent here (a server's config has no [agent] ip); CheckIdentity is
// what an agent about to run calls.
func (c AgentConfig) validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("agent.%s: "+format, append([]any{field}, args...)...))
	}
	if c.CloudID < 0 || c.CloudID > model.MaxCloudID {
		add("cloud_id", "%d is out of range [0,%d]", c.CloudID, model.MaxCloudID)
	}
	if c.IP != "" {
		if _, err := model.ParseIP(c.IP); err != nil {
			add("ip", "%v", err)
		}
	}
	// The label rule is the server's, which leaves out of a heartbeat
	// what it refuses (transport.checkLabels): refused here first.
	var count model.Validator
	if count.CheckLabelCount("labels", len(c.Labels)); count.Err() != nil {
		add("labels", "%v", count.Err())
	}
	for k, val := range c.Labels {
		var v model.Validator
		if v.CheckLabel("labels", k, val); v.Err() != nil {
			add("labels", "%q: %v", k, v.Err())
		}
	}
	pos := []struct {
		field string
		d     Duration
	}{
		{"sample_interval", c.SampleInterval}, {"backoff_base", c.BackoffBase},
		{"backoff_max", c.BackoffMax}, {"poll_interval", c.PollInterval},
	}
	for _, p := range pos {
		if p.d <= 0 {
			add(p.field, "%s must be > 0", p.d.D())
		}
	}
	nonNeg := []struct {
		field string
		d     Duration
	}{{"stable_after", c.StableAfter}, {"min_start_wait", c.MinStartWait}, {"min_stop_wait", c.MinStopWait}}
	for _, p := range nonNeg {
		if p.d < 0 {
			add(p.field, "%s must be >= 0", p.d.D())
		}
	}
	if c.BackoffMax < c.BackoffBase {
		add("backoff_max", "%s must be >= backoff_base %s", c.BackoffMax.D(), c.BackoffBase.D())
	}
	if c.BreachCount < 1 {
		add("breach_count", "%d must be >= 1", c.BreachCount)
	}
	if c.OutputLimit < 64 || c.OutputLimit > model.MaxOutput {
		add("output_limit", "%d must be in [64, %d] (a server keeps at most %d bytes of a reply's output)", c.OutputLimit, model.MaxOutput, model.MaxOutput)
	}
	if c.EventBuffer < 1 {
		add("event_buffer", "%d must be >= 1", c.EventBuffer)
	}
	if c.LogMaxBytes < 4096 {
		add("log_max_bytes", "%d must be >= 4096", c.LogMaxBytes)
	}
	if c.LogKeep < 0 || c.LogKeep > 100 {
		add("log_keep", "%d is out of range [0,100]", c.LogKeep)
	}
	if c.LogTailRate < 1024 {
		add("log_tail_rate", "%d must be >= 1024 (bytes per second)", c.LogTailRate)
	}
	return errors.Join(errs...)
}

// Host is the agent's identity in canonical form (an IPv4-mapped address
// as IPv4, IPv6 lower-cased and compressed).
func (c AgentConfig) Host() (model.Host, error) {
	h, err := model.Host{IP: c.IP, CloudID: c.CloudID}.Canonical()
	if err != nil {
		return model.Host{}, fmt.Errorf("agent identity: %w", err)
	}
	return h, nil
}

// Validate checks the section for an agent about to run: everything
// validate checks, plus an IP and a data directory.
func (c AgentConfig) Validate() error {
	var errs []error
	if err := c.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.IP == "" {
		errs = append(errs, errors.New("agent.ip: required (the host's address in its cloud area, e.g. 10.0.0.1)"))
	}
	if strings.TrimSpace(c.DataDir) == "" {
		errs = append(errs, errors.New("agent.data_dir: required (a directory for the hosting registry)"))
	}
	return errors.Join(errs...)
}
