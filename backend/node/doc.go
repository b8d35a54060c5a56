// Package node builds a running gseproc from its configuration: the engine,
// its store, its transport, the health prober and, as the config says, the
// simulated fleet beside or instead of real agents. The subcommands (server,
// console, demo, ssh, op, sim) parse flags and call it; they do not
// assemble parts themselves. The agent is not here: backend/agent/agentcmd
// builds it, so that its own binary links none of this.
//
// The contract:
//   - StartServer is what `gseproc server` serves: a backend.Backend that
//     refuses calls, with the reason, until its engine has started.
//   - OpenEmbedded and OpenEmbeddedFleet start an engine over an in-process
//     simulated fleet with an in-memory store (console, demo, op without a
//     server).
//   - OpenNATSEngine and StartNATS start the NATS side (embedded server or
//     external cluster, dispatcher, JetStream store) and the engine on it.
//   - NewSim builds the simulated fleet served over NATS (`gseproc sim`;
//     transport.ClientLink is its connection), Run runs it.
//   - Server.ServeAPI serves the HTTP API on a node; ServePprof the Go
//     profiles (loopback only); StartSSH the console over SSH on a backend.
//   - OpenBackend is the backend a CLI or console command uses: the
//     servers through the HTTP client, or the embedded engine;
//     ChooseServer picks the server of a command given none (Choice).
//   - ApplyDemo turns a config into the demo (`gseproc server --demo`).
//
// Every constructor returns what closes everything it started (a Close
// method or a closer func), in order and safe to call twice; a constructor
// that fails has closed what it had. The version is the caller's (the
// binary's, set at build time) and is handed in, not read from a global.
package node
