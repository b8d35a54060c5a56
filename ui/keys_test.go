package ui

import (
	"strings"
	"testing"

	"gseproc/backend/config"
)

// TestLGoesInLikeRight: issue 15 asks for h/l and the arrows to go in and
// out. l opens what → and enter open (a namespace, a label's hosts, a host,
// a task result); F opens the live log where l did; the fleet map, which
// moves its cursor with h/l, keeps them.
func TestLGoesInLikeRight(t *testing.T) {
	e, _ := simBackend(t, quietSim(10))
	d := newDriver(t, e, Options{}, 120, 40)
	d.until("namespaces", func() bool { return d.m.stack[0].(*nsPage).loaded })
	d.keys("l")
	lp := topAs[*labelsPage](t, d)
	d.until("labels", func() bool { return lp.loaded })
	d.keys("h")
	topAs[*nsPage](t, d)

	hp := openHosts(t, d, "app=nginx")
	d.until("hosts", func() bool { return hp.loaded && len(hp.shown) > 0 })
	want := hp.rows[hp.shown[0]].v.Host
	d.keys("l")
	host := topAs[*hostPage](t, d)
	if host.host != want {
		t.Fatalf("l opened %s, the cursor is on %s", host.host, want)
	}
	d.until("the host", func() bool { return host.loaded && host.found })
	d.keys("h")
	topAs[*hostsPage](t, d)
	d.keys("right")
	if host := topAs[*hostPage](t, d); host.host != want {
		t.Fatalf("→ opened %s, the cursor is on %s", host.host, want)
	}
	d.until("the host", func() bool { p := topAs[*hostPage](t, d); return p.loaded && p.found })
	// F on the host's page: the live log of its processes.
	logs := pressLogs(t, d)
	if len(logs.hosts) != 1 || logs.hosts[0] != want {
		t.Fatalf("F on the host page: logs of %v", logs.hosts)
	}
	d.keys("esc", "left")
	topAs[*hostsPage](t, d)
	// F on the hosts list: the cursor host's log.
	if logs := pressLogs(t, d); len(logs.hosts) != 1 || logs.hosts[0] != want {
		t.Fatalf("F on the hosts list: logs of %v", logs.hosts)
	}
	d.keys("esc")

	// The task watch: l opens one host's result, F its log.
	w := statusWatch(t, d)
	d.until("results", func() bool { return len(w.shown) > 0 })
	d.keys("l")
	topAs[*resultPage](t, d)
	d.keys("h")
	topAs[*watchPage](t, d)
	pressLogs(t, d)

	// The fleet map takes h and l first: they move its cursor.
	d.keys("esc", "M")
	mp := topAs[*fleetMapPage](t, d)
	d.until("the map", func() bool { return mp.loaded })
	col := mp.col
	d.keys("l")
	if topAs[*fleetMapPage](t, d).col != col+1 {
		t.Fatalf("l on the fleet map: column %d, want %d", mp.col, col+1)
	}
	d.keys("h")
	if topAs[*fleetMapPage](t, d).col != col {
		t.Fatalf("h on the fleet map: column %d, want %d", mp.col, col)
	}
}

// pressLogs presses F and, when the host carries several processes,
// takes the first the palette offers.
func pressLogs(t *testing.T, d *driver) *logsPage {
	t.Helper()
	d.keys("F")
	if d.m.palette != nil {
		d.keys("enter")
	}
	return topAs[*logsPage](t, d)
}

// TestKeysRestoreLForLogs: a k9s user gives l back to the live log by
// overriding both actions, as the README shows; l given to logs alone
// stays open's too, which is reported (and open, tried first, would act).
func TestKeysRestoreLForLogs(t *testing.T) {
	_, warns, err := NewKeyMap(map[string][]string{"logs": {"l"}})
	if err != nil || len(warns) != 1 || !strings.Contains(warns[0], `"l" is bound to both logs and open`) {
		t.Fatalf("logs = [l] alone: warnings %q, err %v", warns, err)
	}
	keys := map[string][]string{"open": {"enter", "right"}, "logs": {"l"}}
	if _, warns, err := NewKeyMap(keys); err != nil || len(warns) != 0 {
		t.Fatalf("the README's override: warnings %q, err %v", warns, err)
	}
	e, _ := simBackend(t, quietSim(10))
	cfg := config.Default().Console
	cfg.Keys = keys
	d := newDriver(t, e, Options{Config: cfg}, 120, 40)
	hp := openHosts(t, d, "app=nginx")
	d.until("hosts", func() bool { return hp.loaded && len(hp.shown) > 0 })
	d.keys("l")
	topAs[*logsPage](t, d)
	d.keys("esc", "right")
	topAs[*hostPage](t, d)
	if strings.Contains(d.view(), "F follow logs") || !strings.Contains(d.view(), "l follow logs") {
		t.Fatalf("the footer names the overridden key:\n%s", d.view())
	}
}
