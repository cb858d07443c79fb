#!/usr/bin/env bash
# A fleet rollout on real pods: two Galera clusters (examples/galera, Instances galera-a and
# galera-b, three real MariaDB nodes each) upgraded to a new OperatorVersion by
# `kubectl kudo rollout start` in two waves (a canary of one, then the rest).
#
#   KUBECONFIG=… [KUDO=…] [KUDO_REAL_NODES_DIR=…] scripts/real-nodes-tests/real_nodes_rollout.sh
#
# Checks: both clusters form (wsrep_cluster_size 3, Synced); a row written in each before the
# rollout; the rollout ends Complete with each Instance Succeeded, revision 1 → 2, on the new
# OperatorVersion and its deploy plan COMPLETE; both clusters are whole again afterwards and every
# node of each reads its row.
set -euo pipefail
# shellcheck source=scripts/real-nodes-tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rn_begin rollout
rn_image busybox.sh mariadb.sh
PW=admin # MYSQL_ROOT_PASSWORD's default (params.yaml)
ROLLOUT="galera-up-$RN_NS"

sql() { kubectl -n "$RN_NS" exec "$1" -c mariadb -- mysql -uroot -p"$PW" -N -B -e "$2"; }
status_value() { sql "$1" "SHOW STATUS LIKE '$2'" | cut -f2; }
# whole INSTANCE: every node of the Instance's three sees three members and is Synced.
whole() {
  local i
  for i in 0 1 2; do
    [[ "$(status_value "$1-galera-$i" wsrep_cluster_size)" == 3 ]] || return 1
    [[ "$(status_value "$1-galera-$i" wsrep_local_state_comment)" == Synced ]] || return 1
  done
}
cleanup_rollout() { kubectl delete "rollouts.kudo-rs.dev/$ROLLOUT" --ignore-not-found >/dev/null 2>&1 || true; }
trap 'cleanup_rollout; rn_cleanup' EXIT

# --- two Galera clusters on version 0.1.0.
"$KUDO" install "$RN_ROOT/examples/galera" --instance galera-a -n "$RN_NS" >/dev/null
"$KUDO" install "$RN_ROOT/examples/galera" --instance galera-b -n "$RN_NS" >/dev/null
for inst in galera-a galera-b; do
  rn_plan_complete "$inst" 900
  rn_until 180 "$inst: wsrep_cluster_size 3, Synced" whole "$inst"
  sql "$inst-galera-0" "CREATE DATABASE kudo; CREATE TABLE kudo.notes (id INT PRIMARY KEY, note VARCHAR(100)); INSERT INTO kudo.notes VALUES (1, 'before the rollout of $inst')"
done

# --- the next version, installed beside the first (the rollout's target).
NEXT=$(mktemp -d)
cp -r "$RN_ROOT/examples/galera" "$NEXT/galera-next"
sed -i 's/^operatorVersion: 0.1.0/operatorVersion: 0.2.0/' "$NEXT/galera-next/operator.yaml"
grep -q '^operatorVersion: 0.2.0' "$NEXT/galera-next/operator.yaml" || rn_fail "examples/galera is not at operatorVersion 0.1.0"
"$KUDO" install "$NEXT/galera-next" --skip-instance -n "$RN_NS" >/dev/null
rm -rf "$NEXT"
OV=galera-10.5.3-0.2.0

# --- the rollout: a canary of one, then the other.
t0=$(date +%s)
"$KUDO" rollout start "$ROLLOUT" --operator-version "$OV" -n "$RN_NS" --canary 1 \
  --min-success-time 5s --wait --wait-time 1200 >&2 || rn_fail "rollout $ROLLOUT did not complete"
rn_log "rollout Complete after $(( $(date +%s) - t0 ))s"
rn_eq "rollout phase" Complete "$(kubectl get "rollouts.kudo-rs.dev/$ROLLOUT" -o jsonpath='{.status.phase}')"
for inst in galera-a galera-b; do
  rn_eq "$inst in the rollout" Succeeded \
    "$(kubectl get "rollouts.kudo-rs.dev/$ROLLOUT" -o jsonpath="{.status.instances[?(@.name==\"$RN_NS/$inst\")].phase}")"
  rn_eq "$inst's OperatorVersion" "$OV" \
    "$(kubectl -n "$RN_NS" get instances.kudo.dev "$inst" -o jsonpath='{.spec.operatorVersion.name}')"
  rn_eq "$inst's deploy plan" COMPLETE \
    "$(kubectl -n "$RN_NS" get instances.kudo.dev "$inst" -o jsonpath='{.status.planStatus.deploy.status}')"
  rn_until 300 "$inst whole after the rollout" whole "$inst"
  for i in 0 1 2; do
    rn_eq "row of $inst on node $i after the rollout" "before the rollout of $inst" \
      "$(sql "$inst-galera-$i" "SELECT note FROM kudo.notes WHERE id=1")"
  done
done
"$KUDO" rollout status "$ROLLOUT" >&2 || true
"$KUDO" rollout history >&2 || true
