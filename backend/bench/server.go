package bench

import (
	"context"
	"net/http"
	"time"

	"gseproc/backend/client"
)

// Server is a running `gseproc server` (JetStream store) with its
// simulated fleet in a process of its own (`gseproc sim --nats`), every
// host online: what a measurement of a client (the console in remote
// mode) runs against, the server's and the fleet's memory outside the
// process measured.
type Server struct{ e *env }

// Start starts the server and the fleet of s and waits for every host to
// be online; Stop ends both.
func Start(ctx context.Context, s Setup) (*Server, error) {
	e, err := start(ctx, s)
	if err != nil {
		return nil, err
	}
	return &Server{e}, nil
}

// Client is a client of the server, authenticated as the bench app.
func (s *Server) Client() *client.Client { return s.e.client }

// Stop stops the fleet and the server and removes their work dir.
func (s *Server) Stop() { s.e.stop() }

// URL is the server's HTTP API.
func (s *Server) URL() string { return s.e.url }

// Connect is a client of a server Start started (its URL), authenticated
// as the bench app: a measurement can run against one server started
// once, by another process.
func Connect(url string) *client.Client {
	return client.New(url, client.WithCredentials(appCode, appSecret, "bench"),
		client.WithHTTPClient(&http.Client{Timeout: 5 * time.Minute}))
}

// ConfigFile is the config file the server, the fleet and an op client
// read (the bench app's credentials): `gseproc op --server URL --config
// FILE` runs an op against this server.
func (s *Server) ConfigFile() string { return s.e.cfg }

// Pids are the server's and the simulated fleet's process ids.
func (s *Server) Pids() (server, sim int) {
	return s.e.server.cmd.Process.Pid, s.e.sim.cmd.Process.Pid
}

// Profile takes the server's profiles into Setup.ProfileDir (a server
// started with one): a heap profile now and a CPU profile of
// Setup.ProfileSeconds from now; finish waits for the CPU profile and
// takes the heap, mutex, block and goroutine profiles. Without a
// ProfileDir both do nothing.
func (s *Server) Profile() (finish func() error) { return s.e.startProfile().finish }
