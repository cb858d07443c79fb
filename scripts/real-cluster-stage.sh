#!/usr/bin/env bash
# The real-cluster stage of CI, run by .ci/run after `cargo test --workspace`; also
# runnable alone from anywhere: `bash scripts/real-cluster-stage.sh`.
#
# Starts the real Kubernetes control plane of ../shared/real-cluster (state in
# target/real-cluster, FRESH=1), installs the kudo CRDs, runs ONE cluster-wide manager out of
# cluster (log: target/real-cluster/manager.log, printed on failure), then runs
#   (a) every example's kuttl suite with `kubectl-kudo test --kubeconfig …`, and
#   (b) `cargo test --workspace -- --ignored real_cluster_`: every test named real_cluster_* that is
#       #[ignore]d for this stage; they find the cluster through $KUDO_REAL_CLUSTER_KUBECONFIG and
#       rely on this manager, except those that start managers of their own in namespaces this
#       manager ignores: the rollout tests' sharded managers in rollout-shards-*, and the
#       OperatorSource tests' --require-verified-sources managers in the namespaces starting with
#       $KUDO_REAL_CLUSTER_VERIFIED_NAMESPACE (one each).
# The manager and the cluster are stopped at the end, also on failure. Prints the stage's time.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SHARED="${KUDO_SHARED:-$ROOT/../shared}"
KIT="$SHARED/real-cluster"
export REAL_CLUSTER_DIR="$ROOT/target/real-cluster"
MANAGER_LOG="$REAL_CLUSTER_DIR/manager.log"
started=$(date +%s)
step() { echo "--- [real-cluster stage $(( $(date +%s) - started ))s] $*"; }

manager_pid=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n "$manager_pid" ]] && kill -0 "$manager_pid" 2>/dev/null; then
    kill -TERM "$manager_pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$manager_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$manager_pid" 2>/dev/null || true
    wait "$manager_pid" 2>/dev/null || true
  fi
  if [[ $rc -ne 0 && -f "$MANAGER_LOG" ]]; then
    echo "--- manager log (last 200 lines of $MANAGER_LOG):"
    tail -n 200 "$MANAGER_LOG" || true
  fi
  bash "$KIT/stop.sh" >/dev/null 2>&1 || bash "$KIT/stop.sh" || true
  local took=$(( $(date +%s) - started ))
  if [[ $rc -eq 0 ]]; then
    echo "=== real-cluster stage passed in ${took}s"
  else
    echo "=== real-cluster stage FAILED (exit $rc) after ${took}s"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[[ -x "$KIT/start.sh" || -f "$KIT/start.sh" ]] || { echo "missing $KIT/start.sh (../shared beside the checkout)" >&2; exit 1; }

# The binary and the tests of step (b) as `cargo test --workspace` builds them: after the test stage
# this is a no-op, where `cargo build -p kubectl-kudo` rebuilt with other features (~80 s in CI).
step "build kubectl-kudo (cargo test --workspace --no-run)"
cargo test --quiet --workspace --no-run
KUDO="$ROOT/target/debug/kubectl-kudo"

step "start the real control plane (FRESH=1, $REAL_CLUSTER_DIR)"
mkdir -p "$REAL_CLUSTER_DIR"
kubeconfig_line="$(FRESH=1 bash "$KIT/start.sh" | tail -n1)"
KUBECONFIG_PATH="${kubeconfig_line#export KUBECONFIG=}"
[[ -f "$KUBECONFIG_PATH" ]] || { echo "start.sh printed no kubeconfig: $kubeconfig_line" >&2; exit 1; }
export KUDO_REAL_CLUSTER_KUBECONFIG="$KUBECONFIG_PATH"
# The kubectl start.sh chose (>= 1.30), and this build's plugin for `kubectl kudo`, first on PATH.
export PATH="$ROOT/target/debug:$REAL_CLUSTER_DIR/bin:$PATH"
# Nothing below may fall back to another cluster by accident.
export KUBECONFIG="$KUBECONFIG_PATH"
kubectl version 2>/dev/null | sed -n '2p' || true

step "install the kudo CRDs"
"$KUDO" init --crd-only --kubeconfig "$KUBECONFIG_PATH" --home "$REAL_CLUSTER_DIR/kudo-home"

step "start one cluster-wide manager out of cluster (log: $MANAGER_LOG)"
metrics_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
export KUDO_REAL_CLUSTER_METRICS="127.0.0.1:$metrics_port"
export KUDO_REAL_CLUSTER_MANAGER_LOG="$MANAGER_LOG"
# Tests that run managers of their own work in namespaces this manager leaves to them: the
# rollout tests' sharded managers in rollout-shards-* (crates/kubectl-kudo/tests/cli/rollout_cli.rs),
# and the OperatorSource tests' --require-verified-sources managers, one namespace each, all
# starting with $KUDO_REAL_CLUSTER_VERIFIED_NAMESPACE.
export KUDO_REAL_CLUSTER_VERIFIED_NAMESPACE="kudo-rs-verified-sources"
"$KUDO" manager --kubeconfig "$KUBECONFIG_PATH" --leader-elect=false \
  --ignore-namespace 'rollout-shards-*' --ignore-namespace 'kudo-migrate-*' \
  --ignore-namespace "$KUDO_REAL_CLUSTER_VERIFIED_NAMESPACE*" \
  --metrics-address "127.0.0.1:$metrics_port" >"$MANAGER_LOG" 2>&1 &
manager_pid=$!
for i in $(seq 1 300); do
  if curl -fsS "http://127.0.0.1:$metrics_port/readyz" >/dev/null 2>&1; then break; fi
  kill -0 "$manager_pid" 2>/dev/null || { echo "the manager exited at start" >&2; exit 1; }
  [[ $i -lt 300 ]] || { echo "the manager did not become ready in 30 s" >&2; exit 1; }
  sleep 0.1
done

step "(a) every example's kuttl suite against the real cluster"
for suite in examples/*/kuttl-test.yaml; do
  dir="$(dirname "$suite")"
  step "kuttl: $dir"
  (cd "$dir" && "$KUDO" test --kubeconfig "$KUBECONFIG_PATH")
done

step "(b) cargo test --workspace -- --ignored real_cluster_"
cargo test --workspace -- --ignored real_cluster_

kill -0 "$manager_pid" 2>/dev/null || { echo "the manager died during the stage" >&2; exit 1; }
