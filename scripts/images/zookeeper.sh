#!/usr/bin/env bash
# Image docker.io/library/zookeeper:3.6.2, as the KUDO catalog's zookeeper package names it (`image: "zookeeper:3.6.2"`
# in its StatefulSet and validation Job), built from Debian packages.
#
# The real image: Docker's official `zookeeper:3.6.2` (openjdk:11-jre-slim + the Apache ZooKeeper 3.6.2 binary
# distribution unpacked in /apache-zookeeper-3.6.2-bin, its WORKDIR; user and group `zookeeper` 1000:1000;
# /conf /data /datalog /logs owned by them; ENV ZOOCFGDIR=/conf ZOO_CONF_DIR=/conf ZOO_DATA_DIR=/data
# ZOO_DATA_LOG_DIR=/datalog ZOO_LOG_DIR=/logs, the distribution's bin/ on PATH; netcat installed;
# ENTRYPOINT /docker-entrypoint.sh, CMD zkServer.sh start-foreground).
#
# This one: Debian 12's ZooKeeper 3.8 (libzookeeper-java: zookeeper.jar, whose manifest names its dependency jars)
# on OpenJDK 17 (openjdk-17-jre-headless), logging through log4j 1.2 as Debian patched it, with the same layout,
# user, directories, environment, WORKDIR and PATH, and scripts of our own in /apache-zookeeper-3.6.2-bin/bin
# doing what the package's templates call:
#   zkServer.sh start-foreground   reads $ZOOCFGDIR/zoo.cfg (and java.env: JVMFLAGS, ZOO_LOG_DIR) and runs
#                                  QuorumPeerMain in the foreground with $ZOOCFGDIR (log4j.properties) first on
#                                  the classpath; `zkServer.sh status` prints the mode (leader/follower/standalone)
#   zkCli.sh [-server H:P] CMD…    the Java client (ZooKeeperMain), e.g. `bin/zkCli.sh -server $CONN ls /`
#   nc                             netcat-traditional (the official image's Debian `netcat`), for the package's
#                                  healthcheck `echo ruok | nc 127.0.0.1 2181`: ZooKeeper answers after reading
#                                  four bytes and closes with the newline unread; netcat-openbsd lost the answer
#                                  in 17 of 200 tries here (the probe flapped), netcat-traditional in none
#   bash, hostname -s/-d, whoami, tee, mkdir, chown   for the package's bootstrap.sh
# The entrypoint (used only when no `command:` replaces it) writes a standalone zoo.cfg when none exists and
# runs the command as user zookeeper when started as root.
#
#   scripts/images/zookeeper.sh      # prints the OCI archive path (cached in target/images/)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NAME=zookeeper-3.6.2
REF=docker.io/library/zookeeper:3.6.2
PKGS=(openjdk-17-jre-headless libzookeeper-java netcat-traditional)
ZK_HOME=/apache-zookeeper-3.6.2-bin
JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64

img_begin "$NAME" "${PKGS[@]}"
[[ -L "$R/usr/bin/java" && -L "$R/bin/nc" ]] || { img_log "zookeeper: java or nc missing"; exit 1; }
# Maven metadata: not read at run time.
rm -rf "$R/usr/share/maven-repo"

img_user "$R" zookeeper 1000 /home/zookeeper
sed -i 's#^zookeeper:x:1000:1000::/home/zookeeper:/usr/sbin/nologin#zookeeper:x:1000:1000::/home/zookeeper:/bin/bash#' "$R/etc/passwd"
mkdir -p "$R/conf" "$R/data" "$R/datalog" "$R/logs" "$R/home/zookeeper" "$R$ZK_HOME/bin" "$R$ZK_HOME/conf"
chown 1000:1000 "$R/conf" "$R/data" "$R/datalog" "$R/logs" "$R/home/zookeeper"

