package server

import (
	"crypto/subtle"
	"fmt"
	"math"
	"net/http"
	"strings"

	"golang.org/x/time/rate"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/server/wire"
	"gseproc/model"
)

// AuthHeader carries the gateway fields as JSON, as the BlueKing API
// gateway accepts them: {"bk_app_code": ..., "bk_app_secret": ...,
// "bk_username": ..., "bk_token": ...}. Body fields fill what it lacks.
const AuthHeader = "X-Bkapi-Authorization"

// credentials are the gateway fields of one request.
type credentials struct {
	AppCode   string `json:"bk_app_code"`
	AppSecret string `json:"bk_app_secret"`
	Username  string `json:"bk_username"`
	Token     string `json:"bk_token"`
	// header: the app identified itself in the X-Bkapi-Authorization
	// header, as the API gateway does between gateways (where the app alone,
	// with no user, is accepted).
	header bool
}

// app is one configured gateway app.
type app struct {
	code    string
	salt    string
	hash    []byte // hex text of sha256(salt+secret)
	biz     map[int]bool
	bizSet  map[int]bool
	ns      map[string]bool
	allNS   bool
	users   map[string]bool
	limiter *rate.Limiter
}

func newApps(cfg config.ServerConfig) map[string]*app {
	out := make(map[string]*app, len(cfg.Apps))
	for _, a := range cfg.Apps {
		x := &app{code: a.Code, salt: a.Salt, hash: []byte(strings.ToLower(a.SecretSHA256)),
			biz: map[int]bool{}, bizSet: map[int]bool{}, ns: map[string]bool{}, users: map[string]bool{}}
		for _, id := range a.Biz {
			x.biz[id] = true
		}
		for _, id := range a.BizSet {
			x.bizSet[id] = true
		}
		for _, n := range a.Namespaces {
			if n == "*" {
				x.allNS = true
			}
			x.ns[n] = true
		}
		for _, u := range a.Users {
			x.users[u] = true
		}
		r, b := cfg.Rate, cfg.Burst
		if a.Rate > 0 {
			r = a.Rate
		}
		if a.Burst > 0 {
			b = a.Burst
		}
		if r > 0 {
			x.limiter = rate.NewLimiter(rate.Limit(r), b)
		}
		out[a.Code] = x
	}
	return out
}

// allowScope reports whether the app may touch a biz / biz_set scope.
func (a *app) allowScope(s wire.Scope) bool {
	if a == nil {
		return true
	}
	var id int
	if _, err := fmt.Sscanf(s.ID, "%d", &id); err != nil {
		return false
	}
	switch s.Type {
	case wire.ScopeBiz:
		return a.biz[id]
	case wire.ScopeBizSet:
		return a.bizSet[id]
	}
	return false
}

// allowNamespace reports whether the app may touch a namespace: "*", the
// name itself, or the namespace of an allowed scope ("biz_1").
func (a *app) allowNamespace(ns string) bool {
	if a == nil || a.allNS || a.ns[ns] {
		return true
	}
	for _, t := range []string{wire.ScopeBizSet, wire.ScopeBiz} {
		if id, ok := strings.CutPrefix(ns, t+"_"); ok {
			return a.allowScope(wire.Scope{Type: t, ID: id})
		}
	}
	return false
}

// ownsHost reports whether a host belongs to one of the app's businesses
// by its bk_biz_id label (the label agents and the simulator carry).
// /api/v1/hosts shows an app without "*" only such hosts and hosts
// carrying a process of a namespace it may touch.
func (a *app) ownsHost(hi model.HostInfo) bool {
	if a == nil || a.allNS {
		return true
	}
	biz, ok := hi.Labels["bk_biz_id"]
	return ok && a.allowScope(wire.Scope{Type: wire.ScopeBiz, ID: biz})
}

// seesHost reports whether the app may see a host: its own by label, or
// one carrying a process of a namespace it may touch.
func (a *app) seesHost(hv backend.HostView) bool {
	if a.ownsHost(hv.HostInfo) {
		return true
	}
	for _, p := range hv.Procs {
		if ns, _, _ := model.SplitKey(p.Key); a.allowNamespace(ns) {
			return true
		}
	}
	return false
}

// seesEvent reports whether the app may see a host event: one about a
// process of a namespace it may touch; an event about no process (an
// agent going on- or offline) only for an app with "*".
func (a *app) seesEvent(e model.Event) bool {
	if a == nil || a.allNS {
		return true
	}
	ns, _, ok := model.SplitKey(e.ProcKey)
	return ok && a.allowNamespace(ns)
}

