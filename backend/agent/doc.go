// Package agent is gseproc's host agent: it runs the control commands of
// processes on a Linux host, hosts (supervises) them after supervisord's
// state machine, enforces their cpu and memory limits, runs periodic and
// one-shot jobs, and keeps its hosting registry on disk so that an agent
// restart neither kills nor forgets what it hosts.
//
// Exits are noticed through pidfd_open (a descriptor that becomes readable
// the moment a process exits, child or not), so a hosted process that dies
// is started again within milliseconds; /proc is polled only on kernels
// without pidfd_open.
//
// What each op does in each state, and the restart policy, are decided by
// model/opsem (the simulator follows the same package); the agent carries
// the decisions out with real processes. Choices the GSE documents leave
// open:
//   - The first restart after a process that had been up is immediate; each
//     further consecutive failure waits start_interval (or backoff_base)
//     doubled per failure, +-20% jitter, capped at backoff_max. A process up
//     for stable_after has its failure count reset. After start_retries
//     restarts that did not stay up the process is FATAL (event
//     process_cancel_restart) and only a manual start brings it back.
//   - A process over cpu_lmt or mem_lmt for breach_count consecutive samples
//     is stopped (stop_cmd, then SIGKILL to its process group) and held: it
//     stays in the registry but is not restarted until a manual start.
//   - A process group (set_process_group_info; groups.go) pools a
//     namespace's hosted processes: over its cpu or mem pool limit for
//     breach_count samples in a row, the member with the highest score
//     (model.GroupResource.PoolVictim) is stopped and held the same way
//     (event process_group_resource_limit_exceed). Groups are kept in
//     procgroupinfo.json in the data dir.
//   - instance_num N (type 1): instance 1 uses pid_path, instance i > 1 uses
//     pid_path + "." + i; each start_cmd sees GSEPROC_INSTANCE (1..N),
//     GSEPROC_INSTANCE_NUM and GSEPROC_PID_FILE in its environment. An op
//     applies to every instance; status reports instance 1 with a count.
//   - Types 0 (periodic) and 2 (one-shot): start_cmd is the job itself; the
//     agent runs it as its own child (so it knows the exit status). A
//     one-shot that exits 0 is done; a non-zero exit follows the retry
//     rules. A periodic job runs every cycle_time seconds from its start
//     and a tick is skipped while the previous run is alive.
//
// The hosting registry (procinfo.json) is written whole, compact and
// atomically (kept.WriteFile), at most once per registryDelay (50 ms):
// a change only marks it due, and one write after the first change takes
// every change made meanwhile, outside the agent lock. The supervisor's
// own changes of a restart (a restart decided, the restart's new pid and
// count), which the next start recovers from the processes but for the
// count (below), are due within registrySupervisorDelay (1 s) instead, or
// with the next change an op makes: a crash storm writes the registry
// about once a second, not 20 times. An op answers only
// once the write that holds its change is on disk, so what an op did and
// answered survives a crash of the agent; Close writes what is left. A
// crash loses at most the supervisor's own changes not yet written (a
// give-up, within registryDelay; a restart decided, a restart's new pid
// and count, within registrySupervisorDelay), and the next start recovers
// the processes from themselves: a process alive with the recorded start
// time is re-adopted; a pid file written after the recorded start by a
// process carrying the instance's environment (GSEPROC_AGENT_ID,
// GSEPROC_PROC, GSEPROC_INSTANCE) is a restart not yet recorded and is
// re-adopted too, never started twice; anything else is not running and
// goes to the restart policy (a give-up lost this way is decided again
// after start_retries). A restart count lost so is not recovered: it
// reads lower by those restarts.
//
// No command is launched or waited for, and no state file written or
// synced, while the agent-wide lock is held: it guards the state in
// memory (the state changes' log lines are still written under it).
// A status op takes no lock at all (view.go): every change of what it
// reports publishes, before the lock is released, an immutable view of
// the process (the state machine's transitions publish on their own),
// and a status reads that view and /proc, so it never waits behind an
// op, a restart, a launch or a registry write (a version_cmd is still a
// command the status runs).
// Every child is reaped: the command's shell when it exits, a killed one
// late to exit in the background, a hosted process that is our child by
// its watcher. An agent that is pid 1, or a subreaper (agent.subreaper),
// inherits what its commands leave behind (a daemon whose shell exited)
// and reaps those orphans too, never a command's child its owner still
// waits for (reaper.go): a hosted orphan the moment it exits, by its
// watcher through its pidfd (waitid P_PIDFD), which names that very
// process and holds no launch back; any other in a sweep every second,
// which holds every launch from its fork until its pid is registered.
// The agent does not reap at each SIGCHLD (it did): an orphan no watcher
// knows stays a zombie up to a second, and a crash storm no longer pays
// a wake-up and a walk of all the agent's children for every exit, most
// of which left nothing to reap (reaper.go says why).
//
// The agent runs on Linux (pidfd, /proc, process groups); on other
// systems New reports that it is not supported, so that the console and
// the CLI still build and run there.
package agent
