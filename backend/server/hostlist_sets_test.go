package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"gseproc/backend"
	"gseproc/backend/client"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/server/wire"
	"gseproc/backend/simulator"
	"gseproc/backend/store"
	"gseproc/model"
)

// setFleet is a simulated fleet as an inventory that keeps label sets
// (engine.LabelSetInventory), shared by the hosts of the same labels, as
// the NATS dispatcher keeps them.
type setFleet struct{ *simulator.Fleet }

func (f setFleet) HostLabelSets(ctx context.Context) ([]model.HostInfo, []model.LabelSet, error) {
	hosts, err := f.Hosts(ctx)
	sets := make([]model.LabelSet, len(hosts))
	kept := map[string]model.LabelSet{}
	for i := range hosts {
		s := model.MakeLabelSet(hosts[i].Labels)
		key := strings.Join(s, "\x00")
		if k, ok := kept[key]; ok {
			s = k
		}
		kept[key], sets[i], hosts[i].Labels = s, s, nil
	}
	return hosts, sets, err
}

// TestHostListOverLabelSets: a server whose engine's inventory keeps
// label sets (the list form written from them, HostListSets) answers a
// host list, for an app of every namespace and for one limited to some,
// and the full form, with what a server over the same fleet listing maps
// answers (LastSeen apart: the fleet's moves on between the two).
func TestHostListOverLabelSets(t *testing.T) {
	fleet := simulator.New(quietSim())
	t.Cleanup(func() { _ = fleet.Close() })
	ctx := context.Background()
	handler := func(inv engine.Inventory) http.Handler {
		eng := engine.New(config.Default().Engine, fleet, inv, store.NewMemory())
		if err := eng.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = eng.Close() })
		if err := eng.Seed(ctx, fleet.Definitions()); err != nil {
			t.Fatal(err)
		}
		srv := New(eng, testConfig(), nil)
		t.Cleanup(func() { _ = srv.Close() })
		return srv.Handler()
	}
	withSets, plain := handler(setFleet{fleet}), handler(fleet)
	get := func(h http.Handler, path, auth string) []byte {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set(AuthHeader, auth)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var env struct {
			Result bool
			Data   json.RawMessage
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || rec.Code != http.StatusOK || !env.Result {
			t.Fatalf("%s: %d %v %.200s", path, rec.Code, err, rec.Body.Bytes())
		}
		return env.Data
	}
	type host struct {
		Host   string
		State  model.AgentState
		Agent  string
		Labels map[string]string
		Procs  []string
	}
	read := func(data []byte) []host {
		t.Helper()
		var out []host
		if _, err := wire.ReadHostList(data, func(hl *wire.HostList, h *wire.ListHost) {
			lh := host{Host: h.Host.AgentID(), State: h.State, Agent: h.Version + " " + h.AgentID, Labels: map[string]string{}}
			for _, id := range h.Labels {
				lh.Labels[hl.Labels[id].Key] = hl.Labels[id].Value
			}
			for _, p := range h.Procs {
				d := hl.Procs[p.Proc]
				lh.Procs = append(lh.Procs, d.Key+" "+string(p.State)+" "+strings.Join(model.MakeLabelSet(d.Labels), ","))
			}
			out = append(out, lh)
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, auth := range []string{`{"bk_app_code":"esb_test","bk_app_secret":"xxx","bk_username":"admin"}`,
		`{"bk_app_code":"narrow","bk_app_secret":"pw","bk_username":"alice"}`} {
		for _, path := range []string{"/api/v1/hosts?form=list", "/api/v1/hosts?form=list&namespace=web", "/api/v1/hosts?form=list&limit=5"} {
			got, want := read(get(withSets, path, auth)), read(get(plain, path, auth))
			if len(want) == 0 || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s as %.30s: over sets %d hosts %+v\nover maps %d hosts %+v", path, auth, len(got), got[:min(2, len(got))], len(want), want[:min(2, len(want))])
			}
		}
		// The full form: every host's labels in its map.
		var got, want []struct {
			Host   model.Host
			Labels map[string]string
		}
		if err := json.Unmarshal(get(withSets, "/api/v1/hosts", auth), &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(get(plain, "/api/v1/hosts", auth), &want); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) || len(want) == 0 {
			t.Fatalf("full form: %d hosts over sets, %d over maps", len(got), len(want))
		}
		for i := range want {
			if got[i].Host != want[i].Host || !maps.Equal(got[i].Labels, want[i].Labels) || len(want[i].Labels) == 0 {
				t.Fatalf("full form, host %d: %+v over sets, %+v over maps", i, got[i], want[i])
			}
		}
	}
}

// setsEngine is a started engine over a simulated fleet whose inventory
// keeps label sets (setFleet), seeded with the fleet's definitions.
func setsEngine(t *testing.T) *engine.Engine {
	t.Helper()
	fleet := simulator.New(quietSim())
	t.Cleanup(func() { _ = fleet.Close() })
	ctx := context.Background()
	eng := engine.New(config.Default().Engine, fleet, setFleet{fleet}, store.NewMemory())
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	if err := eng.Seed(ctx, fleet.Definitions()); err != nil {
		t.Fatal(err)
	}
	return eng
}

// serve is a test HTTP server of a Server over b.
func serve(t *testing.T, b backend.Backend) *httptest.Server {
	t.Helper()
	srv := New(b, testConfig(), nil)
	t.Cleanup(func() { _ = srv.Close() })
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// TestHostListStreamed: over an inventory that keeps label sets, a whole
// listing in the list form is streamed (no Content-Length) in the
// envelope writeEnvelope writes (its head, the listing, its tail with the
// request's id); a first page (limit) is written whole, with its length.
func TestHostListStreamed(t *testing.T) {
	ctx := context.Background()
	eng := setsEngine(t)
	ts := serve(t, eng)
	for path, streamed := range map[string]bool{"/api/v1/hosts?form=list": true, "/api/v1/hosts?form=list&namespace=web": true, "/api/v1/hosts?form=list&limit=5": false} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		req.Header.Set(AuthHeader, `{"bk_app_code":"esb_test","bk_app_secret":"xxx","bk_username":"admin"}`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s %v", path, resp.Status, err)
		}
		if got := resp.ContentLength < 0; got != streamed {
			t.Fatalf("%s: Content-Length %d; streamed %v, want %v", path, resp.ContentLength, got, streamed)
		}
		var env struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatal(err)
		}
		rid := resp.Header.Get("X-Request-Id")
		want := string(envelopeHead(envelope{Result: true, Code: CodeOK, Message: "success"})) + string(env.Data) + string(envelopeTail(envelope{RequestID: rid}))
		if string(body) != want || rid == "" {
			t.Fatalf("%s: envelope %.80q ... %q; want %.80q ... %q", path, body, body[max(0, len(body)-60):], want, want[max(0, len(want)-60):])
		}
		hosts := 0
		if n, err := wire.ReadHostList(env.Data, func(*wire.HostList, *wire.ListHost) { hosts++ }); err != nil || n != len(env.Data) || hosts == 0 {
			t.Fatalf("%s: %d hosts read, %v (%d bytes of %d)", path, hosts, err, n, len(env.Data))
		}
	}
	// gseproc's client (the console's) reads the streamed listing as it
	// comes: every host, each with its labels and processes.
	c := client.New(ts.URL, client.WithCredentials("esb_test", "xxx", "admin"))
	t.Cleanup(func() { _ = c.Close() })
	want, err := eng.Hosts(ctx, backend.HostQuery{})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	if err := c.HostListEach(ctx, backend.HostQuery{}, func(v *backend.HostView) {
		if i < len(want) && (v.Host != want[i].Host || !maps.Equal(v.Labels, want[i].Labels) || len(v.Procs) != len(want[i].Procs)) {
			t.Fatalf("host %d: %+v, want %+v", i, v, want[i])
		}
		i++
	}); err != nil || i != len(want) {
		t.Fatalf("the client read %d hosts of %d: %v", i, len(want), err)
	}
}

// cutLister is an engine whose label-set listings fail once every host
// has been listed (as one whose inventory changed under it would).
type cutLister struct{ *engine.Engine }

func (c cutLister) HostListSets(ctx context.Context, q backend.HostQuery, head func([]backend.ProcView, []model.LabelSet), fn func(*backend.HostView, model.LabelSet)) error {
	if err := c.Engine.HostListSets(ctx, q, head, fn); err != nil {
		return err
	}
	return errors.New("inventory changed while listed")
}

// TestHostListStreamCut: a streamed listing cut short (its listing failed
// after its first bytes went out) aborts its connection: the body reads
// as cut at the HTTP level (not a chunked body ending where a whole one
// would), and gseproc's client reports an error, not a shorter list.
func TestHostListStreamCut(t *testing.T) {
	ctx := context.Background()
	ts := serve(t, cutLister{setsEngine(t)})
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/api/v1/hosts?form=list", nil)
	req.Header.Set(AuthHeader, `{"bk_app_code":"esb_test","bk_app_secret":"xxx","bk_username":"admin"}`)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.ContentLength >= 0 || len(body) == 0 {
		t.Fatalf("not streamed: Content-Length %d, %d bytes", resp.ContentLength, len(body))
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a cut listing's body read %d bytes with %v, want io.ErrUnexpectedEOF (connection aborted)", len(body), err)
	}
	c := client.New(ts.URL, client.WithCredentials("esb_test", "xxx", "admin"))
	t.Cleanup(func() { _ = c.Close() })
	n := 0
	if err := c.HostListEach(ctx, backend.HostQuery{}, func(*backend.HostView) { n++ }); err == nil {
		t.Fatalf("the client read a cut listing (%d hosts) without an error", n)
	}
}