# --- bin/zkEnv.sh: the environment both scripts share.
cat >"$R$ZK_HOME/bin/zkEnv.sh" <<'EOF'
# Sourced by zkServer.sh and zkCli.sh (kudo-rs image scripts/images/zookeeper.sh).
ZOOBINDIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ZOOKEEPER_PREFIX="$(dirname "$ZOOBINDIR")"
ZOOCFGDIR="${ZOOCFGDIR:-$ZOOKEEPER_PREFIX/conf}"
ZOOCFG="${ZOOCFG:-zoo.cfg}"
case "$ZOOCFG" in /*) ;; *) ZOOCFG="$ZOOCFGDIR/$ZOOCFG" ;; esac
# java.env may set JVMFLAGS, SERVER_JVMFLAGS, CLIENT_JVMFLAGS, ZOO_LOG_DIR.
if [ -f "$ZOOCFGDIR/java.env" ]; then . "$ZOOCFGDIR/java.env"; fi
ZOO_LOG_DIR="${ZOO_LOG_DIR:-$ZOOKEEPER_PREFIX/logs}"
ZOO_LOG4J_PROP="${ZOO_LOG4J_PROP:-INFO,CONSOLE}"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
# zookeeper.jar's manifest lists the jars it needs; slf4j goes to log4j 1.2, configured by
# $ZOOCFGDIR/log4j.properties when there is one (the directory comes first on the classpath).
CLASSPATH="$ZOOCFGDIR:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar${CLASSPATH:+:$CLASSPATH}"
if [ ! -f "$ZOOCFGDIR/log4j.properties" ]; then
  CLASSPATH="$CLASSPATH:$ZOOKEEPER_PREFIX/conf"
fi
EOF

# --- bin/zkServer.sh
cat >"$R$ZK_HOME/bin/zkServer.sh" <<'EOF'
#!/usr/bin/env bash
# zkServer.sh {start-foreground|status} [CONFIG]: ZooKeeper server control
# (kudo-rs image scripts/images/zookeeper.sh; only the foreground mode a container uses).
set -e
. "$(dirname "${BASH_SOURCE[0]}")/zkEnv.sh"
cmd="${1:-}"
if [ -n "${2:-}" ]; then
  case "$2" in /*) ZOOCFG="$2" ;; *) ZOOCFG="$ZOOCFGDIR/$2" ;; esac
fi
client_port() {
  sed -n 's/^[[:space:]]*clientPort[[:space:]]*=[[:space:]]*\([0-9]*\).*/\1/p' "$ZOOCFG" | tail -n 1
}
case "$cmd" in
  start-foreground)
    echo "ZooKeeper JMX disabled by default; using config: $ZOOCFG" >&2
    mkdir -p "$ZOO_LOG_DIR" 2>/dev/null || true
    exec "$JAVA" "-Dzookeeper.log.dir=$ZOO_LOG_DIR" "-Dzookeeper.log.file=zookeeper-server.log" \
      "-Dzookeeper.root.logger=$ZOO_LOG4J_PROP" -XX:+HeapDumpOnOutOfMemoryError "-XX:OnOutOfMemoryError=kill -9 %p" \
      -cp "$CLASSPATH" $JVMFLAGS $SERVER_JVMFLAGS org.apache.zookeeper.server.quorum.QuorumPeerMain "$ZOOCFG"
    ;;
  status)
    echo "Using config: $ZOOCFG" >&2
    port="$(client_port)"
    out="$(printf srvr | nc -w 5 127.0.0.1 "${port:-2181}" 2>/dev/null || true)"
    mode="$(printf '%s\n' "$out" | sed -n 's/^Mode: //p')"
    if [ -z "$mode" ]; then
      echo "Error contacting service. It is probably not running." >&2
      exit 1
    fi
    echo "Client port found: ${port:-2181}. Client address: localhost."
    echo "Mode: $mode"
    ;;
  *)
    echo "Usage: $0 {start-foreground|status} [CONFIG]" >&2
    exit 1
    ;;
esac
EOF

# --- bin/zkCli.sh
cat >"$R$ZK_HOME/bin/zkCli.sh" <<'EOF'
#!/usr/bin/env bash
# zkCli.sh [-server HOST:PORT[,…]] [COMMAND ARGS…]: the ZooKeeper command-line client
# (kudo-rs image scripts/images/zookeeper.sh).
. "$(dirname "${BASH_SOURCE[0]}")/zkEnv.sh"
exec "$JAVA" "-Dzookeeper.log.dir=$ZOO_LOG_DIR" "-Dzookeeper.log.file=zookeeper-cli.log" \
  "-Dzookeeper.root.logger=${ZOO_CLI_LOG4J_PROP:-WARN,CONSOLE}" \
  -cp "$CLASSPATH" $CLIENT_JVMFLAGS $JVMFLAGS org.apache.zookeeper.ZooKeeperMain "$@"
