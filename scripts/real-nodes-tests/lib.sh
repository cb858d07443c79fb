# shellcheck shell=bash
# Shared by scripts/real-nodes-tests/real_nodes_*.sh: tests of kudo-rs on real pods.
#
# Each test file is a bash script run by scripts/real-nodes-stage.sh (or alone) with:
#   KUBECONFIG   the real-node cluster (scripts/real-nodes.sh start)
#   KUDO         the kubectl-kudo binary under test (default: <checkout>/target/debug/kubectl-kudo)
# It sources this file, calls `rn_begin NAME` (a namespace rn-NAME of its own, deleted at exit), does its
# checks with `rn_check`/`rn_fail`, and exits 0 only when all passed. `rn_image SCRIPT…` builds images
# with scripts/images/SCRIPT and imports them (KUDO_REAL_NODES_DIR as for scripts/real-nodes.sh).
#
# The manager: when a manager Deployment runs in kudo-system (the stage's `kubectl kudo init`), tests
# rely on it. Otherwise (`RN_MANAGER=own`, or none installed) rn_begin starts a manager of the test's
# own, out of cluster, watching only the test's namespace (log: $RN_LOGS/<name>-manager.log).
set -euo pipefail
RN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
KUDO="${KUDO:-$RN_ROOT/target/debug/kubectl-kudo}"
RN_LOGS="${RN_LOGS:-$RN_ROOT/target/real-nodes-logs}"
: "${KUBECONFIG:?KUBECONFIG must point at the real-node cluster (scripts/real-nodes.sh start)}"
export KUBECONFIG
mkdir -p "$RN_LOGS"
RN_T0=$(date +%s)
RN_NAME=""
RN_NS=""
RN_MANAGER_PID=""
RN_BG_PIDS=()
RN_FAILED=0

rn_log() { echo "[$RN_NAME $(( $(date +%s) - RN_T0 ))s] $*" >&2; }
rn_fail() { rn_log "FAIL: $*"; RN_FAILED=1; exit 1; }
# rn_check DESCRIPTION COMMAND…: runs the command; fails the test with the description when it fails.
rn_check() { local what=$1; shift; if "$@"; then rn_log "ok: $what"; else rn_fail "$what"; fi; }
# rn_eq DESCRIPTION WANT GOT
rn_eq() { if [[ "$2" == "$3" ]]; then rn_log "ok: $1 ($3)"; else rn_fail "$1: want '$2', got '$3'"; fi; }

# rn_until SECONDS DESCRIPTION COMMAND…: polls the command every second until it succeeds. The
# words are expanded once, by the caller: a check that reads the cluster must be a function.
rn_until() {
  local limit=$1 what=$2; shift 2
  local end=$(( $(date +%s) + limit ))
  until "$@" >/dev/null 2>&1; do
    (( $(date +%s) < end )) || { "$@" || true; rn_fail "$what (not within ${limit}s)"; }
    sleep 1
  done
  rn_log "ok: $what"
}

rn_cluster_manager() {
  [[ "${RN_MANAGER:-}" != own ]] &&
    kubectl -n kudo-system get deployment kudo-controller-manager >/dev/null 2>&1
}

rn_cleanup() {
  local rc=$?
  trap - EXIT
  if [[ $rc -ne 0 && -n "$RN_NS" ]]; then
    rn_log "--- state of $RN_NS at failure"
    kubectl -n "$RN_NS" get all,instances,events -o wide 2>&1 | tail -n 80 >&2 || true
    "$KUDO" plan status --instance "${RN_INSTANCE:-x}" -n "$RN_NS" 2>&1 >&2 || true
    [[ -n "$RN_MANAGER_PID" ]] && { echo "--- manager log (last 60 lines)"; tail -n 60 "$RN_LOGS/$RN_NAME-manager.log"; } >&2
  fi
  if [[ -n "$RN_MANAGER_PID" && -n "$RN_NS" && -z "${RN_KEEP:-}" ]]; then
    # Instances of operators with a cleanup plan carry a finalizer that only a manager removes:
    # delete them while the test's own manager still runs, or the namespace stays Terminating.
    kubectl -n "$RN_NS" delete instances.kudo.dev --all --wait=true --timeout=120s >/dev/null 2>&1 ||
      rn_log "Instances of $RN_NS not deleted within 120s"
  fi
  if [[ -n "$RN_MANAGER_PID" ]]; then
    kill "$RN_MANAGER_PID" 2>/dev/null || true
    wait "$RN_MANAGER_PID" 2>/dev/null || true
  fi
  local pid
  for pid in "${RN_BG_PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [[ -n "$RN_NS" && -z "${RN_KEEP:-}" ]]; then
    kubectl delete namespace "$RN_NS" --wait=false >/dev/null 2>&1 || true
  fi
  if [[ $rc -eq 0 ]]; then rn_log "PASS ($(( $(date +%s) - RN_T0 ))s)"; else rn_log "FAILED ($(( $(date +%s) - RN_T0 ))s)"; fi
  exit "$rc"
}

