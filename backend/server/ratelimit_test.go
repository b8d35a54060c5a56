package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestRateLimitUnderLoad: 20 clients call operate at once, more than the
// app's limit allows (bounded: 300 calls, 60 s; a call the time bound
// cuts is not counted). Every answer is either
// accepted or exactly the documented refusal: HTTP 429, code 1306429 and
// a Retry-After of whole seconds; the limit fires, and no more calls are
// accepted than the burst plus the rate over the time taken. The GSE form
// answers the same refusal with HTTP 200 (as the ESB gateway does) and
// the same Retry-After.
func TestRateLimitUnderLoad(t *testing.T) {
	const rate, burst = 20, 5
	cfg := testConfig()
	cfg.Rate, cfg.Burst = rate, burst
	e := newEnv(t, cfg)
	hdr := `{"bk_app_code":"narrow","bk_app_secret":"pw","bk_username":"alice"}`
	// One host of namespace web: each accepted call is a small task.
	r := e.do(http.MethodGet, "/api/v1/hosts?namespace=web&limit=1", nil, map[string]string{AuthHeader: hdr})
	var hosts []struct {
		Host json.RawMessage `json:"host"`
	}
	if err := json.Unmarshal(r.Data, &hosts); err != nil || len(hosts) != 1 {
		t.Fatalf("a web host: %d %s (%v)", r.Code, r.Message, err)
	}
	body := []byte(fmt.Sprintf(`{"op_type":2,"selector":{"namespace":"web","hosts":[%s]}}`, hosts[0].Host))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	type answer struct {
		status, code int
		retry, msg   string
		err          error
	}
	var mu sync.Mutex
	var answers []answer
	var wg sync.WaitGroup
	start := time.Now()
	for range 20 {
		wg.Go(func() {
			for range 15 {
				if ctx.Err() != nil {
					return
				}
				a := func() answer {
					req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.hs.URL+"/api/v1/operate", bytes.NewReader(body))
					if err != nil {
						return answer{err: err}
					}
					req.Header.Set(AuthHeader, hdr)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						return answer{err: err}
					}
					defer resp.Body.Close()
					raw, _ := io.ReadAll(resp.Body)
					var env struct {
						Code    int    `json:"code"`
						Message string `json:"message"`
					}
					if err := json.Unmarshal(raw, &env); err != nil {
						return answer{err: fmt.Errorf("status %d, body %q: %w", resp.StatusCode, raw, err)}
					}
					return answer{status: resp.StatusCode, code: env.Code, retry: resp.Header.Get("Retry-After"), msg: env.Message}
				}()
				if ctx.Err() != nil {
					return
				}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	accepted, limited := 0, 0
	for i, a := range answers {
		switch {
		case a.err != nil:
			t.Fatalf("call %d: %v", i, a.err)
		case a.status == http.StatusOK && a.code == CodeOK:
			accepted++
		case a.status == http.StatusTooManyRequests && a.code == CodeRateLimited:
			if n, err := strconv.Atoi(a.retry); err != nil || n < 1 {
				t.Fatalf("call %d: refused with Retry-After %q, want whole seconds >= 1", i, a.retry)
			}
			limited++
		default:
			t.Fatalf("call %d: status %d code %d (%s): neither accepted nor the rate-limit refusal", i, a.status, a.code, a.msg)
		}
	}
	// The host lookup above took one token of the same app's bucket, and
	// 300 refusals can come back before the bucket refills one more.
	if limited == 0 || accepted < burst-1 {
		t.Fatalf("%d accepted, %d limited of %d calls in %s: want the burst (less the lookup's token) accepted and the limit to fire", accepted, limited, len(answers), elapsed)
	}
	if most := burst + int(rate*elapsed.Seconds()) + 1; accepted > most {
		t.Fatalf("%d accepted in %s: more than burst %d + %d/s allow (%d)", accepted, elapsed, burst, rate, most)
	}

	// The GSE form is refused too once the bucket is empty (it refills
	// meanwhile: bounded calls until one is refused), in its envelope.
	for range 100 {
		r = e.post("/api/c/compapi/v2/gse/get_proc_operate_result/", map[string]any{
			"bk_app_code": "narrow", "bk_app_secret": "pw", "bk_username": "alice", "task_id": "GSETASK:20200101000000:1"})
		if r.Code == CodeRateLimited {
			break
		}
	}
	if r.Code != CodeRateLimited || r.Status != http.StatusOK || r.Header.Get("Retry-After") == "" {
		t.Fatalf("GSE form with an empty bucket: status %d code %d Retry-After %q, want 200, 1306429 and Retry-After", r.Status, r.Code, r.Header.Get("Retry-After"))
	}
}