EOF

# The distribution's default log4j configuration: everything to the console.
cat >"$R$ZK_HOME/conf/log4j.properties" <<'EOF'
zookeeper.root.logger=INFO,CONSOLE
zookeeper.console.threshold=INFO
log4j.rootLogger=${zookeeper.root.logger}
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.Threshold=${zookeeper.console.threshold}
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}] - %-5p [%t:%C{1}@%L] - %m%n
EOF

# --- /docker-entrypoint.sh: a standalone server when nothing is configured.
cat >"$R/docker-entrypoint.sh" <<'EOF'
#!/usr/bin/env bash
# Entrypoint of the kudo-rs zookeeper image (scripts/images/zookeeper.sh): writes $ZOO_CONF_DIR/zoo.cfg from the
# ZOO_* variables when there is none and $ZOO_DATA_DIR/myid from ZOO_MY_ID, then runs the command, as user
# zookeeper when started as root.
set -e
cfg="$ZOO_CONF_DIR/zoo.cfg"
if [ ! -f "$cfg" ]; then
  {
    echo "dataDir=$ZOO_DATA_DIR"
    echo "dataLogDir=$ZOO_DATA_LOG_DIR"
    echo "tickTime=$ZOO_TICK_TIME"
    echo "initLimit=$ZOO_INIT_LIMIT"
    echo "syncLimit=$ZOO_SYNC_LIMIT"
    echo "autopurge.snapRetainCount=$ZOO_AUTOPURGE_SNAPRETAINCOUNT"
    echo "autopurge.purgeInterval=$ZOO_AUTOPURGE_PURGEINTERVAL"
    echo "maxClientCnxns=$ZOO_MAX_CLIENT_CNXNS"
    echo "standaloneEnabled=$ZOO_STANDALONE_ENABLED"
    echo "admin.enableServer=$ZOO_ADMINSERVER_ENABLED"
    echo "clientPort=2181"
    [ -n "${ZOO_4LW_COMMANDS_WHITELIST:-}" ] && echo "4lw.commands.whitelist=$ZOO_4LW_COMMANDS_WHITELIST"
    for s in ${ZOO_SERVERS:-}; do echo "$s"; done
  } >"$cfg"
fi
if [ -n "${ZOO_MY_ID:-}" ] && [ ! -f "$ZOO_DATA_DIR/myid" ]; then
  echo "$ZOO_MY_ID" >"$ZOO_DATA_DIR/myid"
fi
if [ "$(id -u)" = 0 ]; then
  chown -R zookeeper:zookeeper "$ZOO_DATA_DIR" "$ZOO_DATA_LOG_DIR" "$ZOO_LOG_DIR" "$ZOO_CONF_DIR" 2>/dev/null || true
  exec setpriv --reuid=zookeeper --regid=zookeeper --init-groups "$@"
fi
exec "$@"
EOF
chmod 0755 "$R$ZK_HOME/bin/"*.sh "$R/docker-entrypoint.sh"

img_pack "$NAME" "$R" --name "$REF" \
  --entrypoint '["/docker-entrypoint.sh"]' --cmd '["zkServer.sh", "start-foreground"]' \
  --workdir "$ZK_HOME" \
  --env "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$ZK_HOME/bin" \
  --env "JAVA_HOME=$JAVA_HOME" --env ZOOCFGDIR=/conf --env ZOO_CONF_DIR=/conf --env ZOO_DATA_DIR=/data \
  --env ZOO_DATA_LOG_DIR=/datalog --env ZOO_LOG_DIR=/logs --env ZOO_TICK_TIME=2000 --env ZOO_INIT_LIMIT=5 \
  --env ZOO_SYNC_LIMIT=2 --env ZOO_AUTOPURGE_PURGEINTERVAL=0 --env ZOO_AUTOPURGE_SNAPRETAINCOUNT=3 \
  --env ZOO_MAX_CLIENT_CNXNS=60 --env ZOO_STANDALONE_ENABLED=true --env ZOO_ADMINSERVER_ENABLED=true
