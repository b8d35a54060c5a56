package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"gseproc/model"
)

// `gseproc sim ACTION` drives the demo server's simulated fleet over the
// native API; bad flags are exit 2 with every problem named.
func TestSimControlCommand(t *testing.T) {
	base, _ := startDemoServer(t)
	code, out, errOut := run(t, "sim", "offline", "--server", base, "--ns", "web", "--share", "10%", "--note", "rack fire", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	var o model.SimOutcome
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if o.Action != model.SimOffline || len(o.Picked) == 0 || o.Selected < len(o.Picked)*5 || !strings.Contains(o.Message, "rack fire") {
		t.Fatalf("outcome %+v", o)
	}
	code, out, _ = run(t, "sim", "online", "--server", base, "--ns", "web")
	if code != 0 || !strings.Contains(out, "back online") || !strings.Contains(out, "picked: ") {
		t.Fatalf("online: exit %d: %s", code, out)
	}
	code, _, errOut = run(t, "sim", "latency", "--server", base, "--share", "150%")
	if code != 2 || !strings.Contains(errOut, "--share") {
		t.Fatalf("bad share: exit %d: %s", code, errOut)
	}
	code, _, errOut = run(t, "sim", "crash", "--server", base, "--ns", "web", "--rate", "7")
	if code != 2 || !strings.Contains(errOut, "selector.name") || !strings.Contains(errOut, "rate") {
		t.Fatalf("bad crash: exit %d: %s", code, errOut)
	}
}
