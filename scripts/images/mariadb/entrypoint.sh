#!/bin/bash
# Entrypoint of the MariaDB image that scripts/images/mariadb.sh builds from Debian's packages.
# Written for kudo-rs. It behaves the way the KUDO examples (examples/galera, examples/mysql, …) expect
# the Docker library's mariadb image to behave:
#
#   entrypoint.sh [--option…]        the server (mariadbd) with these options
#   entrypoint.sh mariadbd|mysqld …  the server
#   entrypoint.sh PROGRAM …          any other program, run as is (`kubectl run … -- mysql -h HOST`)
#
# The server:
#   - started as root, it gives /run/mysqld and the data directory to user mysql (volumes are often
#     owned by root) and mariadbd switches to that user (`user = mysql` in /etc/mysql/my.cnf);
#   - when the data directory has no `mysql/` subdirectory it is initialised first: system tables,
#     then, on a server that listens only on a socket and has Galera off, the root password
#     MYSQL_ROOT_PASSWORD (or MARIADB_ROOT_PASSWORD) for every root account and for root@'%' (or
#     root@MYSQL_ROOT_HOST), MYSQL_DATABASE, MYSQL_USER with MYSQL_PASSWORD, and the files of
#     /docker-entrypoint-initdb.d (*.sql, *.sql.gz, *.sh); MYSQL_ALLOW_EMPTY_PASSWORD=yes allows an
#     empty root password;
#   - a data directory that has `mysql/` is used as it is: a Galera node whose `mysql/` was made empty
#     by an init container gets its data from a donor (state snapshot transfer) when mariadbd starts.
set -euo pipefail

log() { echo "$(date -u '+%Y-%m-%d %H:%M:%S') entrypoint: $*" >&2; }
die() { log "error: $*"; exit 1; }

# First argument an option: the server with these options.
if [[ $# -eq 0 || "$1" == -* ]]; then
  set -- mariadbd "$@"
fi
case "$1" in
  mariadbd | mysqld) shift ;;
  *) exec "$@" ;;
esac

# The variables under both names (MARIADB_* wins when both are set).
for v in ROOT_PASSWORD ROOT_HOST DATABASE USER PASSWORD ALLOW_EMPTY_PASSWORD; do
  m="MARIADB_$v" o="MYSQL_$v"
  if [[ -n "${!m:-}" ]]; then export "$o=${!m}"; fi
done

# What the server would use, with these options and the configuration files (also checks the options).
help=$(mariadbd "$@" --verbose --help 2>&1) || { echo "$help" >&2; die "mariadbd rejects its options"; }
# The table of values closes the help text (the last line that names the option).
opt() { awk -v k="$1" '$1 == k { v = $2 } END { print v }' <<<"$help"; }
DATADIR=$(opt datadir)
SOCKET=$(opt socket)
DATADIR=${DATADIR%/}
[[ -n "$DATADIR" && -n "$SOCKET" ]] || die "cannot tell the data directory or the socket from mariadbd --verbose --help"

if [[ "$(id -u)" == 0 ]]; then
  mkdir -p "$DATADIR" "$(dirname "$SOCKET")" /run/mysqld
  # Only what is not mysql's yet: a large data directory is not walked file by file at every start.
  find "$DATADIR" "$(dirname "$SOCKET")" /run/mysqld \! -user mysql -exec chown mysql:mysql '{}' +
fi