// readCredentials takes the gateway fields from the header, then the body.
func readCredentials(r *http.Request, obj map[string]any) (credentials, *apiError) {
	var c credentials
	if h := r.Header.Get(AuthHeader); h != "" {
		if err := strictUnmarshal([]byte(h), &c); err != nil {
			return c, &apiError{status: http.StatusUnauthorized, code: CodeAppDenied,
				msg: AuthHeader + " header: not a JSON object of bk_app_code, bk_app_secret, bk_username, bk_token: " + err.Error()}
		}
		c.header = c.AppCode != ""
	}
	fill := func(dst *string, key string) {
		if *dst == "" && obj != nil {
			*dst = stringField(obj, key)
		}
	}
	fill(&c.AppCode, "bk_app_code")
	fill(&c.AppSecret, "bk_app_secret")
	fill(&c.Username, "bk_username")
	fill(&c.Token, "bk_token")
	if c.Username == "" {
		c.Username = r.Header.Get("Bk-Username")
	}
	return c, nil
}

// authenticate checks the app, its secret and the operator; it returns
// the app and the operator name recorded on tasks.
func (s *Server) authenticate(c credentials) (*app, string, *apiError) {
	denied := func(status, code int, format string, args ...any) (*app, string, *apiError) {
		return nil, "", &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
	}
	if c.AppCode == "" {
		if s.cfg.AnonymousApp != "" && c.AppSecret == "" {
			a := s.apps[s.cfg.AnonymousApp]
			op := c.Username
			if op == "" {
				op = "anonymous"
			}
			return a, op, nil
		}
		return denied(http.StatusUnauthorized, CodeAppDenied, "bk_app_code: required: the app calling the API must identify itself (body field or %s header)", AuthHeader)
	}
	a, ok := s.apps[c.AppCode]
	if !ok {
		return denied(http.StatusUnauthorized, CodeAppDenied, "bk_app_code: app %q is not registered with this server", c.AppCode)
	}
	if c.AppSecret == "" {
		return denied(http.StatusUnauthorized, CodeAppDenied, "bk_app_secret: required for app %q", c.AppCode)
	}
	got := []byte(config.HashSecret(a.salt, c.AppSecret))
	if subtle.ConstantTimeCompare(got, a.hash) != 1 {
		return denied(http.StatusUnauthorized, CodeAppDenied, "bk_app_secret: wrong secret for app %q", c.AppCode)
	}
	op := c.Username
	if op == "" && c.Token == "" {
		// App-only: a gateway calling for itself, with no user. Accepted
		// through the header for an app that does not name its users; it
		// acts, and tasks record it, as "app:<code>".
		if !c.header {
			return denied(http.StatusUnauthorized, CodeOperatorRequired, "bk_username or bk_token: one is required: the user on whose behalf app %q calls (an app calling for itself sends its code and secret in the %s header)", c.AppCode, AuthHeader)
		}
		if len(a.users) > 0 {
			return denied(http.StatusForbidden, CodeUserDenied, "bk_username: app %q accepts only named users (%d configured); an app-only call is not enough", c.AppCode, len(a.users))
		}
		return a, "app:" + c.AppCode, nil
	}
	if len(a.users) > 0 {
		if op == "" {
			return denied(http.StatusForbidden, CodeUserDenied, "bk_username: app %q accepts only named users (%d configured); bk_token alone is not enough", c.AppCode, len(a.users))
		}
		if !a.users[op] {
			return denied(http.StatusForbidden, CodeUserDenied, "bk_username: user %q may not use app %q", op, c.AppCode)
		}
	}
	if op == "" {
		op = "bk_token"
	}
	return a, op, nil
}

// limit takes a token from the app's bucket.
func (s *Server) limit(a *app) *apiError {
	if a == nil || a.limiter == nil || a.limiter.Allow() {
		return nil
	}
	// Retry-After: whole seconds until the bucket holds a token again.
	wait := (1 - a.limiter.Tokens()) / float64(a.limiter.Limit())
	retry := max(1, int(math.Ceil(wait)))
	return &apiError{status: http.StatusTooManyRequests, code: CodeRateLimited, retryAfter: retry,
		msg: fmt.Sprintf("rate limit: app %q is over its limit of %.4g requests per second (burst %d); retry after %d s", a.code, float64(a.limiter.Limit()), a.limiter.Burst(), retry)}
}

// scopeDenied is the refusal for a scope the app may not touch.
func scopeDenied(a *app, s wire.Scope) *apiError {
	return &apiError{status: http.StatusForbidden, code: CodeAppDenied,
		msg:        fmt.Sprintf("bk_scope_id: app %q may not touch %s %s", a.code, s.Type, s.ID),
		permission: map[string]any{"bk_app_code": a.code, "scope_type": s.Type, "scope_id": s.ID},
		denied:     s.Namespace()}
}

// namespaceDenied is the refusal for a namespace the app may not touch.
func namespaceDenied(a *app, field, ns string) *apiError {
	return &apiError{status: http.StatusForbidden, code: CodeAppDenied,
		msg:        fmt.Sprintf("%s: app %q may not touch namespace %q", field, a.code, ns),
		permission: map[string]any{"bk_app_code": a.code, "namespace": ns},
		denied:     ns}
}
