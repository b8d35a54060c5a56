package sshconsole

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/simulator"
	"gseproc/backend/sshconsole/sshtest"
	"gseproc/backend/store"
	"gseproc/model"
)

// fleet is an engine over a quiet simulated fleet with namespaces alpha
// and omega.
func fleet(t *testing.T) *engine.Engine {
	t.Helper()
	sc := config.Default().Simulator
	sc.Hosts, sc.Seed, sc.Namespaces = 12, 5, []string{"alpha", "omega"}
	sc.LatencyMedian, sc.LatencyP99 = config.Duration(time.Millisecond), config.Duration(3*time.Millisecond)
	sc.FailureRate, sc.OfflineRate, sc.UnreachableRate, sc.CrashRate = 0, 0, 0, 0
	f := simulator.New(sc)
	e := engine.New(config.Default().Engine, f, f, store.NewMemory())
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Seed(ctx, f.Definitions()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(); _ = f.Close() })
	return e
}

// serve starts the SSH console on 127.0.0.1 and returns its address.
func serve(t *testing.T, o Options) string {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// TestSSHConsole drives real SSH sessions on 127.0.0.1: a key of the file
// gets the console limited to its namespaces, resizes reach it, its
// actions run and are audited under its operator via ssh; an unknown key
// is refused; the host key is generated once and kept; an idle session
// is closed.
func TestSSHConsole(t *testing.T) {
	e := fleet(t)
	aliceKey, alicePub := sshtest.NewKey(t)
	_, bobPub := sshtest.NewKey(t)
	strangerKey, _ := sshtest.NewKey(t)
	keys, err := ParseAuthorizedKeys([]byte(
		`operator="alice",namespaces="alpha" ` + alicePub + " alice@laptop\n" +
			`operator="bob",namespaces="*",read-only ` + bobPub + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	hostKeyPath := filepath.Join(t.TempDir(), "ssh_host_ed25519_key")
	cfg := config.Default().Console
	cfg.ConfirmThreshold = 100000 // a y/N question, not a typed count
	o := Options{Backend: e, Console: cfg, Keys: keys, HostKeyPath: hostKeyPath, IdleTimeout: time.Minute,
		MaxSessions: config.Default().SSH.MaxSessions, Version: "test"}
	if _, err := New(Options{Backend: e, Console: cfg, Keys: keys, HostKeyPath: hostKeyPath, Version: "test"}); err == nil ||
		!strings.Contains(err.Error(), "idle_timeout") {
		t.Fatalf("unset idle timeout and max sessions: %v, want refused naming them", err)
	}
	addr := serve(t, o)
	var hostKey gossh.PublicKey

	// An unknown key is refused at authentication.
	if c, err := sshtest.Dial(addr, strangerKey, &hostKey); err == nil {
		c.Close()
		t.Fatal("a key not in the file got in")
	}
	st, err := os.Stat(hostKeyPath)
	if err != nil || st.Mode().Perm()&0o077 != 0 {
		t.Fatalf("host key file: %v, mode %v", err, st.Mode())
	}

	tm := sshtest.Open(t, addr, aliceKey, &hostKey, 100, 30)
	tm.Wait(t, 0, "1 namespace", "alpha")
	if strings.Contains(tm.Output(), "omega") {
		t.Fatal("alice sees namespace omega")
	}
	// A resize reaches the console: below its minimum it says so, with
	// the new size.
	if err := tm.Sess.WindowChange(12, 50); err != nil {
		t.Fatal(err)
	}
	tm.Wait(t, 0, "Terminal too small: 50x12")
	if err := tm.Sess.WindowChange(30, 100); err != nil {
		t.Fatal(err)
	}
	// Drill down to the hosts of a label, select them all and run the
	// picker's first op.
	n := len(tm.Output())
	tm.Wait(t, n, "alpha")
	tm.Keys(t, "\r")
	tm.Wait(t, n, "Choose hosts by label")
	tm.Keys(t, "\r")
	tm.Wait(t, 0, "hosts ·")
	tm.Press(t, "a", "selected")
	tm.Press(t, "o", "run restart_cmd") // the picker has loaded: the ops are enabled
	from := len(tm.Output())
	tm.Keys(t, "\r") // once: a second enter would answer the dialog's default, No
	tm.Wait(t, from, "Proceed?")
	time.Sleep(500 * time.Millisecond) // past the dialog's guard against typed-ahead keys
	tm.Keys(t, "y")
	var entry model.AuditEntry
	sshtest.Until(t, "alice's operation in the audit trail", func() bool {
		es, _ := e.Audit(context.Background(), model.AuditQuery{Operator: "alice", Action: model.AuditOperate})
		if len(es) > 0 {
			entry = es[0]
		}
		return len(es) > 0
	})
	if entry.Actor.Via != "ssh" || entry.Result != model.AuditOK || len(entry.Namespaces) != 1 || entry.Namespaces[0] != "alpha" {
		t.Fatalf("audit entry: %+v", entry)
	}
	task, err := e.Task(context.Background(), entry.TaskID)
	if err != nil || task.Task.Operator != "alice" {
		t.Fatalf("task %s: %+v %v", entry.TaskID, task.Task, err)
	}
	tm.Keys(t, "q")
	select {
	case <-tm.Ended:
	case <-time.After(30 * time.Second):
		// The console may ask before quitting.
		tm.Keys(t, "y")
		select {
		case <-tm.Ended:
		case <-time.After(30 * time.Second):
			t.Fatal("session did not end after q")
		}
	}

	// A restart keeps the host key; an idle session is closed.
	o.IdleTimeout = 1500 * time.Millisecond
	addr2 := serve(t, o)
	idle := sshtest.Open(t, addr2, aliceKey, &hostKey, 100, 30) // the callback refuses a changed host key
	idle.Wait(t, 0, "alpha")
	select {
	case <-idle.Ended:
	case <-time.After(30 * time.Second):
		t.Fatal("idle session still open after 30s")
	}
	idle.Wait(t, 0, "no key pressed for 1.5s")
}

// TestRestrict: the restricted backend keeps an operator within its
// namespaces, for reads and for changes; each refusal is in the audit
// trail under the operator's name, and Info counts within the namespaces.
func TestRestrict(t *testing.T) {
	e := fleet(t)
	ctx := backend.WithActor(context.Background(), model.Actor{Operator: "alice", Via: "ssh"})
	r := backend.Restrict(e, backend.AllowNamespaces([]string{"alpha"}))
	nss, err := r.Namespaces(ctx)
	if err != nil || len(nss) != 1 || nss[0].Name != "alpha" {
		t.Fatalf("namespaces: %+v %v", nss, err)
	}
	hv, err := r.Hosts(ctx, backend.HostQuery{})
	if err != nil || len(hv) == 0 {
		t.Fatalf("hosts: %d %v", len(hv), err)
	}
	for _, h := range hv {
		for _, p := range h.Procs {
			if !strings.HasPrefix(p.Key, "alpha:") {
				t.Fatalf("host %s shows %s", h.Host, p.Key)
			}
		}
	}
	for name, err := range map[string]error{
		"hosts of omega": func() error { _, err := r.Hosts(ctx, backend.HostQuery{Namespace: "omega"}); return err }(),
		"operate omega": func() error {
			_, err := r.Operate(ctx, backend.OperateRequest{Op: model.OpStop, Selector: backend.Selector{Namespace: "omega"}})
			return err
		}(),
		"operate everywhere": func() error {
			_, err := r.Operate(ctx, backend.OperateRequest{Op: model.OpStop, Selector: backend.Selector{Labels: map[string]string{"tier": "batch"}}})
			return err
		}(),
		"delete omega":  r.DeleteProcess(ctx, "omega:omega-server"),
		"audit omega":   func() error { _, err := r.Audit(ctx, model.AuditQuery{Namespace: "omega"}); return err }(),
		"save in omega": r.SaveProcess(ctx, model.ProcessDef{Process: model.Process{Meta: model.Meta{Namespace: "omega", Name: "x"}}}),
	} {
		if !errors.Is(err, model.ErrForbidden) {
			t.Errorf("%s: %v, want ErrForbidden", name, err)
		}
	}
	denied, err := e.Audit(ctx, model.AuditQuery{Action: model.AuditScopeDenied})
	if err != nil || len(denied) != 6 {
		t.Fatalf("scope_denied entries: %+v %v, want the 6 refusals", denied, err)
	}
	for _, x := range denied {
		if x.Actor.Operator != "alice" || x.Actor.Via != "ssh" || x.Result != model.AuditRefused || x.Op == "" ||
			len(x.Namespaces) != 1 || !strings.Contains(x.Summary, "not allowed") {
			t.Errorf("refusal entry %+v", x)
		}
	}
	info, err := r.Info(ctx)
	all, _ := e.Info(ctx)
	defs, _ := r.Processes(ctx, backend.ProcQuery{})
	if err != nil || info.Hosts != len(hv) || info.Processes != len(defs) || info.Hosts >= all.Hosts || info.Processes >= all.Processes {
		t.Errorf("restricted info %+v (%v), whole %+v: want the %d hosts and %d definitions of alpha", info, err, all, len(hv), len(defs))
	}
	// A task of omega is not found through the restricted view.
	omega, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "omega"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Task(ctx, omega.ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("task of omega: %v", err)
	}
	if err := r.Cancel(ctx, omega.ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("cancel of omega's task: %v", err)
	}
	ts, _ := r.Tasks(ctx, 100)
	if len(ts) != 0 {
		t.Errorf("tasks: %+v", ts)
	}
	if _, err := r.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "alpha"}}); err != nil {
		t.Errorf("status of alpha: %v", err)
	}
}

