// Package agentcmd is `gseproc agent`: its flags and the agent served
// over NATS (Node: the supervising agent of backend/agent and its
// transport link). The gseproc binary runs it as a subcommand, and the
// agent's own small binary, gseproc-agent (backend/agent/cmd/gseproc-agent),
// runs nothing else; `gseproc agent` execs that binary when it lies beside
// gseproc with the same version.
//
// It imports the agent, the client side of the transport, the config and
// clikit, and nothing of the engine, the store, the server, the NATS
// server or the console, so the agent's binary maps a few MB of code, not
// the whole of gseproc's (TestAgentBinaryImports keeps it so).
package agentcmd
