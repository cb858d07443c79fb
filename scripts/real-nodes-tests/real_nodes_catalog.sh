#!/usr/bin/env bash
# The KUDO community catalog on real pods: zookeeper and redis, from ../shared/community-operators
# unchanged, reach `deploy` COMPLETE with only their required parameters (as crates/kubectl-kudo/tests/cli/catalog.rs
# installs them) — plus zookeeper's IMAGE_PULL_POLICY=IfNotPresent, see below — and the software really works:
#   zookeeper  each of the 3 servers answers `ruok` (imok) and `srvr`; exactly one is the leader, the others
#              followers; a znode created through one server with zkCli.sh is read back through another; the
#              deploy plan's own validation Job (zkCli.sh against the ensemble) ran on the way to COMPLETE
#   redis      the init Job (`redis-cli --cluster create` over the pod IPs nslookup found) succeeded; every one
#              of the 6 pods reports cluster_state:ok with 6 known nodes and 3 masters; a key written through
#              one pod (redis-cli -c follows the cluster's redirection) is read through another
# Images: scripts/images/zookeeper.sh and redis.sh (docker.io/library/zookeeper:3.6.2 and redis:5.0.1-alpine
# from Debian's ZooKeeper 3.8 and Redis 7.0), built and loaded here when the node does not have them.
#
# zookeeper's IMAGE_PULL_POLICY defaults to `Always`: the kubelet then pulls on every start, which fails where
# no registry is reachable (here, or any air-gapped cluster) even with the image on the node, so the test sets
# it to IfNotPresent (a parameter the package offers for this). Its pods run as uid 1000 on hostPath volumes,
# which ignore fsGroup: rn_writable_volumes makes their directories writable, as a provisioner would.
#
# Wall time on the 2-core VM (own manager, images cached): 58 s; +~40 s when the previous run's namespace is
# still being deleted; +~70 s when the images are built (zookeeper ~40 s, redis ~30 s).
#
#   KUBECONFIG=… KUDO=…/kubectl-kudo bash scripts/real-nodes-tests/real_nodes_catalog.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
CATALOG="${KUDO_CATALOG:-$RN_ROOT/../shared/community-operators}"
WAIT="${CATALOG_WAIT:-600}"

rn_load_image docker.io/library/zookeeper:3.6.2 "$RN_ROOT/scripts/images/zookeeper.sh"
rn_load_image docker.io/library/redis:5.0.1-alpine "$RN_ROOT/scripts/images/redis.sh"

rn_begin catalog
rn_writable_volumes

rn_log "install zookeeper and redis from $CATALOG"
"$KUDO" install "$CATALOG/zookeeper/operator" --instance zk -n "$RN_NS" -p IMAGE_PULL_POLICY=IfNotPresent >&2
"$KUDO" install "$CATALOG/redis/operator" --instance redis -n "$RN_NS" >&2
rn_plan_complete zk "$WAIT"
rn_plan_complete redis "$WAIT"

# --- zookeeper
# Four-letter words are sent without a newline: ZooKeeper reads four bytes, answers and closes; an unread
# newline makes the kernel reset the connection, and a client may lose the answer (the package's probe,
# `echo ruok | nc`, fails now and then for this reason; its retries absorb it).
fourlw() { rn_exec "$1" -- bash -c "printf $2 | nc -w 5 127.0.0.1 2181"; }
zk_pods=(zk-zookeeper-0 zk-zookeeper-1 zk-zookeeper-2)
for pod in "${zk_pods[@]}"; do
  rn_eq "$pod answers ruok" imok "$(fourlw "$pod" ruok)"
done
rn_log "zookeeper probe failures (Unhealthy events; some are expected while the JVMs start): $(kubectl -n "$RN_NS" get events --field-selector reason=Unhealthy -o name | wc -l)"
# deploy COMPLETE means every server is Ready (ruok answers imok), not that each has joined the quorum yet:
# a server still syncing with the leader answers srvr with "not currently serving requests".
modes() { for pod in "${zk_pods[@]}"; do fourlw "$pod" srvr | sed -n 's/^Mode: //p'; done | sort | paste -sd' '; }
ensemble() { [[ "$(modes)" == "follower follower leader" ]]; }
rn_until 90 "zookeeper ensemble: one leader, two followers" ensemble
rn_log "modes: $(modes)"
rn_eq "zkServer.sh status agrees" 3 "$(for p in "${zk_pods[@]}"; do rn_exec "$p" -- zkServer.sh status 2>/dev/null; done | grep -cE '^Mode: (leader|follower)$')"
rn_exec zk-zookeeper-0 -- bin/zkCli.sh -server localhost:2181 create /kudo-rs "real pods" >&2
rn_eq "a znode written through zk-zookeeper-0 is read through zk-zookeeper-2" "real pods" \
  "$(rn_exec zk-zookeeper-2 -- bin/zkCli.sh -server localhost:2181 get /kudo-rs 2>/dev/null | grep -x 'real pods')"
rn_eq "the validation Job was removed by the plan's cleanup step" "" \
  "$(kubectl -n "$RN_NS" get job zk-validation --ignore-not-found -o name)"

# --- redis
rn_eq "redis init Job succeeded" 1 \
  "$(kubectl -n "$RN_NS" get job deploy-redis-redis-job -o jsonpath='{.status.succeeded}')"
for i in 0 1 2 3 4 5; do
  info="$(rn_exec "redis-redis-$i" -- redis-cli cluster info | tr -d '\r')"
  rn_eq "redis-redis-$i cluster_state" ok "$(sed -n 's/^cluster_state://p' <<<"$info")"
  rn_eq "redis-redis-$i cluster_known_nodes" 6 "$(sed -n 's/^cluster_known_nodes://p' <<<"$info")"
  rn_eq "redis-redis-$i cluster_size (masters serving slots)" 3 "$(sed -n 's/^cluster_size://p' <<<"$info")"
done
rn_eq "redis: 3 masters and 3 replicas" "3 3" \
  "$(rn_exec redis-redis-0 -- redis-cli cluster nodes | awk '/master/{m++} /slave/{s++} END{print m+0, s+0}')"
rn_eq "redis SET through redis-redis-0" OK "$(rn_exec redis-redis-0 -- redis-cli -c set kudo-rs real-pods | tr -d '\r')"
rn_eq "redis GET through redis-redis-5" real-pods "$(rn_exec redis-redis-5 -- redis-cli -c get kudo-rs | tr -d '\r')"

rn_log "uninstall"
"$KUDO" uninstall --instance zk -n "$RN_NS" >&2
"$KUDO" uninstall --instance redis -n "$RN_NS" >&2
# A function, so rn_until asks again at each try (a "$(…)" argument is expanded once, before:
# the StatefulSets the garbage collector removed a moment after the uninstall stayed "there").
no_statefulsets() { test -z "$(kubectl -n "$RN_NS" get statefulsets -o name)"; }
rn_until 120 "the StatefulSets are gone" no_statefulsets