func TestParseAuthorizedKeys(t *testing.T) {
	_, pub := sshtest.NewKey(t)
	cases := []struct {
		line, err string
	}{
		{`operator="alice",namespaces="web,db" ` + pub + " c", ""},
		{`operator="bob",namespaces="*",read-only ` + pub, ""},
		{pub, "operator"},
		{`operator="alice" ` + pub, "namespaces"},
		{`namespaces="web" ` + pub, "operator"},
		{`operator="al ice",namespaces="web" ` + pub, "operator="},
		{`operator="alice",namespaces="a:b" ` + pub, "namespaces"},
		{`operator="alice",namespaces="web",command="sh" ` + pub, "command"},
		{`operator=alice,namespaces="web" ` + pub, "double quotes"},
		{"ssh-ed25519 notbase64", "not an OpenSSH public key"},
	}
	for _, c := range cases {
		keys, err := ParseAuthorizedKeys([]byte("# comment\n\n" + c.line + "\n"))
		switch {
		case c.err == "" && (err != nil || len(keys) != 1):
			t.Errorf("%q: %v", c.line, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "line 3")):
			t.Errorf("%q: error %v, want one naming line 3 and %q", c.line, err, c.err)
		}
	}
	twice := `operator="a",namespaces="x" ` + pub + "\n" + `operator="b",namespaces="*" ` + pub + "\n"
	if _, err := ParseAuthorizedKeys([]byte(twice)); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a key listed twice: %v", err)
	}
}

func TestLoadAuthorizedKeysRefusesWritableFile(t *testing.T) {
	_, pub := sshtest.NewKey(t)
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, []byte(`operator="a",namespaces="x" `+pub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if keys, err := LoadAuthorizedKeys(p); err != nil || len(keys) != 1 {
		t.Fatalf("0600 file: %v", err)
	}
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAuthorizedKeys(p); err == nil || !strings.Contains(err.Error(), "go-w") {
		t.Fatalf("0666 file: %v", err)
	}
}

func TestIdle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		since time.Duration
		want  bool
	}{{0, false}, {time.Minute, false}, {time.Minute + time.Nanosecond, true}, {time.Hour, true}} {
		if got := idle(t0, t0.Add(c.since), time.Minute); got != c.want {
			t.Errorf("idle after %s: %v, want %v", c.since, got, c.want)
		}
	}
}