# rn_begin NAME: namespace rn-NAME (recreated empty), a manager, cleanup at exit.
rn_begin() {
  RN_NAME=$1
  RN_NS="rn-$1"
  trap rn_cleanup EXIT
  if kubectl get namespace "$RN_NS" >/dev/null 2>&1; then
    kubectl delete namespace "$RN_NS" --wait=true --timeout=120s >/dev/null
  fi
  kubectl create namespace "$RN_NS" >/dev/null
  rn_until 30 "ServiceAccount default in $RN_NS" kubectl -n "$RN_NS" get serviceaccount default
  # The account a least-privilege manager (`init --least-privilege`, as the stage installs it) applies
  # this namespace's Instances as: `admin` on the namespace and nothing else (docs/security.md).
  kubectl -n "$RN_NS" create serviceaccount kudo-instance >/dev/null
  kubectl -n "$RN_NS" create rolebinding kudo-instance-admin --clusterrole=admin \
    --serviceaccount="$RN_NS:kudo-instance" >/dev/null
  "$KUDO" init --crd-only >/dev/null
  # A CRD just created is served a moment after it is Established (the first install on a fresh cluster
  # got `404 page not found` for its Instance).
  kubectl wait --for condition=Established --timeout=60s \
    crd/operators.kudo.dev crd/operatorversions.kudo.dev crd/instances.kudo.dev >/dev/null
  rn_until 30 "the kudo.dev API is served" kubectl get instances.kudo.dev -n "$RN_NS"
  if rn_cluster_manager; then
    rn_log "using the manager in kudo-system"
  else
    "$KUDO" manager --leader-elect=false --watch-namespace "$RN_NS" \
      --metrics-address 127.0.0.1:0 >"$RN_LOGS/$RN_NAME-manager.log" 2>&1 &
    RN_MANAGER_PID=$!
    rn_log "own manager pid $RN_MANAGER_PID (log $RN_LOGS/$RN_NAME-manager.log)"
  fi
}

# rn_plan_complete INSTANCE SECONDS: waits for the Instance's last plan to be COMPLETE (fails on FATAL_ERROR).
rn_plan_complete() {
  RN_INSTANCE=$1
  "$KUDO" plan status --instance "$1" -n "$RN_NS" --wait --wait-time "$2" >&2 ||
    rn_fail "plan of $1 did not reach COMPLETE within ${2}s"
}

# rn_image SCRIPT…: builds each image with scripts/images/SCRIPT (cached in target/images/) and imports
# it into the real-node cluster's containerd (scripts/real-nodes.sh load: KUDO_REAL_NODES_DIR, default
# <checkout>/target/real-nodes). Build and import output: $RN_LOGS/images.log.
rn_image() {
  local s archive
  for s in "$@"; do
    archive=$(bash "$RN_ROOT/scripts/images/$s" 2>>"$RN_LOGS/images.log") ||
      rn_fail "building image with scripts/images/$s (log: $RN_LOGS/images.log)"
    bash "$RN_ROOT/scripts/real-nodes.sh" load "$archive" >>"$RN_LOGS/images.log" 2>&1 ||
      rn_fail "importing $archive (log: $RN_LOGS/images.log)"
    rn_log "image from scripts/images/$s imported ($(du -h "$archive" | cut -f1))"
  done
}

