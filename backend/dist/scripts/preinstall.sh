#!/bin/sh
# gseproc preinstall (deb: preinst, rpm: %pre): the system account the
# server runs as. Idempotent; an existing account is left as it is.
set -e
nologin=/usr/sbin/nologin
[ -x "$nologin" ] || nologin=/sbin/nologin
if ! getent group gseproc >/dev/null 2>&1; then
	groupadd --system gseproc
fi
if ! getent passwd gseproc >/dev/null 2>&1; then
	useradd --system --gid gseproc --home-dir /var/lib/gseproc --no-create-home \
		--shell "$nologin" --comment "gseproc server" gseproc
fi
exit 0
