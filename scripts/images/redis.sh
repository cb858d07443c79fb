#!/usr/bin/env bash
# Image docker.io/library/redis:5.0.1-alpine, as the KUDO catalog's redis package names it (`image:
# redis:5.0.1-alpine` in its StatefulSet and in its cluster-init Job), built from Debian packages.
#
# The real image: Docker's official `redis:5.0.1-alpine` (Alpine 3.8: busybox 1.28 on musl as the userland;
# Redis 5.0.1 built from source into /usr/local/bin; user redis; WORKDIR /data; ENTRYPOINT docker-entrypoint.sh,
# which runs redis-server as user redis; CMD redis-server; port 6379).
#
# This one: Debian 12's Redis 7.0 (redis-server, redis-tools: redis-server, redis-cli, redis-benchmark,
# redis-check-*) with Debian's shell tools (dash as /bin/sh, sed, grep, mawk as awk, coreutils), WORKDIR /data,
# user redis (999:999), and what the package's templates call:
#   /conf/update-node.sh (#!/bin/sh, sed -i) then `redis-server /conf/redis.conf` (cluster mode, appendonly, in /data)
#   the init Job's `/bin/sh -c 'echo yes | redis-cli -x -h … --cluster create --cluster-replicas 1 $(… nslookup
#     POD.SVC | grep "Address" | awk "{ print \$3 }" …)'`: `nslookup` here is a script of ours printing what
#     Alpine 3.8's busybox nslookup printed on stdout, where that command line takes the third field of the
#     `Address` lines as the pod IP:
#         <blank line>                      (busybox could not print the server on musl; its error went to stderr)
#         Name:      NAME
#         Address 1: IP CANONICAL-NAME
#     (resolved by glibc through /etc/resolv.conf and its search domains; exit 1 and a message on stderr when
#     the name does not resolve). Debian's busybox 1.35 prints `Address: IP`, which that command line cannot use.
#   redis-cli here is a wrapper (/usr/local/bin/redis-cli, first on PATH) that drops `-x` when `--cluster` is given,
#     as redis-cli 5.0.1 ignored it there: Redis 7's redis-cli appends stdin to the --cluster subcommand's
#     arguments, so the init Job's `echo yes | redis-cli -x … --cluster create …` (stdin meant for the
#     confirmation prompt) fails with "Wrong number of arguments for specified --cluster sub command".
# The entrypoint (used only when no `command:` replaces it) does what the official one does: `redis-server` is
# prepended to arguments that are options or a .conf file, and redis-server runs as user redis when started
# as root.
#
#   scripts/images/redis.sh      # prints the OCI archive path (cached in target/images/)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NAME=redis-5.0.1-alpine
REF=docker.io/library/redis:5.0.1-alpine
PKGS=(redis-server redis-tools)

img_begin "$NAME" "${PKGS[@]}"
rm -rf "$R/etc/init.d" "$R/lib/systemd" "$R/etc/logrotate.d"

img_user "$R" redis 999 /data
mkdir -p "$R/data"
chown 999:999 "$R/data"

cat >"$R/usr/bin/nslookup" <<'EOF'
#!/bin/sh
# nslookup NAME [SERVER]: the output of Alpine 3.8's busybox nslookup (kudo-rs image scripts/images/redis.sh).
# Resolves NAME with the C library (/etc/hosts, then DNS with /etc/resolv.conf's search domains); SERVER is
# accepted and ignored. stdout: a blank line, "Name:      NAME", then "Address N: IP CANONICAL-NAME".
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  echo "Usage: nslookup HOST [DNS_SERVER]" >&2
  exit 1
fi
name=$1
answers=$(getent ahosts "$name" 2>/dev/null | awk '$2 == "STREAM" { print $1 }')
canonical=$(getent ahosts "$name" 2>/dev/null | awk 'NR == 1 && NF >= 3 { print $3 }')
echo ""
if [ -z "$answers" ]; then
  echo "nslookup: can't resolve '$name': Name does not resolve" >&2
  exit 1
fi
printf '%-10s %s\n' "Name:" "$name"
n=0
for ip in $answers; do
  n=$((n + 1))
  printf 'Address %d: %s %s\n' "$n" "$ip" "${canonical:-$name}"
done
EOF
chmod 0755 "$R/usr/bin/nslookup"

mkdir -p "$R/usr/local/bin"
cat >"$R/usr/local/bin/redis-cli" <<'EOF'
#!/bin/sh
# redis-cli as Redis 5.0.1's for --cluster (kudo-rs image scripts/images/redis.sh): there -x was ignored, where
# Redis 7 appends stdin to the subcommand's arguments; `echo yes | redis-cli -x --cluster create …` relies on
# stdin answering the confirmation prompt. Everything else goes to Debian's redis-cli unchanged.
for a in "$@"; do
  if [ "$a" = --cluster ]; then
    for b in "$@"; do
      shift
      [ "$b" = -x ] && continue
      set -- "$@" "$b"
    done
    break
  fi
done
exec /usr/bin/redis-cli "$@"
EOF
chmod 0755 "$R/usr/local/bin/redis-cli"
cat >"$R/usr/local/bin/docker-entrypoint.sh" <<'EOF'
#!/bin/sh
# Entrypoint of the kudo-rs redis image (scripts/images/redis.sh): `redis-server` is prepended to arguments that
# are options or a .conf file; redis-server started as root runs as user redis, owning its working directory.
set -e
case "${1:-}" in
  -*|*.conf) set -- redis-server "$@" ;;
esac
if [ "${1:-}" = redis-server ] && [ "$(id -u)" = 0 ]; then
  find . \! -user redis -exec chown redis '{}' + 2>/dev/null || true
  exec setpriv --reuid=redis --regid=redis --init-groups "$@"
fi
exec "$@"
EOF
chmod 0755 "$R/usr/local/bin/docker-entrypoint.sh"

img_pack "$NAME" "$R" --name "$REF" \
  --entrypoint '["docker-entrypoint.sh"]' --cmd '["redis-server"]' --workdir /data
