package ui

import (
	"context"
	"strings"
	"testing"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/simulator"
	"gseproc/backend/store"
	"gseproc/model"
)

func TestParseSimArg(t *testing.T) {
	rate := 0.3
	for _, tc := range []struct {
		a    model.SimAction
		arg  string
		want backend.SimRequest
		err  string
	}{
		{model.SimOffline, "web 3%", backend.SimRequest{SimChange: model.SimChange{Action: model.SimOffline, Share: 0.03}, Selector: backend.Selector{Namespace: "web"}}, ""},
		{model.SimCrash, "web:nginx 10 fails=20%", backend.SimRequest{SimChange: model.SimChange{Action: model.SimCrash, Count: 10, RestartFails: 0.2},
			Selector: backend.Selector{Namespace: "web", Name: "nginx"}}, ""},
		{model.SimLatency, "app=redis 800ms 3s", backend.SimRequest{SimChange: model.SimChange{Action: model.SimLatency, LatencyMS: 800, LatencyP99MS: 3000},
			Selector: backend.Selector{Labels: map[string]string{"app": "redis"}}}, ""},
		{model.SimFailures, "batch rate=0.3", backend.SimRequest{SimChange: model.SimChange{Action: model.SimFailures, Rate: &rate}, Selector: backend.Selector{Namespace: "batch"}}, ""},
		{model.SimFlap, "@0:10.0.0.7", backend.SimRequest{SimChange: model.SimChange{Action: model.SimFlap, Times: model.DefaultFlapTimes, EveryMS: model.DefaultFlapEvery},
			Selector: backend.Selector{Hosts: []model.Host{{IP: "10.0.0.7"}}}}, ""},
		{model.SimRestore, "", backend.SimRequest{SimChange: model.SimChange{Action: model.SimRestore}}, ""},
		{model.SimOffline, "web 300%", backend.SimRequest{}, "not in"},
		{model.SimOffline, "web db", backend.SimRequest{}, "already"},
		{model.SimOffline, "web 250ms", backend.SimRequest{}, "only sim latency"},
		{model.SimCrash, "web 3", backend.SimRequest{}, "selector.name"},
		{model.SimFailures, "web", backend.SimRequest{}, "rate"},
		{model.SimFlap, "@nope", backend.SimRequest{}, "@nope"},
		{model.SimOffline, "web 3 5", backend.SimRequest{}, "give it once"},
		{model.SimOffline, "web 3 5%", backend.SimRequest{}, "give it once"},
		{model.SimFlap, "@0:10.0.0.7 times=2 times=3", backend.SimRequest{}, "give it once"},
		{model.SimLatency, "app=redis app=db 1s", backend.SimRequest{}, "give it once"},
		{model.SimLatency, "web 800ms 3s p99=2s", backend.SimRequest{}, "p99 is given already"},
		{model.SimLatency, "web 250us", backend.SimRequest{}, "whole number of milliseconds"},
		{model.SimFlap, "@0:10.0.0.7 every=1500us", backend.SimRequest{}, "whole number of milliseconds"},
	} {
		t.Run(string(tc.a)+" "+tc.arg, func(t *testing.T) {
			got, err := parseSimArg(tc.a, tc.arg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want an error with %q, got %v", tc.err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Action != tc.want.Action || got.Share != tc.want.Share || got.Count != tc.want.Count || got.LatencyMS != tc.want.LatencyMS ||
				got.LatencyP99MS != tc.want.LatencyP99MS || got.RestartFails != tc.want.RestartFails || got.Times != tc.want.Times ||
				got.EveryMS != tc.want.EveryMS || got.Selector.Scope() != tc.want.Selector.Scope() ||
				(tc.want.Rate != nil && (got.Rate == nil || *got.Rate != *tc.want.Rate)) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The palette drives the simulated fleet: the notice says what happened,
// the hosts are offline; a fleet of real agents refuses with the reason.
func TestPaletteSimCommands(t *testing.T) {
	e, fleet := simBackend(t, quietSim(40))
	d := newDriver(t, e, Options{}, 100, 30)
	openPal(t, d)
	d.typeText("sim offline web 5")
	d.keys("enter")
	d.until("the control's notice", func() bool { return strings.Contains(d.m.flash, "took 5 of") })
	off := 0
	his, _ := fleet.Hosts(context.Background())
	for _, h := range his {
		if s, _ := fleet.Host(h.Host); s.Offline {
			off++
		}
	}
	if off != 5 {
		t.Fatalf("%d hosts offline, want 5", off)
	}

	real := simulator.New(quietSim(10))
	re := engine.New(config.Default().Engine, real, real, store.NewMemory()) // no simulator to drive
	if err := re.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = re.Close(); _ = real.Close() })
	rd := newDriver(t, re, Options{}, 100, 30)
	openPal(t, rd)
	rd.typeText("sim offline 50%")
	rd.keys("enter")
	rd.until("the refusal", func() bool { return rd.m.banner != nil })
	if v := rd.view(); !strings.Contains(v, "real agents") {
		t.Fatalf("refusal not shown:\n%s", v)
	}
}
