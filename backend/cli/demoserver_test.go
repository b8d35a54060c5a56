package cli

import (
	"regexp"
	"testing"
	"time"
)

// startDemoServer runs `gseproc server --demo` on ports of its own choosing
// on 127.0.0.1 and returns its API base URL and the NATS URL agents use,
// read from its banner.
func startDemoServer(t *testing.T, extra ...string) (base, natsURL string) {
	t.Helper()
	srvOut, _ := runCmd(t, append([]string{"server", "--demo", "--listen", "127.0.0.1:0", "--nats-listen", "127.0.0.1:-1"}, extra...)...)
	apiRE := regexp.MustCompile(`listening on (http://\S+)`)
	natsRE := regexp.MustCompile(`agents connect to (nats://\S+)`)
	waitFor(t, "server banner", 20*time.Second, func() bool {
		m1 := apiRE.FindStringSubmatch(srvOut.String())
		m2 := natsRE.FindStringSubmatch(srvOut.String())
		if m1 == nil || m2 == nil {
			return false
		}
		base, natsURL = m1[1], m2[1]
		return true
	})
	return base, natsURL
}