# rn_plan_uid INSTANCE PLAN: the uid of the plan's last run ("" when it never ran). Take it before
# the command that starts a run, for rn_plan_run_complete.
rn_plan_uid() {
  kubectl -n "$RN_NS" get instances.kudo.dev "$1" -o jsonpath="{.status.planStatus.$2.uid}" 2>/dev/null || true
}

# rn_plan_run_complete INSTANCE PLAN OLD_UID SECONDS: waits for a run of PLAN other than OLD_UID to
# be COMPLETE (fails at once on FATAL_ERROR). Unlike rn_plan_complete it cannot see the previous
# plan's COMPLETE before the manager has started the new one.
rn_plan_run_complete() {
  local inst=$1 plan=$2 old=$3 limit=$4 uid st
  RN_INSTANCE=$inst
  local end=$(( $(date +%s) + limit ))
  while :; do
    uid=$(rn_plan_uid "$inst" "$plan")
    st=$(kubectl -n "$RN_NS" get instances.kudo.dev "$inst" -o jsonpath="{.status.planStatus.$plan.status}" 2>/dev/null || true)
    if [[ -n "$uid" && "$uid" != "$old" ]]; then
      [[ "$st" == COMPLETE ]] && break
      [[ "$st" == FATAL_ERROR ]] && rn_fail "plan $plan of $inst: FATAL_ERROR"
    fi
    (( $(date +%s) < end )) || rn_fail "plan $plan of $inst not COMPLETE within ${limit}s (status '$st')"
    sleep 1
  done
  rn_log "ok: plan $plan of $inst COMPLETE"
  "$KUDO" plan status --instance "$inst" -n "$RN_NS" >&2 || true
}

# rn_load_image REF BUILD_SCRIPT: builds the image with scripts/images/<name>.sh (cached; prints the archive)
# and imports it into the node unless the node holds REF with the same manifest digest already.
# The node's state directory: $KUDO_REAL_NODES_DIR as for scripts/real-nodes.sh.
rn_load_image() {
  local ref=$1 script=$2 archive want have
  archive="$(bash "$script")" || { echo "rn_load_image: $script failed" >&2; exit 1; }
  want="$(tar -xOf "$archive" index.json | python3 -c 'import json,sys; print(json.load(sys.stdin)["manifests"][0]["digest"])')"
  have="$(bash "$RN_ROOT/scripts/real-nodes.sh" digest "$ref")"
  if [[ "$have" != "$want" ]]; then
    echo "[images] loading $ref ($want) from $archive" >&2
    bash "$RN_ROOT/scripts/real-nodes.sh" load "$archive"
  fi
}

# rn_writable_volumes: from now until the test ends, every hostPath PV bound to a claim of the test's namespace
# gets its directory created world-writable (0777) before or right after the kubelet mounts it.
# Why: the kit provisions PVCs as hostPath PVs (type DirectoryOrCreate), which the kubelet creates 0755 and
# owned by root, and a hostPath volume ignores the pod's fsGroup; a package whose pods run as a non-root user
# (zookeeper: runAsUser 1000, fsGroup 1000) could not write its data directory, where a cluster's
# provisioner (fsGroup applied to the volume, or local-path-provisioner's 0777 directories) lets it.
# Needs the test to run on the node as root (the real-node cluster is on this machine).
rn_writable_volumes() {
  local ns=$RN_NS
  (
    while true; do
      kubectl get pv -o jsonpath='{range .items[*]}{.spec.claimRef.namespace}{" "}{.spec.hostPath.path}{"\n"}{end}' \
        2>/dev/null | while read -r pv_ns path; do
        [[ "$pv_ns" == "$ns" && "$path" == /* ]] || continue
        [[ -d "$path" && "$(stat -c %a "$path")" == 777 ]] && continue
        mkdir -p "$path" && chmod 0777 "$path"
      done
      sleep 0.5
    done
  ) >/dev/null 2>&1 &
  RN_BG_PIDS+=("$!")
}

# rn_exec POD [-c CONTAINER] -- COMMAND…: runs a command in a pod of the test's namespace (output on stdout).
rn_exec() { kubectl -n "$RN_NS" exec "$@"; }
