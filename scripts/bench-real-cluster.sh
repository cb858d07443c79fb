#!/usr/bin/env bash
# Scale bench on the real control plane: N first-operator Instances created at once
# against ../shared/real-cluster (kube-apiserver + kube-controller-manager v1.28.7, etcd, the fake
# kubelet), one kubectl-kudo manager out of cluster. Prints the time until all are COMPLETE, the
# manager's CPU, peak RSS and reconciles, kube-apiserver's CPU over the same window, the manager's requests by
# verb (its `kudo_api_requests_total`) and the API server's 429 answers (`apiserver_request_total`).
#
#   bash scripts/bench-real-cluster.sh [N]          # N defaults to 1000
#
# Environment: KUDO (the binary; default target/release/kubectl-kudo, else target/debug), CONCURRENCY
# (the manager's --concurrency, default 4), MANAGER_ARGS (more manager flags, split on spaces, e.g.
# "--worker-threads 2"), REPLICAS and SHARDS (default 1 and 1: one manager without leader election;
# otherwise REPLICAS managers share SHARDS shard Leases in the bench namespace, and the CPU, RSS and
# requests are printed per replica and summed), KUDO_SHARED (default ../shared), BENCH_DIR (the cluster's
# state, default target/bench-real-cluster; started FRESH and stopped at the end). The figures go to
# docs/benchmarks.md ("Scale on the real control plane").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
N="${1:-1000}"
SHARED="${KUDO_SHARED:-$ROOT/../shared}"
export REAL_CLUSTER_DIR="${BENCH_DIR:-$ROOT/target/bench-real-cluster}"
KUDO="${KUDO:-}"
if [[ -z "$KUDO" ]]; then
  KUDO="$ROOT/target/release/kubectl-kudo"
  [[ -x "$KUDO" ]] || KUDO="$ROOT/target/debug/kubectl-kudo"
