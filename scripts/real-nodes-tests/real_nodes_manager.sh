#!/usr/bin/env bash
# The manager in the cluster: `kubectl kudo init`'s Deployment (run by the stage
# with --replicas 2) is Ready under the RBAC init created, as a non-root user with a read-only root
# filesystem; /healthz, /readyz and /metrics answer on each pod's IP; then the leader's pod is killed
# in the middle of a deploy: the other replica takes the Lease within the lease duration and the plan
# completes, each step started once (the manager's Events and plan status are the evidence).
# Needs the in-cluster manager (scripts/real-nodes-stage.sh installs it).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
PKG="${FAILOVER_PACKAGE:-$RN_ROOT/examples/galera}"
INSTANCE="${FAILOVER_INSTANCE:-galera-instance}"
LEASE_SECONDS=15
export LC_ALL=C  # sort and join agree on the order

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
# A function, so rn_until asks again at each try (a "$(…)" argument is expanded once, before).
two_ready() { test "$(ready_pods)" -eq 2; }

rn_until 120 "2 manager pods Ready" two_ready
rn_eq "the manager's ClusterRoleBinding names its ServiceAccount" "kudo-manager" \
  "$(kubectl get clusterrolebinding kudo-manager-rolebinding -o jsonpath='{.subjects[0].name}')"
# init --least-privilege (the stage's): the manager itself may not create what a package could abuse;
# it impersonates each Instance's account instead.
manager_sa=system:serviceaccount:kudo-system:kudo-manager
rn_eq "the manager may not create clusterrolebindings" no \
  "$(kubectl auth can-i --as="$manager_sa" create clusterrolebindings 2>/dev/null)"
rn_eq "the manager may not create deployments" no \
  "$(kubectl auth can-i --as="$manager_sa" create deployments.apps -n "$RN_NS" 2>/dev/null)"
rn_eq "the manager may impersonate service accounts" yes \
  "$(kubectl auth can-i --as="$manager_sa" impersonate serviceaccounts -n "$RN_NS" 2>/dev/null)"
rn_eq "no wildcard in the manager's ClusterRole" "" \
  "$(kubectl get clusterrole kudo-manager -o json | grep -F '"*"' || true)"
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
# Kill the leader once the plan is past its first step and before it ends.
status() { "$KUDO" plan status --instance "$INSTANCE" -n "$RN_NS" 2>/dev/null; }
mid() { status | grep -q "Step .*\[COMPLETE\]" && status | grep -q "Plan deploy .*\[IN_PROGRESS\]"; }
rn_until 300 "the deploy plan is in its middle (a step COMPLETE, the plan IN_PROGRESS)" mid
# What exists now, by UID: a step that is re-run from the top would recreate (or re-create the pods of) it.
KINDS=deployments,statefulsets,services,configmaps,secrets,jobs,persistentvolumeclaims
objects() { kubectl -n "$RN_NS" get "$KINDS" -o jsonpath='{range .items[*]}{.kind}/{.metadata.name} {.metadata.uid}{"\n"}{end}' | sort; }
objects >"$RN_LOGS/manager-before.txt"
status >&2
killed_at=$(date +%s)
# A crash, not a shutdown: freeze the leader's container (cgroup freezer: it can neither renew nor
# hand the Lease over, and the kubelet does not restart it under the same identity as it would after
# a SIGKILL), so the other replica must wait for the Lease to expire. Its pod is removed afterwards.
cid="$(kubectl -n kudo-system get pod "$leader" -o jsonpath='{.status.containerStatuses[0].containerID}')"
bash "$RN_ROOT/scripts/real-nodes.sh" ctr tasks pause "${cid#containerd://}"
rn_log "froze the leader $leader"
moved() { local h; h="$(holder)"; [[ -n "$h" && "$h" != "$leader" ]]; }
rn_until 60 "another replica holds the Lease" moved
took=$(( $(date +%s) - killed_at ))
rn_check "the Lease moved within the lease duration + 5 s ($took s, lease ${LEASE_SECONDS} s)" test "$took" -le $((LEASE_SECONDS + 5))
rn_log "new leader: $(holder)"
kubectl -n kudo-system delete pod "$leader" --grace-period=0 --force >/dev/null 2>&1
rn_check "the new leader took an expired Lease (not a released one)" bash -c \
  "kubectl -n kudo-system logs $(holder) | grep -q 'the lease expired: trying to take over'"
rn_plan_complete "$INSTANCE" 900
status >&2
objects >"$RN_LOGS/manager-after.txt"
recreated="$(join "$RN_LOGS/manager-before.txt" "$RN_LOGS/manager-after.txt" | awk '$2 != $3 {print $1}')"
rn_eq "objects applied before the failover are the same objects after it (none recreated)" "" "$recreated"
rn_log "objects kept across the failover: $(join "$RN_LOGS/manager-before.txt" "$RN_LOGS/manager-after.txt" | wc -l)"
started="$(kubectl -n "$RN_NS" get events --field-selector "involvedObject.name=$INSTANCE,reason=PlanStarted" \
  -o jsonpath='{range .items[*]}{.count}{"\n"}{end}' | awk '{n += ($1 == "" ? 1 : $1)} END {print n + 0}')"
rn_eq "the deploy plan started once (PlanStarted Events), so the new leader continued it" 1 "$started"
for job in $(kubectl -n "$RN_NS" get jobs -o jsonpath='{.items[*].metadata.name}'); do
  rn_eq "job $job ran one pod (its step ran once)" 1 "$(kubectl -n "$RN_NS" get pods -l "job-name=$job" -o name | wc -l)"
done
