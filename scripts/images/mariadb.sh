#!/usr/bin/env bash
# MariaDB with Galera from Debian's packages, for examples/galera on real pods.
#
#   scripts/images/mariadb.sh        # prints the archive path (cached in target/images/)
#
# Names: docker.io/library/mariadb:10.5.3 is the name examples/galera asks for (its appVersion). The
# software is Debian bookworm's: MariaDB 10.11 and galera-4 26.4, whatever the tag says; there is no
# registry to pull the real 10.5.3 from. Also named docker.io/library/mysql:5.7, the client image the
# seed walkthrough (part 3) runs as `kubectl run mysql-client --image=mysql:5.7 … -- mysql -h …`:
# Debian has no MySQL; MariaDB's client and server speak the same protocol.
#
# What the templates rely on (the Docker library image's behaviour, done by our own
# scripts/images/mariadb/entrypoint.sh): MYSQL_ROOT_PASSWORD; /var/lib/mysql initialised when it has
# no mysql/ subdirectory, left alone when it has one (Galera joiners get their data by SST);
# arguments that start with `-` go to the server; /etc/mysql/conf.d/*.cnf read; mysql, mysqladmin,
# mysqldump, sh on PATH. State snapshot transfer by mariabackup needs mariadb-backup, socat, ss
# (iproute2) and pv. The image starts as root (hostPath volumes are root's): the entrypoint gives the
# data directory to user mysql (uid 999, as in the Docker library image) and the server switches to it.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/images/lib.sh
source "$HERE/lib.sh"

NAME=mariadb-10.5.3
PKGS=(mariadb-server mariadb-client galera-4 mariadb-backup socat iproute2 pv)
IMG_INPUTS="$HERE/mariadb/entrypoint.sh $HERE/mariadb/my.cnf" img_begin "$NAME" "${PKGS[@]}"
# The server's test suite and debug symbols are not needed at run time.
rm -rf "$R/usr/share/mysql/mysql-test" "$R/usr/lib/debug"

img_user "$R" mysql 999 /var/lib/mysql
# Debian's maintainer scripts (not run) would make these.
mkdir -p "$R/var/lib/mysql" "$R/run/mysqld" "$R/etc/mysql/conf.d" "$R/docker-entrypoint-initdb.d"
chown 999:999 "$R/var/lib/mysql" "$R/run/mysqld"
chmod 0755 "$R/run/mysqld"
# Our own configuration replaces Debian's (my.cnf is an alternatives link dpkg would have made).
rm -rf "$R/etc/mysql/mariadb.conf.d" "$R/etc/mysql/mariadb.cnf" "$R/etc/mysql/my.cnf"
install -m 0644 "$HERE/mariadb/my.cnf" "$R/etc/mysql/my.cnf"
install -D -m 0755 "$HERE/mariadb/entrypoint.sh" "$R/usr/local/bin/docker-entrypoint.sh"

img_pack "$NAME" "$R" \
  --name docker.io/library/mariadb:10.5.3 \
  --name docker.io/library/mysql:5.7 \
  --entrypoint '["/usr/local/bin/docker-entrypoint.sh"]' \
  --cmd '["mariadbd"]' \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env LANG=C.UTF-8 \
  --workdir /
