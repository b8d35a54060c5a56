#!/bin/sh
# gseproc postinstall (deb: postinst, rpm: %post): data directories and
# config permissions, then systemd learns of the units. A first install
# enables and starts nothing (configure /etc/gseproc/config.toml, then
# systemctl enable --now gseproc-server, gseproc-agent or gseproc-ssh); an upgrade
# restarts the units that were running (the agent's hosted processes keep
# running: KillMode=process).
set -e
install -d -o gseproc -g gseproc -m 0750 /var/lib/gseproc
install -d -o root -g root -m 0700 /var/lib/gseproc/agent
# The config may hold secrets (passwords, app hashes): readable by the server's group only.
chown root:gseproc /etc/gseproc/config.toml /etc/gseproc/ssh_authorized_keys
chmod 0640 /etc/gseproc/config.toml /etc/gseproc/ssh_authorized_keys
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	case "$1" in
	configure) upgrade=${2:+yes} ;;     # deb: configure <old version> on upgrade
	[0-9]*) [ "$1" -gt 1 ] && upgrade=yes ;; # rpm: number of installed versions
	esac
	if [ "${upgrade:-}" = yes ]; then
		systemctl try-restart gseproc-server.service gseproc-agent.service gseproc-ssh.service >/dev/null 2>&1 || true
	fi
fi
exit 0
