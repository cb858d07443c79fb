#!/usr/bin/env bash
# The real-node stage of CI, run by .ci/run after the real-cluster stage; also runnable
# alone: `bash scripts/real-nodes-stage.sh`.
#
# On ../shared/real-cluster's real-pods mode (kubelet + containerd + runc, kube-scheduler,
# kube-proxy, cluster DNS; state in target/real-nodes, FRESH=1):
#   1. builds the manager image without Docker (scripts/manager-image.sh; twice, the digests must
#      match) and the application images from Debian packages (scripts/images/*.sh, cached in
#      target/images), and imports them into the node's containerd;
#   2. `kubectl kudo init --kudo-image … --replicas 2 --wait`: the manager runs in the cluster under
#      the RBAC init creates (the real RBAC authorizer is the proof it suffices);
#   3. runs every scripts/real-nodes-tests/real_nodes_*.sh against that in-cluster manager
#      (RUN_ONLY=pattern runs a subset), and prints "N passed, N failed".
# Skipped, with the reason printed, only where containers cannot run (not root, no ../shared kit).
# The cluster is stopped at the end, also on failure. Prints the stage's time.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SHARED="${KUDO_SHARED:-$ROOT/../shared}"
export KUDO_REAL_NODES_DIR="${KUDO_REAL_NODES_DIR:-$ROOT/target/real-nodes}"
export RN_LOGS="$ROOT/target/real-nodes-logs"
started=$(date +%s)
step() { echo "--- [real-node stage $(( $(date +%s) - started ))s] $*"; }

if [[ $(id -u) -ne 0 ]]; then
  echo "=== real-node stage SKIPPED: containers need root here (kubelet, containerd, a bridge); this user is $(id -un)"
  exit 0
fi
if [[ ! -f "$SHARED/real-cluster/start.sh" ]]; then
  echo "=== real-node stage SKIPPED: no $SHARED/real-cluster (the kit that runs real pods)"
  exit 0
fi

passed=0 failed=0 failures=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ $rc -ne 0 ]]; then
    echo "--- manager pods and their logs at failure:"
    kubectl -n kudo-system get pods -o wide 2>&1 || true
    kubectl -n kudo-system logs -l app=kudo-manager --all-containers --tail=80 --prefix 2>&1 || true
  fi
  bash scripts/real-nodes.sh stop >/dev/null 2>&1 || bash scripts/real-nodes.sh stop || true
  local took=$(( $(date +%s) - started ))
  if [[ $rc -eq 0 ]]; then
    echo "=== real-node stage passed in ${took}s"
  else
    echo "=== real-node stage FAILED (exit $rc) after ${took}s"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The image is made from the binary the earlier stages built (the test profile): a cold release
# build costs CI ~20 minutes on 2 cores for the same code. Users get the release binary
# (scripts/manager-image.sh's default); KUDO_STAGE_BINARY=target/release/kubectl-kudo checks that one.
step "build kubectl-kudo and the manager image"
export KUDO_BINARY="${KUDO_STAGE_BINARY:-$ROOT/target/debug/kubectl-kudo}"
[[ "$KUDO_BINARY" == */release/* ]] && cargo build --quiet --release --locked -p kubectl-kudo --bin kubectl-kudo
# `cargo test --workspace` (the test stage) built this binary already, with the workspace's test
# features; `cargo build -p kubectl-kudo` would build it again with other features (~80 s in CI).
[[ "$KUDO_BINARY" == */debug/* ]] && cargo test --quiet --workspace --no-run
export KUDO="$KUDO_BINARY"
mkdir -p target/images
manager_image="$(bash scripts/manager-image.sh target/images/manager.tar 2>target/images/manager.log | tail -n1)"
cat target/images/manager.log
first="$(sha256sum target/images/manager.tar | cut -d' ' -f1)"
bash scripts/manager-image.sh target/images/manager-again.tar >/dev/null 2>&1
again="$(sha256sum target/images/manager-again.tar | cut -d' ' -f1)"
rm -f target/images/manager-again.tar
[[ "$first" == "$again" ]] || { echo "manager image is not reproducible: $first vs $again" >&2; exit 1; }
echo "manager image $manager_image, archive sha256 $first (the same when built again)"

# The application images depend only on their scripts and Debian's packages, not on this checkout's
# code: they are cached per machine (like cargo's registry), rebuilt when their inputs change (the
# stamp of scripts/images/lib.sh). A clean clone thus skips ~140 s of downloads and packing.
export IMAGES_DIR="${IMAGES_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kudo-rs/images}"
step "build the application images from Debian packages (cached in $IMAGES_DIR)"
archives=(target/images/manager.tar)
for script in scripts/images/*.sh; do
  [[ "$(basename "$script")" == lib.sh ]] && continue
  archives+=("$(bash "$script" | tail -n1)")
done

step "start the real-node cluster (FRESH=1, $KUDO_REAL_NODES_DIR)"
kubeconfig_line="$(FRESH=1 bash scripts/real-nodes.sh start | tail -n1)"
export KUBECONFIG="${kubeconfig_line#export KUBECONFIG=}"
[[ -f "$KUBECONFIG" ]] || { echo "start printed no kubeconfig: $kubeconfig_line" >&2; exit 1; }
export PATH="$(dirname "$KUDO"):$KUDO_REAL_NODES_DIR/bin:$PATH"
bash scripts/real-nodes.sh load "${archives[@]}"

# --least-privilege: the manager gets no wildcard and applies each Instance as the ServiceAccount
# kudo-instance of its namespace, which every test's namespace grants `admin` (lib.sh rn_begin): the
# operators below run on real pods under least privilege.
step "kubectl kudo init --least-privilege --kudo-image $manager_image --replicas 2 --wait"
"$KUDO" init --least-privilege --kudo-image "$manager_image" --kudo-image-pull-policy IfNotPresent \
  --replicas 2 --wait --wait-timeout 120

# kube-controller-manager's garbage collector learns new kinds at its next discovery sync (every
# 30 s). An object owned by an Instance it cannot map yet is retried with a growing backoff, and was
# seen orphaned for minutes after its Instance went (uninstall right after init: the Pipe artifacts
# of real_nodes_pipe). A user's cluster has long synced; so must this one before the tests: a
# ConfigMap owned by an Instance that does not exist is collected once the kind is known.
step "wait until the garbage collector knows the kudo.dev kinds"
kubectl apply -f - >/dev/null <<'PROBE'
apiVersion: v1
kind: ConfigMap
metadata:
  name: kudo-rs-gc-probe
  namespace: default
  ownerReferences:
    - apiVersion: kudo.dev/v1beta1
      kind: Instance
      name: gc-probe
      uid: 00000000-0000-0000-0000-000000000001
PROBE
for _ in $(seq 180); do
  kubectl -n default get configmap kudo-rs-gc-probe >/dev/null 2>&1 || break
  sleep 1
done
if kubectl -n default get configmap kudo-rs-gc-probe >/dev/null 2>&1; then
  echo "the garbage collector did not collect an orphan owned by an Instance within 180 s" >&2
  exit 1
fi

step "tests: scripts/real-nodes-tests/real_nodes_*.sh"
for t in scripts/real-nodes-tests/real_nodes_*.sh; do
  name="$(basename "$t" .sh)"
  [[ -z "${RUN_ONLY:-}" || "$name" == *${RUN_ONLY}* ]] || continue
  step "$name"
  if bash "$t"; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$name"); fi
done
echo "real_nodes: $passed passed, $failed failed${failures:+ (${failures[*]})}"
[[ $failed -eq 0 ]]
