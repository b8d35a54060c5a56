package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/client"
	"gseproc/backend/server"
	"gseproc/model"
)

// collectBatches gathers WatchBatches' results, each batch neither empty
// nor over 256 results.
func collectBatches(t *testing.T, ch <-chan []model.Result) []model.Result {
	t.Helper()
	var out []model.Result
	timeout := time.After(30 * time.Second)
	for {
		select {
		case rs, ok := <-ch:
			if !ok {
				return out
			}
			if len(rs) == 0 || len(rs) > 256 {
				t.Fatalf("a batch of %d results", len(rs))
			}
			out = append(out, rs...)
		case <-timeout:
			t.Fatalf("watch did not complete in 30s (%d results)", len(out))
		}
	}
}

// statusOpServed starts a status op over 600 hosts through a served
// client whose server cuts its streams every cut events (0: never).
func statusOpServed(t *testing.T, cut int) (*client.Client, model.Task) {
	t.Helper()
	var opts []server.Option
	if cut > 0 {
		opts = append(opts, server.WithStreamCut(cut))
	}
	c, _, _ := serve(t, 600, opts...)
	task, err := c.Operate(context.Background(), backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "gse"}})
	if err != nil {
		t.Fatal(err)
	}
	return c, task
}

// TestWatchBatches: the batches hold what Watch sends, in order, each
// result once: from the start, from the middle, and over a stream the
// server cuts every 50 events; an unknown task is refused as by Watch.
func TestWatchBatches(t *testing.T) {
	for _, cut := range []int{0, 50} {
		c, task := statusOpServed(t, cut)
		ctx := context.Background()
		if task.Targets <= 256 {
			t.Fatalf("only %d targets; want more than a batch", task.Targets)
		}
		ch, err := c.WatchBatches(ctx, task.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := collectBatches(t, ch)
		checkSeqs(t, got, 0, task.Targets)
		wch, err := c.Watch(ctx, task.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := collect(t, wch)
		for i := range want {
			if got[i].Host != want[i].Host || got[i].ProcKey != want[i].ProcKey || got[i].State != want[i].State {
				t.Fatalf("cut %d: result %d: batches %+v, Watch %+v", cut, i, got[i], want[i])
			}
		}
		ch, err = c.WatchBatches(ctx, task.ID, 2)
		if err != nil {
			t.Fatal(err)
		}
		checkSeqs(t, collectBatches(t, ch), 2, task.Targets-2)
		if _, err := c.WatchBatches(ctx, "GSETASK:20200101000000:999999", 0); cut == 0 && !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("unknown task: %v, want ErrNotFound", err)
		}
	}
}

// TestWatchBatchesEndsWithCtx: a watch whose ctx ends closes its channel.
func TestWatchBatchesEndsWithCtx(t *testing.T) {
	c, _, _ := serve(t, 50)
	task, err := c.Operate(context.Background(), backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "gse"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := c.WatchBatches(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("the channel did not close after ctx ended")
		}
	}
}

// dropRead is a body whose one read returns all of data with err: the
// results and the drop of the stream come together.
type dropRead struct {
	data []byte
	err  error
}

func (d *dropRead) Read(p []byte) (int, error) {
	if len(d.data) == 0 {
		return 0, d.err
	}
	n := copy(p, d.data)
	d.data = d.data[n:]
	if len(d.data) > 0 {
		return n, nil
	}
	return n, d.err
}

func (d *dropRead) Close() error { return nil }

// dropTransport serves a task stream that drops after results 1-3 (read
// with the drop) and, resumed, sends result 4 and the end. At the resume
// it notes how many batches wait in the channel the test passed on ch,
// then closes checked (the test reads the channel only after).
type dropTransport struct {
	ch      chan (<-chan []model.Result)
	checked chan struct{}
	calls   int
	lastID  string
	waiting int
}

func (d *dropTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	d.calls++
	var body io.ReadCloser
	switch d.calls {
	case 1:
		body = &dropRead{data: []byte("id: 1\nevent: result\ndata: {\"seq\":1,\"state\":\"success\"}\n\nid: 2\nevent: result\ndata: {\"seq\":2,\"state\":\"success\"}\n\nid: 3\nevent: result\ndata: {\"seq\":3,\"state\":\"success\"}\n\n"), err: io.ErrUnexpectedEOF}
	case 2:
		// The reopen runs in the goroutine that sent the batch: what it
		// handed over is in the channel.
		d.lastID = req.Header.Get("Last-Event-ID")
		d.waiting = len(<-d.ch)
		close(d.checked)
		body = &dropRead{data: []byte("id: 4\nevent: result\ndata: {\"seq\":4,\"state\":\"success\"}\n\nevent: end\ndata: {}\n\n"), err: io.EOF}
	default:
		return nil, errors.New("a third request")
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: body, Request: req}, nil
}

// TestWatchBatchesDropHandsOver: the results read with a stream's drop
// are handed over before reconnecting, not held through the reopen (and
// its backoff).
func TestWatchBatchesDropHandsOver(t *testing.T) {
	tr := &dropTransport{ch: make(chan (<-chan []model.Result), 1), checked: make(chan struct{})}
	c := client.New("http://gseproc.test", client.WithHTTPClient(&http.Client{Transport: tr}), client.WithReconnect(time.Millisecond, time.Millisecond, 3))
	defer c.Close()
	ch, err := c.WatchBatches(context.Background(), "GSETASK:20200101000000:1", 0)
	if err != nil {
		t.Fatal(err)
	}
	tr.ch <- ch
	<-tr.checked
	got := collectBatches(t, ch)
	checkSeqs(t, got, 0, 4)
	if tr.calls != 2 || tr.lastID != "3" {
		t.Fatalf("%d requests, resumed after %q; want 2, after \"3\"", tr.calls, tr.lastID)
	}
	if tr.waiting != 1 {
		t.Fatalf("%d batches handed over before the reopen, want 1 (results 1-3)", tr.waiting)
	}
}

// TestWatchResultBatches: the batches hold what WatchBatches sends, and
// the text of each result the server sent exactly as
// model.AppendResultJSON writes it (every result of a live server's
// stream), over a whole stream and one the server cuts every 50 events;
// an event written otherwise is read, without its text.
func TestWatchResultBatches(t *testing.T) {
	for _, cut := range []int{0, 50} {
		c, task := statusOpServed(t, cut)
		ctx := context.Background()
		ch, err := c.WatchResultBatches(ctx, task.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []model.Result
		var kept client.ResultBatch
		var keptResults []model.Result
		var keptTexts []string
		deadline := time.After(30 * time.Second)
	read:
		for {
			select {
			case b, ok := <-ch:
				if !ok {
					break read
				}
				if len(b.Results) == 0 || len(b.Results) > 256 {
					t.Fatalf("a batch of %d results", len(b.Results))
				}
				for i := range b.Results {
					text := b.Text(i)
					if text == nil {
						t.Fatalf("cut %d: result %d without its text", cut, b.Results[i].Seq)
					}
					want, err := model.AppendResultJSON(nil, &b.Results[i])
					if err != nil || string(text) != string(want) {
						t.Fatalf("cut %d: text\n%s\nwant (%v)\n%s", cut, text, err, want)
					}
				}
				got = append(got, b.Results...)
				if kept.Results == nil {
					// The first is kept, never handed back: the watch
					// must not read into its room; every other is
					// handed back and read into again.
					kept, keptResults = b, slices.Clone(b.Results)
					for i := range b.Results {
						keptTexts = append(keptTexts, string(b.Text(i)))
					}
					continue
				}
				b.Done()
			case <-deadline:
				t.Fatalf("watch did not complete in 30s (%d results)", len(got))
			}
		}
		checkSeqs(t, got, 0, task.Targets)
		if !reflect.DeepEqual(kept.Results, keptResults) {
			t.Fatalf("cut %d: a batch not handed back was read into", cut)
		}
		for i := range kept.Results {
			if string(kept.Text(i)) != keptTexts[i] {
				t.Fatalf("cut %d: the text of result %d of a batch not handed back changed", cut, kept.Results[i].Seq)
			}
		}
		bch, err := c.WatchBatches(ctx, task.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := collectBatches(t, bch)
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("cut %d: result %d: %+v, WatchBatches %+v", cut, i, got[i], want[i])
			}
		}
	}
	// Results written otherwise (a "-0", an HTML character): read, no text.
	tr := &fixedStream{body: "id: 1\nevent: result\ndata: {\"task_id\":\"a\",\"seq\":1,\"host\":{\"ip\":\"x\",\"bk_cloud_id\":-0},\"proc\":\"p\",\"op_type\":2,\"state\":\"success\",\"error_code\":0,\"error_msg\":\"m\"}\n\n" +
		"id: 2\nevent: result\ndata: {\"task_id\":\"a\",\"seq\":2,\"host\":{\"ip\":\"x\",\"bk_cloud_id\":0},\"proc\":\"p\",\"op_type\":2,\"state\":\"success\",\"error_code\":0,\"error_msg\":\"<m>\"}\n\n" +
		"id: 3\nevent: result\ndata: {\"task_id\":\"a\",\"seq\":3,\"host\":{\"ip\":\"x\",\"bk_cloud_id\":0},\"proc\":\"p\",\"op_type\":2,\"state\":\"success\",\"error_code\":0,\"error_msg\":\"m\"}\n\n" +
		"event: end\ndata: {}\n\n"}
	c := client.New("http://gseproc.test", client.WithHTTPClient(&http.Client{Transport: tr}), client.WithReconnect(time.Millisecond, time.Millisecond, 3))
	defer c.Close()
	ch, err := c.WatchResultBatches(context.Background(), "GSETASK:20200101000000:1", 0)
	if err != nil {
		t.Fatal(err)
	}
	var texts []bool
	for b := range ch {
		for i := range b.Results {
			texts = append(texts, b.Text(i) != nil)
		}
	}
	if !reflect.DeepEqual(texts, []bool{false, false, true}) {
		t.Fatalf("texts %v, want [false false true]", texts)
	}
}

// fixedStream serves body as every task stream.
type fixedStream struct{ body string }

func (f *fixedStream) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(strings.NewReader(f.body)), Request: req}, nil
}
