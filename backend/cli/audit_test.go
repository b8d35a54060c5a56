package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"gseproc/model"
)

// TestAuditCommand: operations and changes made with the CLI against a
// real server are in the server's durable trail under the local operator,
// and `gseproc audit` lists them with filters, as a table or JSON.
func TestAuditCommand(t *testing.T) {
	base, _, _ := startServer(t, "--demo", "--listen", "127.0.0.1:0", "--nats-listen", "127.0.0.1:-1")
	if code, out, errOut := run(t, "op", "status", "--server", base, "--ns", "gse", "--name", "proc-test", "--json"); code != 0 {
		t.Fatalf("op: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := run(t, "delete", "--server", base, "gse:proc-test"); code != 0 {
		t.Fatalf("delete: exit %d\n%s\n%s", code, out, errOut)
	}

	code, out, errOut := run(t, "audit", "--server", base, "--json", "--operator", operator())
	if code != 0 {
		t.Fatalf("audit: exit %d\n%s", code, errOut)
	}
	var es []model.AuditEntry
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e model.AuditEntry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		es = append(es, e)
	}
	if len(es) < 2 || es[0].Action != model.AuditDeleteProcess || es[0].Targets[0] != "gse:proc-test" ||
		es[0].Actor.Via != "cli/api:v1.delete_process" {
		t.Fatalf("newest entry of %s: %+v", operator(), es)
	}
	var op *model.AuditEntry
	for i := range es {
		if es[i].Action == model.AuditOperate {
			op = &es[i]
		}
	}
	if op == nil || op.Op != "status" || op.Result != model.AuditOK || op.TaskID == "" || op.TargetCount == 0 ||
		op.Actor.Via != "cli/api:v1.operate" || op.Namespaces[0] != "gse" {
		t.Fatalf("operate entry: %+v", op)
	}

	code, out, _ = run(t, "audit", "--server", base, "--action", "delete_process", "--since", "1h")
	if code != 0 || !strings.Contains(out, "gse:proc-test") || !strings.Contains(out, "operator="+operator()) || strings.Contains(out, "status") {
		t.Fatalf("audit table, delete_process: exit %d\n%s", code, out)
	}
	code, _, errOut = run(t, "audit", "--server", base, "--action", "explode", "--since", "soon")
	if code != 2 || !strings.Contains(errOut, "action") || !strings.Contains(errOut, "--since") {
		t.Fatalf("bad filters: exit %d, %s", code, errOut)
	}
}
