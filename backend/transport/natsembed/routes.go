package natsembed

import (
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// routeWatch logs the cluster's routes as they come and go: a peer node
// whose route is established (info, with its name and address) and one
// whose route is lost (warn), as the server's route list shows them every
// second. nats-server itself says so only at debug level, per pooled
// connection and without the peer's name.
type routeWatch struct {
	stop chan struct{}
	done chan struct{}
}

func watchRoutes(ns *server.Server, log *slog.Logger, every time.Duration) *routeWatch {
	w := &routeWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(every)
		defer t.Stop()
		var prev map[string]string
		for {
			cur := RoutePeers(ns)
			up, down := routeChanges(prev, cur)
			for _, name := range up {
				log.Info("nats: route to cluster peer established", "peer", name, "addr", cur[name])
			}
			for _, name := range down {
				log.Warn("nats: route to cluster peer lost (the node is down or unreachable; it is retried)", "peer", name, "addr", prev[name])
			}
			prev = cur
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// Stop ends the watch and waits for it; safe to call twice.
func (w *routeWatch) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// RoutePeers maps each peer node ns has a route to (by name, else id) to
// its address (the IP of its route connections; their ports are
// ephemeral, a route being a pool of connections).
func RoutePeers(ns *server.Server) map[string]string {
	rz, err := ns.Routez(&server.RoutezOptions{})
	if err != nil {
		return nil
	}
	peers := map[string]string{}
	for _, r := range rz.Routes {
		name := r.RemoteName
		if name == "" {
			name = r.RemoteID
		}
		peers[name] = r.IP
	}
	return peers
}

// routeChanges are the peers in cur and not in prev (up) and the reverse
// (down), each sorted.
func routeChanges(prev, cur map[string]string) (up, down []string) {
	for name := range cur {
		if _, ok := prev[name]; !ok {
			up = append(up, name)
		}
	}
	for name := range prev {
		if _, ok := cur[name]; !ok {
			down = append(down, name)
		}
	}
	slices.Sort(up)
	slices.Sort(down)
	return up, down
}
