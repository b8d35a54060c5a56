package config

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ServerConfig is the [server] section: the HTTP API server.
//
//	[server]
//	listen = "127.0.0.1:8080"
//	fleet = "nats"         # nats (real agents), mixed (+ simulated fleet), simulated
//	max_body_bytes = 1048576
//	max_hosts = 10000
//	rate = 50.0      # requests per second per app
//	burst = 100
//	shutdown_timeout = "10s"
//	native_auth = true
//	anonymous_app = ""  # app used for requests without bk_app_code (demo only)
//
//	[[server.apps]]
//	bk_app_code = "esb_test"
//	salt = "9f1c..."
//	secret_sha256 = "<hex of sha256(salt + secret)>"
//	biz = [1]
//	biz_set = [1]
//	namespaces = ["*"]
//	users = []        # empty: any bk_username / bk_token
//
//	[server.client]   # credentials `gseproc --server URL` sends
//	bk_app_code = "esb_test"
//	bk_app_secret = "xxx"
//	bk_username = "admin"
type ServerConfig struct {
	// Listen is the address to serve on.
	Listen string `toml:"listen"`
	// Fleet is where the server's hosts come from:
	//   "nats" (default): real agents over NATS ([nats]: an embedded NATS
	//     server with JetStream, or an external cluster); tasks, results and
	//     the registry live in JetStream and survive a server restart;
	//   "mixed": as "nats", with the simulated fleet of [simulator] beside
	//     the real agents (what --demo runs);
	//   "simulated": an in-process simulated fleet and in-memory state, no
	//     NATS at all.
	Fleet string `toml:"fleet"`
	// MaxBodyBytes refuses larger request bodies (1306406).
	MaxBodyBytes int64 `toml:"max_body_bytes"`
	// MaxHosts refuses requests addressing more hosts (summed over entries).
	MaxHosts int `toml:"max_hosts"`
	// Rate is each app's sustained request rate per second; Burst its bucket.
	// Rate 0 disables the limit.
	Rate  float64 `toml:"rate"`
	Burst int     `toml:"burst"`
	// ReadTimeout bounds reading a request (headers and body).
	ReadTimeout Duration `toml:"read_timeout"`
	// ShutdownTimeout bounds how long in-flight requests may take to
	// finish on shutdown.
	ShutdownTimeout Duration `toml:"shutdown_timeout"`
	// SyncTimeout bounds the synchronous calls that wait for agents
	// (unregister_proc_info).
	SyncTimeout Duration `toml:"sync_timeout"`
	// NativeAuth requires app credentials (X-Bkapi-Authorization) on the
	// native API /api/v1/; false leaves it open (demo, loopback only).
	NativeAuth bool `toml:"native_auth"`
	// AnonymousApp, when set, is the app a request without any bk_app_code
	// is treated as (no secret checked). Empty refuses such requests.
	AnonymousApp string `toml:"anonymous_app"`
	// Apps are the gateway apps allowed to call the API.
	Apps []AppConfig `toml:"apps"`
	// Client holds the credentials this binary sends as a client of a
	// gseproc server (gseproc --server URL, gseproc op --server URL).
	Client ClientCredentials `toml:"client"`
	// MemoryCeiling is a soft memory limit (bytes) the server (or the
	// console, embedded) keeps its heap under once it holds more than a
	// small one, as long as what it holds leaves the collector room under
	// it (node.PaceMemoryWithin); 0 sets none. Its price is collections,
	// each marking the whole live heap: at 100,000 hosts, with a live
	// heap of ~250 MB after start-up, the default kept the RSS through
	// each op under 500 MB (peak 477-480 MB, 546-585 MB without) for
	// server CPU per op within the measurement's noise over two rounds
	// and ~10% more in a third (weighed by the simulator's CPU); with a
	// live heap 30 MB larger it cost ~13% (the first op up to +49%). The
	// GOMEMLIMIT environment variable overrides all pacing.
	MemoryCeiling int64 `toml:"memory_ceiling"`
}

// AppConfig is one gateway app: its code, its secret (stored salted and
// hashed: SecretSHA256 = hex(sha256(Salt + secret))) and what it may touch.
type AppConfig struct {
	Code         string `toml:"bk_app_code"`
	Salt         string `toml:"salt"`
	SecretSHA256 string `toml:"secret_sha256"`
	// Biz and BizSet are the scopes the process_infos form may use.
	Biz    []int `toml:"biz"`
	BizSet []int `toml:"biz_set"`
	// Namespaces the meta form and the native API may touch; "*" = all.
	// A scope's namespace ("biz_1") is allowed when its scope is.
	Namespaces []string `toml:"namespaces"`
	// Users, when not empty, is the set of bk_username values accepted;
	// empty accepts any user, and app-only calls (the X-Bkapi-Authorization
	// header with no user), which act as "app:<code>".
	Users []string `toml:"users"`
	// Rate and Burst override the server's per-app limit when > 0.
	Rate  float64 `toml:"rate"`
	Burst int     `toml:"burst"`
}

