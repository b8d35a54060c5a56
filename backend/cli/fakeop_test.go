package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"

	"gseproc/model"
)

// fakeOpServer is a server of one op for the op client: /api/v1/info,
// /api/v1/operate answering task, the task's summary (no results) and its
// result stream, written by stream (after the event-stream header).
func fakeOpServer(task model.Task, stream func(w http.ResponseWriter)) *httptest.Server {
	envelope := func(w http.ResponseWriter, data any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"result": true, "code": 0, "message": "success", "data": data})
	}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/v1/info":
			envelope(w, map[string]any{})
		case r.URL.Path == "/api/v1/operate":
			envelope(w, task)
		case strings.HasSuffix(r.URL.Path, "/stream"):
			w.Header().Set("Content-Type", "text/event-stream")
			stream(w)
		case strings.HasPrefix(r.URL.Path, "/api/v1/tasks/"):
			envelope(w, map[string]any{"task": task, "results": []model.Result{}})
		default:
			http.NotFound(w, r)
		}
	}))
}