fi
[[ -x "$KUDO" ]] || { echo "no kubectl-kudo binary: cargo build --release -p kubectl-kudo" >&2; exit 1; }
[[ "$N" =~ ^[1-9][0-9]*$ ]] || { echo "N must be a positive integer, got '$N'" >&2; exit 2; }
NS=bench
REPLICAS="${REPLICAS:-1}" SHARDS="${SHARDS:-1}"
[[ "$REPLICAS" =~ ^[1-9][0-9]*$ && "$SHARDS" =~ ^[1-9][0-9]*$ ]] || { echo "REPLICAS and SHARDS must be positive integers" >&2; exit 2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORTS=() MANAGER_PIDS=()
cleanup() {
  for pid in "${MANAGER_PIDS[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
  "$SHARED/real-cluster/stop.sh" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# /proc/PID/stat fields 14 and 15 (utime, stime) in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz="$(getconf CLK_TCK)"
# One file per replica: its requests by verb and its reconciles.
requests() {
  local r
  for r in "${!PORTS[@]}"; do
    curl -fsS "http://127.0.0.1:${PORTS[$r]}/metrics" | awk '/^kudo_api_requests_total|^kudo_reconciles_total/ {print}' \
      >"$1.$r"
  done
}
manager_ticks() { local pid; for pid in "${MANAGER_PIDS[@]}"; do printf '%s ' "$(cpu_ticks "$pid")"; done; }
throttled() {
  kubectl get --raw /metrics | awk '/^apiserver_request_total\{/ && /code="429"/ {n += $NF} END {print n + 0}'
}

mkdir -p "$REAL_CLUSTER_DIR"
echo "--- starting the real control plane in $REAL_CLUSTER_DIR" >&2
eval "$(FRESH=1 "$SHARED/real-cluster/start.sh")"
apiserver="$(cat "$REAL_CLUSTER_DIR/run/kube-apiserver.pid")"
"$KUDO" init --crd-only >&2
kubectl create namespace "$NS" >/dev/null
"$KUDO" install examples/first-operator --skip-instance -n "$NS" >&2
ov="$(kubectl -n "$NS" get operatorversions -o jsonpath='{.items[0].metadata.name}')"

if (( REPLICAS == 1 && SHARDS == 1 )); then
  placement=(--leader-elect=false)
else
  placement=(--shards "$SHARDS" --lease-namespace "$NS")
fi
for r in $(seq 0 $(( REPLICAS - 1 ))); do
  PORTS[$r]="$(free_port)"
  RUST_LOG=warn "$KUDO" manager "${placement[@]}" --metrics-address "127.0.0.1:${PORTS[$r]}" \
    --concurrency "${CONCURRENCY:-4}" ${MANAGER_ARGS:-} >"$REAL_CLUSTER_DIR/bench-manager-$r.log" 2>&1 &
  MANAGER_PIDS[$r]=$!
done
for r in "${!PORTS[@]}"; do
  until curl -fsS "http://127.0.0.1:${PORTS[$r]}/readyz" >/dev/null 2>&1; do
    kill -0 "${MANAGER_PIDS[$r]}" || { cat "$REAL_CLUSTER_DIR/bench-manager-$r.log" >&2; exit 1; }
    sleep 0.2
  done
done
sleep 1  # the managers' watches have listed the (empty) namespace
if (( REPLICAS > 1 || SHARDS > 1 )); then
  # Every shard Lease (`<lease>-shard-<n>`) held, none by a replica above its fair share, before
  # the Instances arrive.
  fair=$(( (SHARDS + REPLICAS - 1) / REPLICAS ))
  for _ in $(seq 1 300); do
    settled="$(kubectl -n "$NS" get leases -o jsonpath='{range .items[*]}{.metadata.name} {.spec.holderIdentity}{"\n"}{end}' |
      awk -v shards="$SHARDS" -v fair="$fair" '$1 ~ /-shard-[0-9]+$/ && NF == 2 {held++; by[$2]++}
        END {ok = held == shards; for (h in by) if (by[h] > fair) ok = 0; print ok}')"
    (( settled == 1 )) && break
    sleep 0.2
  done
  (( settled == 1 )) || echo "warning: the shard Leases did not settle in 60 s" >&2
fi
requests "$REAL_CLUSTER_DIR/requests-before"
throttled_before="$(throttled)"

echo "--- creating $N Instances of $ov at once" >&2
# 25 Instances a file, 8 kubectl processes at once (one kubectl creates its objects one by one).
manifests="$REAL_CLUSTER_DIR/instances"
rm -rf "$manifests" && mkdir -p "$manifests"
for i in $(seq 1 "$N"); do
  printf 'apiVersion: kudo.dev/v1beta1\nkind: Instance\nmetadata:\n  name: s-%05d\n  namespace: %s\nspec:\n  operatorVersion:\n    name: %s\n---\n' \
    "$i" "$NS" "$ov" >>"$manifests/$(printf '%05d' $(( (i - 1) / 25 ))).yaml"
done
m0="$(manager_ticks)" a0="$(cpu_ticks "$apiserver")" t0="$(date +%s.%N)"
find "$manifests" -name '*.yaml' -print0 | xargs -0 -P 8 -n 1 kubectl create -f >/dev/null
created="$(date +%s.%N)"
done_count=0
while :; do
  done_count="$(kubectl -n "$NS" get instances -o jsonpath='{range .items[*]}{.status.planStatus.deploy.status}{"\n"}{end}' | grep -c '^COMPLETE$' || true)"
  (( done_count == N )) && break
  for pid in "${MANAGER_PIDS[@]}"; do kill -0 "$pid" || { echo "a manager exited" >&2; exit 1; }; done
  (( $(date +%s) - ${t0%.*} < 1800 )) || { echo "timeout: $done_count/$N COMPLETE after 1800 s" >&2; exit 1; }
  echo "  $done_count/$N COMPLETE after $(( $(date +%s) - ${t0%.*} )) s" >&2
  sleep 5
done
t1="$(date +%s.%N)" m1="$(manager_ticks)" a1="$(cpu_ticks "$apiserver")"
rss="$(for pid in "${MANAGER_PIDS[@]}"; do awk '/^VmHWM:/ {printf "%.1f ", $2 / 1024}' "/proc/$pid/status"; done)"
requests "$REAL_CLUSTER_DIR/requests-after"
throttled_after="$(throttled)"

python3 - "$N" "$t0" "$created" "$t1" "$m0" "$m1" "$a0" "$a1" "$hz" "$rss" \
  "$REAL_CLUSTER_DIR/requests-before" "$REAL_CLUSTER_DIR/requests-after" \
  "$throttled_before" "$throttled_after" "$KUDO" "$REPLICAS" "$SHARDS" <<'PY'
import re, sys
(n, t0, created, t1, m0, m1, a0, a1, hz, rss, before, after, th0, th1, binary, replicas, shards) = sys.argv[1:]
hz, replicas = float(hz), int(replicas)
def verbs(path):
    out = {}
    for line in open(path):
        m = re.match(r'kudo_api_requests_total\{verb="(\w+)"\} (\S+)', line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out
def reconciles(path):
    return sum(float(m.group(1)) for line in open(path)
               if (m := re.match(r'kudo_reconciles_total\{[^}]*\} (\S+)', line)))
def total(f, prefix):
    parts = [f(f"{prefix}.{r}") for r in range(replicas)]
    if isinstance(parts[0], dict):
        return {v: sum(p.get(v, 0) for p in parts) for v in set().union(*parts)}
    return sum(parts)
cpu = [(float(y) - float(x)) / hz for x, y in zip(m0.split(), m1.split())]
rsss = rss.split()
b, a = total(verbs, before), total(verbs, after)
recs = total(reconciles, after) - total(reconciles, before)
mgr = sum(cpu)
api = (float(a1) - float(a0)) / hz
print(f"bench-real-cluster: {n} first-operator Instances COMPLETE in {float(t1) - float(t0):.1f} s "
      f"(created in {float(created) - float(t0):.1f} s); binary {binary}")
rss = " + ".join(rsss)
if replicas > 1 or shards != "1":
    print(f"  {replicas} managers, --shards {shards}:")
    for r in range(replicas):
        rr = reconciles(f"{after}.{r}") - reconciles(f"{before}.{r}")
        print(f"    replica {r}: {cpu[r]:.1f} CPU-s, peak RSS {rsss[r]} MiB, {int(rr)} reconciles")
print(f"  manager: {mgr:.1f} CPU-s ({1000 * mgr / int(n):.1f} ms per Instance), peak RSS {rss} MiB, "
      f"{int(recs)} reconciles ({recs / int(n):.1f} per Instance)")
print(f"  kube-apiserver: {api:.1f} CPU-s; manager / kube-apiserver CPU = {100 * mgr / api:.1f}%")
reqs = {v: a.get(v, 0) - b.get(v, 0) for v in sorted(set(a) | set(b))}
print("  manager requests: " + ", ".join(f"{v} {int(c)}" for v, c in reqs.items() if c)
      + f" (per Instance: {sum(reqs.values()) / int(n):.1f})")
print(f"  429 answers of the API server during the run: {int(float(th1) - float(th0))}")
PY
