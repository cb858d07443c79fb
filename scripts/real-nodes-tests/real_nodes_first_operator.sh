#!/usr/bin/env bash
# examples/first-operator on real pods: Debian's nginx (image nginx:1.7.9 from
# scripts/images/nginx.sh) serves its page on every pod IP, reached from the host.
#
#   KUBECONFIG=… [KUDO=…] [KUDO_REAL_NODES_DIR=…] scripts/real-nodes-tests/real_nodes_first_operator.sh
#
# Checks: install reaches deploy COMPLETE; each of the 2 pods (REPLICAS default) answers HTTP on
# <pod IP>:80 with "Welcome to nginx!" and logs the request on stdout; `update -p REPLICAS=3` gives
# 3 serving pods.
set -euo pipefail
# shellcheck source=scripts/real-nodes-tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rn_begin first-operator
rn_image nginx.sh
INSTANCE=first-operator-instance

pod_ips() {
  kubectl -n "$RN_NS" get pods -l "app=nginx,instance=$INSTANCE" --field-selector=status.phase=Running \
    -o jsonpath='{range .items[*]}{.status.podIP}{"\n"}{end}'
}
serves() { curl -fsS --max-time 5 "http://$1/" | grep -q 'Welcome to nginx!'; }

check_all_serve() {
  local want=$1 ips n=0 ip
  ips=$(pod_ips)
  for ip in $ips; do
    rn_until 30 "nginx page from the host on http://$ip/" serves "$ip"
    n=$((n + 1))
  done
  rn_eq "pods serving HTTP" "$want" "$n"
}

# As the walkthrough does it: install from the operator's directory.
(cd "$RN_ROOT/examples/first-operator" && "$KUDO" install . -n "$RN_NS") >&2
rn_plan_complete "$INSTANCE" 180
rn_until 60 "2 nginx pods Running" bash -c "[[ \$(kubectl -n $RN_NS get pods -l app=nginx,instance=$INSTANCE --field-selector=status.phase=Running -o name | wc -l) == 2 ]]"
check_all_serve 2

pod=$(kubectl -n "$RN_NS" get pods -l "app=nginx,instance=$INSTANCE" -o jsonpath='{.items[0].metadata.name}')
rn_until 10 "access log of $pod on stdout (kubectl logs)" bash -c "kubectl -n $RN_NS logs $pod | grep -q '\"GET / HTTP/1.1\" 200'"
rn_eq "nginx version in the pod" "nginx version: nginx/1.22.1" \
  "$(kubectl -n "$RN_NS" exec "$pod" -- nginx -v 2>&1)"

old=$(rn_plan_uid "$INSTANCE" deploy)
"$KUDO" update --instance "$INSTANCE" -n "$RN_NS" -p REPLICAS=3 >&2
rn_plan_run_complete "$INSTANCE" deploy "$old" 180
rn_until 60 "3 nginx pods Running" bash -c "[[ \$(kubectl -n $RN_NS get pods -l app=nginx,instance=$INSTANCE --field-selector=status.phase=Running -o name | wc -l) == 3 ]]"
check_all_serve 3