# sql_string VALUE: VALUE as a quoted SQL string literal.
sql_string() {
  local s=${1//\\/\\\\}
  s=${s//\'/\\\'}
  printf "'%s'" "$s"
}

initialise() {
  if [[ -z "${MYSQL_ROOT_PASSWORD:-}" && "${MYSQL_ALLOW_EMPTY_PASSWORD:-}" != yes ]]; then
    die "the data directory $DATADIR is empty and no root password is given: set MYSQL_ROOT_PASSWORD (or MYSQL_ALLOW_EMPTY_PASSWORD=yes)"
  fi
  log "initialising $DATADIR"
  local as=()
  [[ "$(id -u)" == 0 ]] && as=(--user=mysql)
  mariadb-install-db "${as[@]}" --datadir="$DATADIR" --skip-test-db --cross-bootstrap \
    --auth-root-authentication-method=normal --wsrep_on=OFF "$@" >&2 ||
    die "mariadb-install-db failed"

  # A server for the setup only: no network, no Galera, its own socket.
  local sock=/run/mysqld/initialise.sock
  mariadbd "$@" --skip-networking --socket="$sock" --wsrep_on=OFF --wsrep_provider=none \
    --skip-slave-start --loose-innodb_buffer_pool_load_at_startup=0 &
  local pid=$! i
  for i in $(seq 1 60); do
    if mariadb-admin --socket="$sock" -uroot ping >/dev/null 2>&1; then break; fi
    kill -0 "$pid" 2>/dev/null || die "the setup server exited"
    sleep 1
  done
  mariadb-admin --socket="$sock" -uroot ping >/dev/null 2>&1 || die "the setup server did not answer within 60s"

  local pw host=${MYSQL_ROOT_HOST:-%}
  pw=$(sql_string "${MYSQL_ROOT_PASSWORD:-}")
  {
    echo "SET @@SESSION.SQL_LOG_BIN=0;"
    # Every root account the tables have (localhost, 127.0.0.1, ::1) gets the password.
    mariadb --socket="$sock" -uroot -N -B -e "SELECT Host FROM mysql.user WHERE User='root'" |
      while read -r h; do echo "SET PASSWORD FOR 'root'@$(sql_string "$h") = PASSWORD($pw);"; done
    if [[ "$host" != localhost ]]; then
      echo "CREATE USER IF NOT EXISTS 'root'@$(sql_string "$host") IDENTIFIED BY $pw;"
      echo "GRANT ALL ON *.* TO 'root'@$(sql_string "$host") WITH GRANT OPTION;"
      echo "GRANT PROXY ON ''@'%' TO 'root'@$(sql_string "$host") WITH GRANT OPTION;"
    fi
    echo "DROP USER IF EXISTS ''@'localhost';"
    if [[ -n "${MYSQL_DATABASE:-}" ]]; then
      echo "CREATE DATABASE IF NOT EXISTS \`${MYSQL_DATABASE//\`/\`\`}\`;"
    fi
    if [[ -n "${MYSQL_USER:-}" ]]; then
      echo "CREATE USER $(sql_string "$MYSQL_USER")@'%' IDENTIFIED BY $(sql_string "${MYSQL_PASSWORD:-}");"
      if [[ -n "${MYSQL_DATABASE:-}" ]]; then
        echo "GRANT ALL ON \`${MYSQL_DATABASE//\`/\`\`}\`.* TO $(sql_string "$MYSQL_USER")@'%';"
      fi
    fi
    echo "FLUSH PRIVILEGES;"
  } | mariadb --socket="$sock" -uroot || die "setting up users failed"

  # From here on root has its password; the client reads it from a file only root can read.
  local cnf=/run/mysqld/initialise.cnf
  (umask 077; printf '[client]\nuser=root\npassword=%s\nsocket=%s\n' "${MYSQL_ROOT_PASSWORD:-}" "$sock" >"$cnf")
  local f
  for f in /docker-entrypoint-initdb.d/*; do
    [[ -e "$f" ]] || continue
    case "$f" in
      *.sql) log "running $f"; mariadb --defaults-extra-file="$cnf" ${MYSQL_DATABASE:+"$MYSQL_DATABASE"} <"$f" ;;
      *.sql.gz) log "running $f"; gunzip -c "$f" | mariadb --defaults-extra-file="$cnf" ${MYSQL_DATABASE:+"$MYSQL_DATABASE"} ;;
      *.sh) log "running $f"; bash "$f" ;;
      *) log "ignoring $f" ;;
    esac
  done
  rm -f "$cnf"

  kill "$pid"
  wait "$pid" || true
  log "$DATADIR initialised"
}

if [[ -d "$DATADIR/mysql" ]]; then
  if [[ -z "$(ls -A "$DATADIR/mysql")" ]]; then
    log "$DATADIR/mysql is empty: not initialising (a Galera joiner gets its data by state transfer)"
  fi
else
  initialise "$@"
fi

log "starting mariadbd $*"
exec mariadbd "$@"
