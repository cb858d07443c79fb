#!/usr/bin/env bash
# The fault stage of CI, run by .ci/run after the real-node stage; also runnable alone:
# `bash scripts/faults-stage.sh` (FAULTS=N kills, 300 by default; FAULTS_SEED=S, 54 by default).
#
# Starts a real control plane of its own from ../shared/real-cluster (state in
# target/faults-cluster, FRESH=1, one fake node), installs the kudo CRDs, then runs the ignored
# tests named faults_* of crates/kubectl-kudo/tests/cli/faults/: managers out of cluster
# (target/debug/kubectl-kudo manager) killed at named fail points and random delays over every plan
# shape, uninstalls with a cleanup plan killed while they delete (FAULTS_UNINSTALLS=N Instances,
# 12 by default), an API outage and an API server restart mid-plan, and watches expired (410
# Gone after an etcd compaction) while the manager was stopped; the tests take turns.
# The fault tables they print go to target/faults-cluster/faults.log as well. The cluster is stopped at the end, also on failure;
# the stage fails when it takes longer than FAULTS_TIME_LIMIT seconds (720 by default).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SHARED="${KUDO_SHARED:-$ROOT/../shared}"
KIT="$SHARED/real-cluster"
export REAL_CLUSTER_DIR="$ROOT/target/faults-cluster"
LIMIT="${FAULTS_TIME_LIMIT:-720}"
started=$(date +%s)
step() { echo "--- [faults stage $(( $(date +%s) - started ))s] $*"; }

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  bash "$KIT/stop.sh" >/dev/null 2>&1 || bash "$KIT/stop.sh" || true
  local took=$(( $(date +%s) - started ))
  if [[ $rc -eq 0 ]]; then echo "=== faults stage passed in ${took}s"; else echo "=== faults stage FAILED (exit $rc) after ${took}s"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[[ -f "$KIT/start.sh" ]] || { echo "missing $KIT/start.sh (../shared beside the checkout)" >&2; exit 1; }

step "build kubectl-kudo and the CLI tests (a no-op after cargo test --workspace)"
cargo test --quiet -p kubectl-kudo --test cli --no-run

step "start the real control plane (FRESH=1, $REAL_CLUSTER_DIR)"
mkdir -p "$REAL_CLUSTER_DIR"
kubeconfig_line="$(FRESH=1 REAL_CLUSTER_NODES=1 bash "$KIT/start.sh" | tail -n1)"
KUBECONFIG_PATH="${kubeconfig_line#export KUBECONFIG=}"
[[ -f "$KUBECONFIG_PATH" ]] || { echo "start.sh printed no kubeconfig: $kubeconfig_line" >&2; exit 1; }
export KUDO_FAULTS_KUBECONFIG="$KUBECONFIG_PATH" KUBECONFIG="$KUBECONFIG_PATH"
export KUDO_FAULTS_CLUSTER_DIR="$REAL_CLUSTER_DIR" KUDO_FAULTS_KIT="$KIT"

step "install the kudo CRDs"
"$ROOT/target/debug/kubectl-kudo" init --crd-only --kubeconfig "$KUBECONFIG_PATH" --home "$REAL_CLUSTER_DIR/kudo-home"

step "faults_* tests (FAULTS=${FAULTS:-300}, FAULTS_UNINSTALLS=${FAULTS_UNINSTALLS:-12}, FAULTS_SEED=${FAULTS_SEED:-54}, limit ${LIMIT}s)"
timeout "$LIMIT" cargo test -p kubectl-kudo --test cli -- --ignored faults_ --nocapture 2>&1 \
  | tee "$REAL_CLUSTER_DIR/faults.log"
