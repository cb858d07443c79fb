#!/usr/bin/env bash
# examples/galera on real pods: a real MariaDB Galera cluster (Debian's MariaDB 10.11 and
# galera-4 in the image mariadb:10.5.3 from scripts/images/mariadb.sh, init container busybox:1.28
# from scripts/images/busybox.sh), driven through kudo-rs with the seed walkthrough's commands.
#
#   KUBECONFIG=… [KUDO=…] [KUDO_REAL_NODES_DIR=…] [RN_TRANSCRIPT=FILE] \
#     scripts/real-nodes-tests/real_nodes_galera.sh
#
# Checks: `kubectl kudo install .` reaches deploy COMPLETE; wsrep_cluster_size is 3 on every node
# and the bootstrap Deployment is gone; a row written on node 0 is read on node 2; `update -p
# NODE_COUNT=5` gives wsrep_cluster_size 5 on all five nodes, and the new nodes (data by SST) have
# the row; `plan trigger --name backup` writes a mysqldump file holding the row; after the row is
# deleted, `update -p RESTORE_FROM=<file>` brings it back on every node, the grant tables are the
# same on every node, and a restarted node rejoins (root can still log in there); `uninstall` finishes
# its cleanup plan and the instance goes.
# RN_TRANSCRIPT: the walkthrough-style commands and their real output are appended to that file.
set -euo pipefail
# shellcheck source=scripts/real-nodes-tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rn_begin galera
rn_image busybox.sh mariadb.sh
INSTANCE=galera-instance
PW=admin # MYSQL_ROOT_PASSWORD's default (params.yaml)
POD=$INSTANCE-galera

