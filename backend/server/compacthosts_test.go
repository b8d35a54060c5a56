package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/model"
)

// TestOperateCompactHosts: a native operate names its hosts "cloud:ip"
// (the compact form the client sends), as objects, or both in one list;
// the op reaches exactly those hosts. A wrong text is refused naming its
// entry, nothing started.
func TestOperateCompactHosts(t *testing.T) {
	e := newEnv(t, testConfig())
	ctx := context.Background()
	hv, err := e.eng.Hosts(ctx, backend.HostQuery{Namespace: "gse"})
	if err != nil || len(hv) < 3 {
		t.Fatalf("%d hosts, %v", len(hv), err)
	}
	a, b := hv[0].Host, hv[2].Host
	r := e.post("/api/v1/operate", fmt.Sprintf(`{"op_type": 2, "selector": {"namespace": "gse", "hosts": [%q, {"ip": %q, "bk_cloud_id": %d}]}}`,
		a.AgentID(), b.IP, b.CloudID))
	if !r.Result {
		t.Fatalf("operate on compact and object hosts: %s", r.raw)
	}
	task := decode[model.Task](t, r.Data)
	ch, err := e.eng.Watch(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []model.Host
	for res := range ch {
		if !slices.Contains(got, res.Host) {
			got = append(got, res.Host)
		}
	}
	slices.SortFunc(got, func(x, y model.Host) int { return x.Order().Compare(y.Order()) })
	want := []model.Host{a, b}
	slices.SortFunc(want, func(x, y model.Host) int { return x.Order().Compare(y.Order()) })
	if !slices.Equal(got, want) {
		t.Fatalf("the op reached %v, want exactly %v", got, want)
	}

	before, _ := e.eng.Tasks(ctx, 100)
	for _, c := range []struct{ hosts, field, reason string }{
		{`["0:10.0.0.1", " 0:10.0.0.2"]`, "selector.hosts[1]", "cloud id"},
		{`["0:10.0.0.1", "+1:10.0.0.2"]`, "selector.hosts[1]", "cloud id"},
		{`["10.0.0.1"]`, "selector.hosts[0]", "want cloud:ip"},
		{`["0:10.0.0.999"]`, "selector.hosts[0]", "not an IP address"},
		{`["0:fe80::1%eth0"]`, "selector.hosts[0]", "zone"},
		{`[7]`, "selector.hosts[0]", "want a host"},
		{`[{"ip": 7}]`, "selector.hosts[0].ip", "want a string"},
		{`"0:10.0.0.1"`, "selector.hosts", "want an array"},
	} {
		r := e.post("/api/v1/operate", `{"op_type": 2, "selector": {"namespace": "gse", "hosts": `+c.hosts+`}}`)
		if r.Result || r.Status != http.StatusBadRequest || !strings.Contains(r.Message, c.field) || !strings.Contains(r.Message, c.reason) {
			t.Errorf("hosts %s: %d %s, want 400 naming %s (%s)", c.hosts, r.Status, r.Message, c.field, c.reason)
		}
	}
	if after, _ := e.eng.Tasks(ctx, 100); len(after) != len(before) {
		t.Fatalf("%d tasks after the refusals, %d before: a refused request started one", len(after), len(before))
	}
}

// TestSelectAllFitsTheBodyLimit: a select-all of 110,000 hosts, as the
// client sends it (compact), is within the default max_body_bytes and
// read by the server (refused only because no such host carries the
// process); in the object form it is over the limit (413).
func TestSelectAllFitsTheBodyLimit(t *testing.T) {
	cfg := testConfig()
	cfg.MaxBodyBytes = config.Default().Server.MaxBodyBytes
	e := newEnv(t, cfg)
	hosts := make([]model.Host, 110000)
	objs := make([]map[string]any, len(hosts))
	for i := range hosts {
		hosts[i] = model.Host{IP: fmt.Sprintf("10.%d.%d.%d", 100+i>>16, i>>8&255, i&255), CloudID: 0}
		objs[i] = map[string]any{"ip": hosts[i].IP, "bk_cloud_id": 0}
	}
	body, err := json.Marshal(backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "gse", Hosts: hosts}})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(body)) >= cfg.MaxBodyBytes {
		t.Fatalf("a 110,000-host request is %d bytes, over the default limit %d", len(body), cfg.MaxBodyBytes)
	}
	r := e.post("/api/v1/operate", body)
	if r.Status != http.StatusBadRequest || !strings.Contains(r.Message, "matches no (host, process) target") {
		t.Fatalf("compact 110,000 hosts (%d bytes): %d %s, want it read and refused for its targets", len(body), r.Status, r.Message)
	}
	obj, _ := json.Marshal(map[string]any{"op_type": 2, "selector": map[string]any{"namespace": "gse", "hosts": objs}})
	if r := e.post("/api/v1/operate", obj); r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("object form of 110,000 hosts (%d bytes): %d %s, want 413", len(obj), r.Status, r.Message)
	}
}
