package cli

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"gseproc/model"
)

var taskIDRe = regexp.MustCompile(`GSETASK:\d{14}:\d+`)

// opResult is how an op run aside (startOp) ended.
type opResult struct {
	code     int
	out, err string
}

// startOp runs `gseproc args...` aside (an op blocks at each manual
// pause): its end comes on the channel; its stderr, as it is written, in
// the buffer.
func startOp(args ...string) (<-chan opResult, *syncBuf) {
	var out, errb syncBuf
	done := make(chan opResult, 1)
	go func() {
		code := Main(context.Background(), args, Stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
		done <- opResult{code, out.String(), errb.String()}
	}()
	return done, &errb
}

// taskOf is the task id an op run aside printed on errb.
func taskOf(t *testing.T, errb *syncBuf) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if id := taskIDRe.FindString(errb.String()); id != "" {
			return id
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("op printed no task id:\n%s", errb.String())
	return ""
}

// showUntil is `gseproc task show id` once it says want.
func showUntil(t *testing.T, base, id, want string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, errOut := run(t, "task", "show", id, "--server", base)
		if code != 0 {
			t.Fatalf("task show: exit %d\n%s", code, errOut)
		}
		if strings.Contains(out, want) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("task show never said %q:\n%s", want, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRollingOpCommand: `gseproc op restart --batch ... --pause manual`
// against a real server rolls the restart; `gseproc task show` shows the
// batches, `task resume` lets each batch go, and op prints each batch as
// it starts and the roll's end. `task abort` stops another roll: the op
// exits 1 and says why. Rollout flags without --batch, or a bad value,
// are refused (exit 2) before anything is sent.
func TestRollingOpCommand(t *testing.T) {
	cfg := fleetConfig(t, "")
	base, _, _ := startServer(t, "--demo", "--config", cfg, "--listen", "127.0.0.1:0", "--nats-listen", "127.0.0.1:-1")

	if code, _, errOut := run(t, "op", "restart", "--ns", "web", "--canary", "1", "--server", base); code != 2 || !strings.Contains(errOut, "give --batch") {
		t.Fatalf("--canary without --batch: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := run(t, "op", "restart", "--ns", "web", "--batch", "0%", "--pause", "soon", "--server", base); code != 2 ||
		!strings.Contains(errOut, "rollout.batch") || !strings.Contains(errOut, "rollout.pause") {
		t.Fatalf("bad rollout: exit %d\n%s", code, errOut)
	}

	done, errb := startOp("op", "restart", "--ns", "web", "--name", "nginx", "--batch", "50%", "--canary", "1", "--max-fail", "1", "--pause", "manual", "--server", base)
	id := taskOf(t, errb)
	out := showUntil(t, base, id, "roll waiting_resume")
	for _, want := range []string{"max-fail 1 per batch", "BATCH", "1 (canary)", "done", "waiting"} {
		if !strings.Contains(out, want) {
			t.Fatalf("task show after the canary does not say %q:\n%s", want, out)
		}
	}
	var res opResult
	for resumed := 0; ; resumed++ {
		if resumed > 5 {
			t.Fatalf("still rolling after %d resumes", resumed)
		}
		if code, out, errOut := run(t, "task", "resume", id, "--server", base); code != 0 || !strings.Contains(out, "resume asked") {
			if !strings.Contains(errOut, "over") {
				t.Fatalf("task resume: exit %d\n%s%s", code, out, errOut)
			}
			select { // over meanwhile: op ends
			case res = <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("the roll is over and op did not end")
			}
			break
		}
		select {
		case res = <-done:
		case <-time.After(200 * time.Millisecond):
			continue
		}
		break
	}
	if res.code != 0 {
		t.Fatalf("op: exit %d\n%s\n%s", res.code, res.out, res.err)
	}
	for _, want := range []string{"rolled: batch 50% · canary 1 · pause until resumed · max-fail 1 per batch", "-- canary batch 1 of 3", "-- batch 2 of 3", "-- batch 3 of 3", "roll done: all 3 batches done"} {
		if !strings.Contains(res.err, want) {
			t.Fatalf("op's stderr does not say %q:\n%s", want, res.err)
		}
	}

	done, errb = startOp("op", "restart", "--ns", "web", "--batch", "1", "--pause", "manual", "--server", base)
	id = taskOf(t, errb)
	showUntil(t, base, id, "roll waiting_resume")
	if code, out, errOut := run(t, "task", "abort", id, "--server", base); code != 0 || !strings.Contains(out, "roll stopped: aborted by "+operator()) ||
		!strings.Contains(out, "not_sent") {
		t.Fatalf("task abort: exit %d\n%s%s", code, out, errOut)
	} else if !notSentCancelled(out) {
		t.Fatalf("task abort: an unsent batch's targets are not counted cancelled (and not failed):\n%s", out)
	}
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("op did not end after the abort")
	}
	if res.code != 1 || !strings.Contains(res.err, "roll stopped: aborted by") {
		t.Fatalf("aborted op: exit %d\n%s", res.code, res.err)
	}
	if code, _, errOut := run(t, "task", "resume", id, "--server", base); code != 1 || !strings.Contains(errOut, "over") {
		t.Fatalf("resume of an aborted roll: exit %d\n%s", code, errOut)
	}
}

// TestTaskCancelCommand: `gseproc task cancel ID` against a real server
// cancels a task it is running (a roll waiting for its operator: the
// hosts not sent the op yet are cancelled), says so and prints the task
// cancelled; the op following the task ends with exit 1. A cancel of the
// task once it is over changes nothing and says so; a malformed id is
// refused (exit 2) before anything is sent.
func TestTaskCancelCommand(t *testing.T) {
	cfg := fleetConfig(t, "")
	base, _, _ := startServer(t, "--demo", "--config", cfg, "--listen", "127.0.0.1:0", "--nats-listen", "127.0.0.1:-1")

	if code, _, errOut := run(t, "task", "cancel", "GSETASK:nope", "--server", base); code != 2 {
		t.Fatalf("task cancel of a malformed id: exit %d\n%s", code, errOut)
	}
	done, errb := startOp("op", "restart", "--ns", "web", "--batch", "1", "--pause", "manual", "--server", base)
	id := taskOf(t, errb)
	showUntil(t, base, id, "roll waiting_resume")
	code, o, errOut := run(t, "task", "cancel", id, "--server", base)
	if code != 0 || !strings.Contains(o, id+": cancel asked") || !strings.Contains(o, "restart cancelled") || !strings.Contains(o, " cancelled in ") {
		t.Fatalf("task cancel: exit %d\n%s%s", code, o, errOut)
	}
	select {
	case res := <-done:
		if res.code != 1 {
			t.Fatalf("the cancelled op: exit %d, want 1\n%s", res.code, res.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the op did not end after its task was cancelled")
	}
	if code, o, errOut := run(t, "task", "cancel", id, "--server", base); code != 0 || !strings.Contains(o, "restart cancelled") {
		t.Fatalf("task cancel of a cancelled task: exit %d\n%s%s", code, o, errOut)
	}
}

// notSentCancelled reports whether every not_sent row of a roll's batch
// table (BATCH HOSTS STATE TARGETS OK FAILED CANCELLED RUNNING PENDING)
// counts its targets cancelled and none failed, and there is such a row.
func notSentCancelled(out string) bool {
	rows := 0
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) != 9 || f[2] != model.BatchNotSent {
			continue
		}
		rows++
		if f[5] != "0" || f[6] != f[3] || f[3] == "0" {
			return false
		}
	}
	return rows > 0
}
