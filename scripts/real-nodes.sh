#!/usr/bin/env bash
# Real nodes for kudo-rs's tests: the real-pods mode of ../shared/real-cluster (kube-apiserver,
# kube-controller-manager, kube-scheduler, a kubelet with containerd + runc, kube-proxy, cluster DNS).
#
#   scripts/real-nodes.sh start           # start (or reuse); last line of stdout: export KUBECONFIG=…
#   scripts/real-nodes.sh load ARCHIVE…   # import OCI (or docker-save) image archives into its containerd
#   scripts/real-nodes.sh images          # the images its containerd holds
#   scripts/real-nodes.sh ctr ARGS…       # ctr on its containerd, namespace k8s.io (e.g. tasks kill)
#   scripts/real-nodes.sh digest REF      # the manifest digest of image REF there (nothing when absent)
#   scripts/real-nodes.sh status|stop     # the kit's status.sh / stop.sh for this state directory
#
# State: $KUDO_REAL_NODES_DIR, default <checkout>/target/real-nodes. One real-node cluster per machine
# (the kit refuses a second one: the bridge, the pod CIDR and /kubepods are machine-wide). Root required.
# Progress goes to stderr. Images the kit has at start: pause, busybox:1.36; the project's own are built
# by scripts/images.sh and loaded with `load`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KIT="${KUDO_SHARED:-$ROOT/../shared}/real-cluster"
export REAL_CLUSTER_DIR="${KUDO_REAL_NODES_DIR:-$ROOT/target/real-nodes}"
export REAL_CLUSTER_NODES=real

usage() { sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# The containerd socket of this state directory (the kit shortens long paths into /run/real-cluster).
ctr_socket() {
  local sock="$REAL_CLUSTER_DIR/node/containerd.sock"
  if ((${#sock} > 90)); then
    sock="/run/real-cluster/$(printf %s "$REAL_CLUSTER_DIR" | sha256sum | cut -c1-16)/containerd.sock"
  fi
  [[ -S "$sock" ]] || { echo "real-nodes: no containerd at $sock: run '$0 start' first" >&2; exit 1; }
  echo "$sock"
}

cmd="${1:-}"; shift || true
case "$cmd" in
  start)
    [[ -f "$KIT/start.sh" ]] || { echo "real-nodes: missing $KIT/start.sh (../shared beside the checkout)" >&2; exit 1; }
    mkdir -p "$REAL_CLUSTER_DIR"
    bash "$KIT/start.sh" "$@"
    ;;
  load)
    [[ $# -gt 0 ]] || usage
    sock="$(ctr_socket)"
    for archive in "$@"; do
      [[ -f "$archive" ]] || { echo "real-nodes: no such image archive: $archive" >&2; exit 1; }
      echo "real-nodes: importing $archive" >&2
      ctr --address "$sock" --namespace k8s.io images import --no-unpack=false "$archive" >&2
    done
    ;;
  images)
    ctr --address "$(ctr_socket)" --namespace k8s.io images list -q
    ;;
  ctr)
    ctr --address "$(ctr_socket)" --namespace k8s.io "$@"
    ;;
  digest)
    [[ $# -eq 1 ]] || usage
    ctr --address "$(ctr_socket)" --namespace k8s.io images list "name==$1" | awk 'NR > 1 { print $3 }'
    ;;
  status) bash "$KIT/status.sh" "$@" ;;
  stop) bash "$KIT/stop.sh" "$@" ;;
  *) usage ;;
esac
