//go:build linux

package agent

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestProcTableSumsTheGroup: one read of /proc gives each process group's
// sums; a process in its own group is counted with its whole group, one in
// the agent's group alone.
func TestProcTableSumsTheGroup(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sh", "-c", "sleep 30 & sleep 30 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	m := readMachine()
	var tab procTable
	eventually(t, 10*time.Second, "the shell and its two sleeps", func() bool {
		var err error
		if tab, err = readProcTable(); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, st := range tab.procs {
			if st.PGRP == cmd.Process.Pid {
				n++
			}
		}
		return n == 3
	})
	_, rss, threads, err := tab.groupUsage(cmd.Process.Pid, m)
	if err != nil || threads != 3 || rss == 0 {
		t.Fatalf("group of 3: threads %d rss %d err %v", threads, rss, err)
	}
	self := syscall.Getpid()
	_, _, threads, err = tab.groupUsage(self, m)
	if st := tab.procs[self]; err != nil || threads != st.Threads {
		t.Fatalf("the agent's own group counts the process alone: %d vs %d (%v)", threads, st.Threads, err)
	}
	if _, _, _, err := tab.groupUsage(1<<30, m); err == nil {
		t.Fatal("a pid not in the table")
	}
}

// BenchmarkReadProcTable is the cost of one sample's read of /proc (it
// was paid once per hosted process in its own group before).
func BenchmarkReadProcTable(b *testing.B) {
	for b.Loop() {
		if _, err := readProcTable(); err != nil {
			b.Fatal(err)
		}
	}
}