// ClientCredentials are the gateway fields a client sends, and the
// servers it talks to.
type ClientCredentials struct {
	// Servers are the servers of one cluster `gseproc op`, the console and
	// the SSH console talk to when --server is not given (the first that
	// answers; the others when it fails).
	Servers   []string `toml:"servers"`
	AppCode   string   `toml:"bk_app_code"`
	AppSecret string   `toml:"bk_app_secret"`
	Username  string   `toml:"bk_username"`
}

// HashSecret returns hex(sha256(salt + secret)), the form secrets are
// stored in.
func HashSecret(salt, secret string) string {
	sum := sha256.Sum256([]byte(salt + secret))
	return hex.EncodeToString(sum[:])
}

// NewSalt returns a fresh random salt for HashSecret (16 hex digits).
func NewSalt() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// MinMemoryCeiling is the smallest [server] memory_ceiling: above the
// limit a small heap is paced to (node.MemoryTarget, 224 MiB).
const MinMemoryCeiling = 256 << 20

// DefaultListen is the address `gseproc server` serves on by default.
const DefaultListen = "127.0.0.1:8080"

func defaultServer() ServerConfig {
	return ServerConfig{
		Listen:          DefaultListen,
		Fleet:           "nats",
		MaxBodyBytes:    4 << 20,
		MaxHosts:        10000,
		Rate:            100,
		Burst:           200,
		ReadTimeout:     Duration(30 * time.Second),
		ShutdownTimeout: Duration(10 * time.Second),
		SyncTimeout:     Duration(90 * time.Second),
		NativeAuth:      true,
		MemoryCeiling:   460 << 20,
	}
}

func (c ServerConfig) validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Listen != "" {
		if _, port, err := net.SplitHostPort(c.Listen); err != nil {
			add("server.listen: %q is not host:port: %v", c.Listen, err)
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			add("server.listen: port %q is not a number in [0,65535]", port)
		}
	}
	switch c.Fleet {
	case "", "nats", "mixed", "simulated":
	default:
		add("server.fleet: %q is not one of nats, mixed, simulated", c.Fleet)
	}
	if c.MaxBodyBytes < 1024 {
		add("server.max_body_bytes: %d must be >= 1024", c.MaxBodyBytes)
	}
	if c.MaxHosts < 1 {
		add("server.max_hosts: %d must be >= 1", c.MaxHosts)
	}
	if c.Rate < 0 {
		add("server.rate: %v must be >= 0", c.Rate)
	}
	if c.Rate > 0 && c.Burst < 1 {
		add("server.burst: %d must be >= 1 when rate is set", c.Burst)
	}
	if c.ReadTimeout < 0 {
		add("server.read_timeout: %s must be >= 0", c.ReadTimeout.D())
	}
	if c.ShutdownTimeout <= 0 {
		add("server.shutdown_timeout: %s must be > 0", c.ShutdownTimeout.D())
	}
	if c.SyncTimeout <= 0 {
		add("server.sync_timeout: %s must be > 0", c.SyncTimeout.D())
	}
	if c.MemoryCeiling != 0 && c.MemoryCeiling < MinMemoryCeiling {
		add("server.memory_ceiling: %d must be 0 (none) or >= %d", c.MemoryCeiling, MinMemoryCeiling)
	}
	seen := map[string]bool{}
	for i, a := range c.Apps {
		p := fmt.Sprintf("server.apps[%d]", i)
		switch {
		case strings.TrimSpace(a.Code) == "":
			add("%s.bk_app_code: required", p)
		case seen[a.Code]:
			add("%s.bk_app_code: %q appears twice", p, a.Code)
		}
		seen[a.Code] = true
		if b, err := hex.DecodeString(a.SecretSHA256); err != nil || len(b) != sha256.Size {
			add("%s.secret_sha256: want 64 hex digits of sha256(salt + secret) (see gseproc server --hash-secret)", p)
		}
		for _, id := range append(append([]int(nil), a.Biz...), a.BizSet...) {
			if id <= 0 {
				add("%s: scope id %d must be > 0", p, id)
			}
		}
		if a.Rate < 0 || a.Burst < 0 {
			add("%s: rate and burst must be >= 0", p)
		}
	}
	if _, err := ParseServerURLs(c.Client.Servers); err != nil && len(c.Client.Servers) > 0 {
		add("server.client.servers: %v", err)
	}
	if c.AnonymousApp != "" && !seen[c.AnonymousApp] {
		add("server.anonymous_app: %q is not one of server.apps", c.AnonymousApp)
	}
	return errors.Join(errs...)
}

// ParseServerURLs parses the servers a client talks to: http:// or
// https:// URLs with a host, given one by one or comma-separated
// ("http://a:8080,http://b:8080"), each once.
func ParseServerURLs(list []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, item := range list {
		for _, raw := range strings.Split(item, ",") {
			raw = strings.TrimSpace(raw)
			if raw == "" {
				continue
			}
			u, err := url.Parse(raw)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
				return nil, fmt.Errorf("%q: want an http:// or https:// URL, e.g. http://127.0.0.1:8080", raw)
			}
			norm := strings.TrimRight(u.String(), "/")
			if seen[norm] {
				return nil, fmt.Errorf("%q appears twice", raw)
			}
			seen[norm] = true
			out = append(out, norm)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no server URL")
	}
	return out, nil
}
