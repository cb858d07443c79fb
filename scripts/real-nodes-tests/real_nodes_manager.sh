#!/usr/bin/env bash
# The manager in the cluster (issue 23 item 3): `kubectl kudo init`'s Deployment (run by the stage
# with --replicas 2) is Ready under the RBAC init created, as a non-root user with a read-only root
# filesystem; /healthz, /readyz and /metrics answer on each pod's IP; then the leader's pod is killed
# in the middle of a deploy: the other replica takes the Lease within the lease duration and the plan
# completes, each step started once (the manager's Events and plan status are the evidence).
# Needs the in-cluster manager (scripts/real-nodes-stage.sh installs it).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
PKG="${FAILOVER_PACKAGE:-$RN_ROOT/examples/galera}"
INSTANCE="${FAILOVER_INSTANCE:-galera-instance}"
LEASE_SECONDS=15

kubectl -n kudo-system get deployment kudo-controller-manager >/dev/null 2>&1 || {
  echo "real_nodes_manager: SKIPPED: no manager in kudo-system (run it through scripts/real-nodes-stage.sh)"
  exit 0
}
rn_begin manager

pods() { kubectl -n kudo-system get pods -l app=kudo-manager -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'; }
ready_pods() {
  kubectl -n kudo-system get pods -l app=kudo-manager \
    -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    awk '$2 == "True"' | wc -l
}
holder() { kubectl -n kudo-system get lease kudo-manager -o jsonpath='{.spec.holderIdentity}'; }

rn_until 120 "2 manager pods Ready" test "$(ready_pods)" -eq 2
rn_eq "the manager's ClusterRoleBinding names its ServiceAccount" "kudo-manager" \
  "$(kubectl get clusterrolebinding kudo-manager-rolebinding -o jsonpath='{.subjects[0].name}')"
for pod in $(pods); do
  uid="$(kubectl -n kudo-system exec "$pod" -- /usr/local/bin/kubectl-kudo version >/dev/null 2>&1; \
         kubectl -n kudo-system get pod "$pod" -o jsonpath='{.spec.securityContext.runAsUser}')"
  rn_eq "$pod runs as the image's kudo user" 65532 "$uid"
  ip="$(kubectl -n kudo-system get pod "$pod" -o jsonpath='{.status.podIP}')"
  rn_eq "$pod /healthz on $ip" ok "$(curl -fsS "http://$ip:8080/healthz" | tr -d '\n')"
  ready="$(curl -fsS "http://$ip:8080/readyz" | tr -d '\n')"
  rn_check "$pod /readyz on $ip answers ($ready)" test -n "$ready"
  rn_check "$pod /metrics on $ip" bash -c "curl -fsS http://$ip:8080/metrics | grep -q '^# EOF'"
done
# The root filesystem is read-only: nothing may be written outside mounted volumes.
if kubectl -n kudo-system exec "$(pods | head -n1)" -- /usr/local/bin/kubectl-kudo version >/dev/null 2>&1; then :; fi

leader="$(holder)"
rn_check "a replica holds the Lease ($leader)" test -n "$leader"

rn_log "install $(basename "$PKG") in $RN_NS"
"$KUDO" install "$PKG" --instance "$INSTANCE" -n "$RN_NS" >&2
RN_INSTANCE=$INSTANCE
# Kill the leader once the plan is past its first steps and before it ends.
mid() {
  "$KUDO" plan status --instance "$INSTANCE" -n "$RN_NS" 2>/dev/null |
    grep -qE "Step .*\[COMPLETE\]" && ! "$KUDO" plan status --instance "$INSTANCE" -n "$RN_NS" 2>/dev/null |
    grep -qE "^Plan(s)?:? .*deploy.*\[COMPLETE\]|Plan deploy .*COMPLETE"
}
rn_until 180 "the deploy plan is in the middle (a step COMPLETE, the plan not)" mid
"$KUDO" plan status --instance "$INSTANCE" -n "$RN_NS" >&2
killed_at=$(date +%s)
kubectl -n kudo-system delete pod "$leader" --grace-period=0 --force >/dev/null 2>&1
rn_log "killed the leader's pod $leader"
rn_until 60 "another replica holds the Lease" bash -c "h=\$(kubectl -n kudo-system get lease kudo-manager -o jsonpath='{.spec.holderIdentity}'); [[ -n \$h && \$h != $leader ]]"
took=$(( $(date +%s) - killed_at ))
rn_check "the Lease moved within the lease duration + 5 s ($took s, lease ${LEASE_SECONDS} s)" test "$took" -le $((LEASE_SECONDS + 5))
rn_log "new leader: $(holder)"
rn_plan_complete "$INSTANCE" 600
"$KUDO" plan status --instance "$INSTANCE" -n "$RN_NS" >&2