# quote ARG: ARG as a reader would type it in a shell.
quote() {
  if [[ "$1" =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then printf '%s' "$1"
  elif [[ "$1" != *[\"\$\`\\]* ]]; then printf '"%s"' "$1"
  else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}
# show CMD…: runs CMD, printing "$ CMD" (kubectl-kudo shown as `kubectl kudo`) and its output to
# stderr and to $RN_TRANSCRIPT; stdout gets the output too. Fails as CMD fails.
show() {
  local line="" a out rc=0
  for a in "$@"; do
    [[ "$a" == "$KUDO" ]] && a="kubectl kudo"
    line+="${line:+ }$([[ "$a" == "kubectl kudo" ]] && echo "$a" || quote "$a")"
  done
  out=$("$@" 2>&1) || rc=$?
  { echo "\$ $line"; [[ -z "$out" ]] || echo "$out"; echo; } | tee -a "${RN_TRANSCRIPT:-/dev/null}" >&2
  printf '%s\n' "$out"
  return $rc
}
# show_sh 'PIPELINE': show for a shell pipeline (run by bash -c, shown as written).
show_sh() {
  local out rc=0
  out=$(bash -c "$1" 2>&1) || rc=$?
  { echo "\$ $1"; [[ -z "$out" ]] || echo "$out"; echo; } | tee -a "${RN_TRANSCRIPT:-/dev/null}" >&2
  printf '%s\n' "$out"
  return $rc
}
note() { echo "# $*" | tee -a "${RN_TRANSCRIPT:-/dev/null}" >&2; }

# sql POD QUERY: the query's rows, tab-separated, no header.
sql() { kubectl -n "$RN_NS" exec "$1" -c mariadb -- mysql -uroot -p"$PW" -N -B -e "$2"; }
status_value() { sql "$1" "SHOW STATUS LIKE '$2'" | cut -f2; }
# cluster_size N: every node of 0..N-1 sees N members and is Synced.
cluster_size() {
  local n=$1 i
  for ((i = 0; i < n; i++)); do
    [[ "$(status_value "$POD-$i" wsrep_cluster_size)" == "$n" ]] || return 1
    [[ "$(status_value "$POD-$i" wsrep_local_state_comment)" == Synced ]] || return 1
  done
}
show_size() {
  show kubectl -n "$RN_NS" exec "$1" -c mariadb -- mysql -uroot -p"$PW" -e "SHOW STATUS LIKE 'wsrep_cluster_size'" >/dev/null
}

if [[ -n "${RN_TRANSCRIPT:-}" ]]; then
  note "examples/galera on real pods: kudo-rs $("$KUDO" version 2>/dev/null | grep -o 'GitVersion:"[^"]*"'), $(date -u '+%Y-%m-%d %H:%M UTC')"
  note "real pods (one kubelet, containerd); namespace $RN_NS; kubectl kudo = $KUDO"
  echo >>"$RN_TRANSCRIPT"
fi

# --- deploy: the walkthrough's commands, from the operator's directory.
cd "$RN_ROOT/examples/galera"
t0=$(date +%s)
show "$KUDO" install . -n "$RN_NS" >/dev/null
rn_plan_complete "$INSTANCE" 600
rn_log "deploy COMPLETE after $(( $(date +%s) - t0 ))s"
show "$KUDO" plan status --instance="$INSTANCE" -n "$RN_NS" >/dev/null
show kubectl -n "$RN_NS" get pods -o wide >/dev/null
rn_until 60 "bootstrap pod gone (cleanup step)" \
  bash -c "[[ -z \$(kubectl -n $RN_NS get pods -l app=galera-bootstrap -o name) ]]"
rn_until 120 "wsrep_cluster_size 3, Synced, on nodes 0-2" cluster_size 3
show_size "$POD-0"
# The last membership view node 0 logged, as the walkthrough (part 2) shows it.
show_sh "kubectl -n $RN_NS logs $POD-0 | grep -A 12 'View:' | tail -n 13" >/dev/null
show kubectl -n "$RN_NS" exec "$POD-0" -c mariadb -- mysql -uroot -p"$PW" -e "SELECT VERSION(); SHOW STATUS LIKE 'wsrep_provider_version'" >/dev/null
for i in 0 1 2; do rn_eq "wsrep_cluster_size on $POD-$i" 3 "$(status_value "$POD-$i" wsrep_cluster_size)"; done

# --- replication: written on node 0, read on node 2.
show kubectl -n "$RN_NS" exec "$POD-0" -c mariadb -- mysql -uroot -p"$PW" -e \
  "CREATE DATABASE kudo; CREATE TABLE kudo.notes (id INT PRIMARY KEY, note VARCHAR(100)); INSERT INTO kudo.notes VALUES (1, 'written on galera-0'), (2, 'kept by the backup')" >/dev/null
show kubectl -n "$RN_NS" exec "$POD-2" -c mariadb -- mysql -uroot -p"$PW" -e "SELECT * FROM kudo.notes" >/dev/null
rn_eq "row written on node 0, read on node 2" "written on galera-0" "$(sql "$POD-2" "SELECT note FROM kudo.notes WHERE id=1")"

# --- scale to 5.
t0=$(date +%s)
old=$(rn_plan_uid "$INSTANCE" node_update)
show "$KUDO" update --instance "$INSTANCE" -n "$RN_NS" -p NODE_COUNT=5 >/dev/null
rn_plan_run_complete "$INSTANCE" node_update "$old" 600
show "$KUDO" plan status --instance="$INSTANCE" -n "$RN_NS" >/dev/null
rn_log "node_update COMPLETE after $(( $(date +%s) - t0 ))s"
rn_until 180 "wsrep_cluster_size 5, Synced, on nodes 0-4" cluster_size 5
show kubectl -n "$RN_NS" get pods >/dev/null
show_size "$POD-4"
for i in 0 1 2 3 4; do rn_eq "wsrep_cluster_size on $POD-$i" 5 "$(status_value "$POD-$i" wsrep_cluster_size)"; done
rn_eq "row on node 4 (its data came by SST)" "written on galera-0" "$(sql "$POD-4" "SELECT note FROM kudo.notes WHERE id=1")"
rss=0
for i in 0 1 2 3 4; do
  r=$(kubectl -n "$RN_NS" exec "$POD-$i" -c mariadb -- ps -o rss= -C mariadbd | tr -d ' ')
  rss=$((rss + r))
done
rn_log "measured: mariadbd resident memory, 5 nodes: $((rss / 1024)) MiB in all; load average: $(cut -d' ' -f1-3 /proc/loadavg)"

# --- backup.
old=$(rn_plan_uid "$INSTANCE" backup)
show "$KUDO" plan trigger --name backup --instance "$INSTANCE" -n "$RN_NS" >/dev/null
rn_plan_run_complete "$INSTANCE" backup "$old" 300
FILE=$(kubectl -n "$RN_NS" logs "job/$INSTANCE-backup" | sed -n 's/^backup written: //p')
show kubectl -n "$RN_NS" logs "job/$INSTANCE-backup" >/dev/null
[[ -n "$FILE" ]] || rn_fail "the backup Job printed no file name"
PV=$(kubectl -n "$RN_NS" get pvc "$INSTANCE-backups" -o jsonpath='{.spec.volumeName}')
DIR=$(kubectl get pv "$PV" -o jsonpath='{.spec.hostPath.path}')
note "the backup volume is a hostPath PV on this node: $DIR"
show_sh "grep -E '^(-- Current Database|CREATE TABLE|INSERT INTO)|^\(' $DIR/$FILE" >/dev/null
rn_check "backup file $FILE holds the table and both rows" \
  grep -q "(2,'kept by the backup')" "$DIR/$FILE"
rn_check "backup file is a complete mysqldump" grep -q '^-- Dump completed' "$DIR/$FILE"

# --- restore: delete a row, load the backup.
show kubectl -n "$RN_NS" exec "$POD-1" -c mariadb -- mysql -uroot -p"$PW" -e "DELETE FROM kudo.notes WHERE id=2; SELECT * FROM kudo.notes" >/dev/null
rn_eq "row 2 deleted (seen on node 3)" "" "$(sql "$POD-3" "SELECT note FROM kudo.notes WHERE id=2")"
old=$(rn_plan_uid "$INSTANCE" restore)
show "$KUDO" update --instance "$INSTANCE" -n "$RN_NS" -p RESTORE_FROM="$FILE" >/dev/null
rn_plan_run_complete "$INSTANCE" restore "$old" 300
show kubectl -n "$RN_NS" logs "job/$INSTANCE-restore" >/dev/null
show kubectl -n "$RN_NS" exec "$POD-4" -c mariadb -- mysql -uroot -p"$PW" -e "SELECT * FROM kudo.notes" >/dev/null
for i in 0 1 2 3 4; do
  rn_eq "row 2 back on $POD-$i" "kept by the backup" "$(sql "$POD-$i" "SELECT note FROM kudo.notes WHERE id=2")"
done
want=$(sql "$POD-0" "SELECT COUNT(*) FROM mysql.global_priv")
for i in 1 2 3 4; do
  rn_eq "grant tables on $POD-$i as on $POD-0 (accounts)" "$want" "$(sql "$POD-$i" "SELECT COUNT(*) FROM mysql.global_priv")"
done

# --- a restarted node rejoins (its grant tables and data are intact).
show kubectl -n "$RN_NS" delete pod "$POD-2" >/dev/null
rn_until 180 "$POD-2 Ready again" kubectl -n "$RN_NS" wait --for=condition=Ready "pod/$POD-2" --timeout=5s
rn_until 120 "wsrep_cluster_size 5 after the restart" cluster_size 5
rn_eq "row 2 on the restarted $POD-2" "kept by the backup" "$(sql "$POD-2" "SELECT note FROM kudo.notes WHERE id=2")"
show_size "$POD-2"

# --- uninstall: the cleanup plan (BACKUP_ON_DELETE false: it removes the backup and restore Jobs and
# the backup volume) finishes and the instance goes.
show "$KUDO" uninstall --instance "$INSTANCE" -n "$RN_NS" >/dev/null
rn_until 180 "instance $INSTANCE gone after uninstall (cleanup plan done)" \
  bash -c "! kubectl -n $RN_NS get instance $INSTANCE >/dev/null 2>&1"
rn_until 120 "backup volume claim gone" bash -c "! kubectl -n $RN_NS get pvc $INSTANCE-backups >/dev/null 2>&1"
