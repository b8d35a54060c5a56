package transport

import (
	"context"
	"maps"
	"reflect"
	"testing"
	"time"

	"gseproc/backend/config"
	"gseproc/backend/simulator"
)

// TestFleetRefreshKeepsLabels: the hosts a fleet server beats for carry
// the fleet's labels, made once a served host (a labelFleet's, the
// simulator's), not again at each refresh (each heartbeat interval).
func TestFleetRefreshKeepsLabels(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	f := simulator.New(config.SimulatorConfig{Hosts: 50, Seed: 5, Clouds: 2, Namespaces: config.Default().Simulator.Namespaces})
	defer f.Close()
	nc, err := Connect(ClientOptions{URLs: e.ClientURL(), Name: "sim"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	opts := ServeOptions{HeartbeatInterval: time.Second}
	if err := opts.prepare(4096); err != nil {
		t.Fatal(err)
	}
	fs := newFleetServer(f, newSession(FixedLink(nc), opts, opts.Logger), opts)
	defer fs.unsubscribeAll()
	ctx := context.Background()
	want, err := f.Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var first []map[string]string
	for round := range 2 {
		if err := fs.refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if len(fs.infos) != len(want) {
			t.Fatalf("round %d: %d hosts served, the fleet has %d", round, len(fs.infos), len(want))
		}
		for i, hi := range fs.infos {
			if hi.Host != want[i].Host || len(hi.Labels) == 0 || !maps.Equal(hi.Labels, want[i].Labels) {
				t.Fatalf("round %d: host %d %s labels %v, the fleet's %s %v", round, i, hi.Host, hi.Labels, want[i].Host, want[i].Labels)
			}
			if round == 0 {
				first = append(first, hi.Labels)
			} else if reflect.ValueOf(hi.Labels).UnsafePointer() != reflect.ValueOf(first[i]).UnsafePointer() {
				t.Fatalf("host %s: its labels were made again at a refresh", hi.Host)
			}
		}
	}
}
