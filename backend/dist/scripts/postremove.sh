#!/bin/sh
# gseproc postremove (deb: postrm, rpm: %postun): systemd forgets the
# units. Data (/var/lib/gseproc) and the gseproc account are kept, except
# on a deb purge, which removes the data directory too.
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
if [ "$1" = purge ]; then
	rm -rf /var/lib/gseproc
fi
exit 0
