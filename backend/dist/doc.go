// Package dist holds what the .deb and .rpm packages install besides the
// binaries (gseproc, and gseproc-agent, which `gseproc agent` execs), and their nfpm configuration (nfpm.yaml; `make package` builds
// both with a pinned nfpm):
//
//	files/gseproc-server.service   systemd unit of `gseproc server` (user gseproc, sandboxed)
//	files/gseproc-agent.service    systemd unit of `gseproc agent` (root, KillMode=process)
//	files/gseproc-ssh.service      systemd unit of `gseproc ssh --server` (user gseproc, sandboxed)
//	files/ssh_authorized_keys      /etc/gseproc/ssh_authorized_keys (keys to operators and namespaces)
//	files/config.toml              /etc/gseproc/config.toml (a config file: kept on upgrade)
//	files/gseproc.env              /etc/gseproc/gseproc.env, the units' EnvironmentFile
//	scripts/*.sh                   maintainer scripts: the gseproc account, data directories, systemd
//
// They live here, beside the code they configure, because the repository's
// top level is fixed; the package has no code, only the test that builds
// the .deb with nfpm and inspects it as an operator's dpkg would see it.
package dist
