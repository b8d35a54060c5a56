#!/bin/sh
# gseproc preremove (deb: prerm, rpm: %preun): on removal (not on an
# upgrade) the units are stopped and disabled.
set -e
case "$1" in
remove|0) ;;     # deb: remove; rpm: 0 versions left
*) exit 0 ;;
esac
if [ -d /run/systemd/system ]; then
	systemctl disable --now gseproc-server.service gseproc-agent.service gseproc-ssh.service >/dev/null 2>&1 || true
fi
exit 0
