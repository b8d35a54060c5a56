package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"gseproc/backend/sshconsole/sshtest"
	"gseproc/model"
)

var sshListenRe = regexp.MustCompile(`ssh console listening on (\S+) \(host key (SHA256:\S+),`)

// TestSSHCommand: `gseproc ssh --server URL` serves the console of a real
// server over SSH; a key's operator sees only its namespaces, and what it
// does is in the server's audit trail under its name, via ssh. A bad
// authorized-keys file stops it with the line named.
func TestSSHCommand(t *testing.T) {
	base, _, _ := startServer(t, "--demo", "--listen", "127.0.0.1:0", "--nats-listen", "127.0.0.1:-1")
	dir := t.TempDir()
	alice, alicePub := sshtest.NewKey(t)
	keysFile := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(keysFile, []byte(`operator="alice",namespaces="gse" `+alicePub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hostKey := filepath.Join(dir, "host_key")
	cfgFile := filepath.Join(dir, "gseproc.toml")
	if err := os.WriteFile(cfgFile, []byte("[console]\nconfirm_threshold = 100000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"ssh", "--config", cfgFile, "--server", base, "--listen", "127.0.0.1:0", "--host-key", hostKey, "--authorized-keys", keysFile}

	bad := filepath.Join(dir, "bad_keys")
	if err := os.WriteFile(bad, []byte("# ok\n"+alicePub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "ssh", "--authorized-keys", bad, "--host-key", hostKey, "--listen", "127.0.0.1:0"); code != 2 || !strings.Contains(errOut, "line 2") || !strings.Contains(errOut, "operator") {
		t.Fatalf("bad authorized keys: exit %d, %s", code, errOut)
	}

	ctx, cancel := context.WithCancel(context.Background())
	out, errb := &syncBuf{}, &syncBuf{}
	done := make(chan int, 1)
	go func() { done <- Main(ctx, args, Stdio{In: strings.NewReader(""), Out: out, Err: errb}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("gseproc ssh exit %d: %s", code, errb.String())
			}
		case <-time.After(20 * time.Second):
			t.Error("gseproc ssh did not stop within 20s of cancel")
		}
	})
	var m []string
	sshtest.Until(t, "gseproc ssh to listen", func() bool { m = sshListenRe.FindStringSubmatch(out.String()); return m != nil })
	var hk gossh.PublicKey
	tm := sshtest.Open(t, m[1], alice, &hk, 100, 30)
	if fp := gossh.FingerprintSHA256(hk); fp != m[2] {
		t.Fatalf("host key %s, printed %s", fp, m[2])
	}
	tm.Wait(t, 0, "1 namespace", "gse")
	for _, other := range []string{"cache", "batch"} {
		if strings.Contains(tm.Output(), other) {
			t.Fatalf("alice sees namespace %s", other)
		}
	}
	tm.Keys(t, "\r")
	tm.Wait(t, 0, "Choose hosts by label")
	tm.Keys(t, "\r")
	tm.Wait(t, 0, "hosts ·")
	tm.Press(t, "a", "selected")
	tm.Press(t, "o", "run restart_cmd") // the picker has loaded: the ops are enabled
	from := len(tm.Output())
	tm.Keys(t, "\r") // once: a second enter would answer the dialog's default, No
	tm.Wait(t, from, "Proceed?")
	time.Sleep(500 * time.Millisecond) // past the dialog's guard against typed-ahead keys
	tm.Keys(t, "y")

	var es []model.AuditEntry
	sshtest.Until(t, "alice's operation in the server's audit trail", func() bool {
		code, stdout, _ := run(t, "audit", "--server", base, "--operator", "alice", "--action", "operate", "--json")
		es = es[:0]
		for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
			var e model.AuditEntry
			if code == 0 && json.Unmarshal([]byte(l), &e) == nil {
				es = append(es, e)
			}
		}
		return len(es) > 0
	})
	if e := es[0]; e.Actor.Via != "ssh/api:v1.operate" || e.Namespaces[0] != "gse" || e.Result != model.AuditOK {
		t.Fatalf("audit entry: %+v", e)
	}
}
