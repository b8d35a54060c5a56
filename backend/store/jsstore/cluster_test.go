package jsstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gseproc/backend/config"
	"gseproc/backend/transport/natsembed"
	"gseproc/backend/transport/transporttest"
	"gseproc/model"
)

// TestClusterReplicas: on a 3-node cluster with 3 replicas, a store on
// each of two nodes shares the data, and when one node dies the others
// keep every write and go on (NextSeq still never repeats).
func TestClusterReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node NATS cluster")
	}
	nodes := cluster3(t)
	a := open(t, nodes[0], Options{Replicas: 3})
	b := open(t, nodes[1], Options{Replicas: 3})
	// A leader election after a node dies may take a raft election timeout
	// or two (seconds; more on a loaded machine).
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	seq1, err := a.NextSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := model.FormatTaskID(time.Now(), seq1)
	tg := targets(5)
	if err := a.PutTask(ctx, model.Task{ID: id, Status: model.TaskRunning}, tg); err != nil {
		t.Fatal(err)
	}
	for _, x := range tg[:3] {
		if err := a.PutResult(ctx, model.Result{TaskID: id, Host: x.Host, ProcKey: x.ProcKey, State: model.StateSuccess}); err != nil {
			t.Fatal(err)
		}
	}
	nodes[0].Shutdown()

	if rs, err := b.Results(ctx, id); err != nil || len(rs) != 3 {
		t.Fatalf("results after a node died: %d, %v", len(rs), err)
	}
	for _, x := range tg[3:] {
		if err := b.PutResult(ctx, model.Result{TaskID: id, Host: x.Host, ProcKey: x.ProcKey, State: model.StateFailed}); err != nil {
			t.Fatal(err)
		}
	}
	if rs, _ := b.Results(ctx, id); len(rs) != 5 {
		t.Fatalf("%d results, want 5", len(rs))
	}
	if seq2, err := b.NextSeq(ctx); err != nil || seq2 <= seq1 {
		t.Fatalf("NextSeq after failover = %d (%v), want > %d", seq2, err, seq1)
	}
}

// cluster3 starts a 3-node cluster on 127.0.0.1. JetStream clustering needs
// every route up front, so the route ports are picked before the nodes
// listen on them; another process may take one in between: then the
// cluster is built again on fresh ports.
func cluster3(t *testing.T) []*natsembed.Embedded {
	t.Helper()
	var lastErr error
	for attempt := 1; attempt <= 5; attempt++ {
		var routes []string
		ports := transporttest.ReservePorts(t, 3)
		for _, p := range ports {
			routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
		}
		var nodes []*natsembed.Embedded
		for i := range 3 {
			c := natsCfg(t, t.TempDir())
			c.ServerName = fmt.Sprintf("s%d", i)
			c.Cluster = config.NATSClusterConfig{Name: "js", Listen: fmt.Sprintf("127.0.0.1:%d", ports[i]), Routes: routes, User: "route", Password: "routepw"}
			e, err := natsembed.StartEmbedded(c, natsembed.EmbeddedOptions{}, nil)
			if err != nil {
				lastErr = err
				break
			}
			nodes = append(nodes, e)
		}
		if len(nodes) == 3 {
			for _, e := range nodes {
				t.Cleanup(e.Shutdown)
			}
			return nodes
		}
		for _, e := range nodes {
			e.Shutdown()
		}
		t.Logf("cluster attempt %d: %v", attempt, lastErr)
	}
	t.Fatal(lastErr)
	return nil
}
