#!/usr/bin/env bash
# Template rendering speed: kudo-template vs the Go oracle (text/template + Sprig), same template
# (the Galera ConfigMap of the oracle's bench.sh), same data, same function set (--profile kudo).
#
#   scripts/bench-template.sh [N]      (default N = 10000 renders)
#
# Measures, and prints the ratio oracle/ours for:
#   1. engine only, in-process: oracle --repeat N (parse + execute each time, as KUDO v0.19 does) vs
#      our bench (a) parse once + execute N times (as kudo-rs does) and (b) parse + execute each time;
#   2. batch mode, one process, --jobs 1, N cases with per-case NAME.json (file I/O included):
#      oracle --batch vs kubectl-kudo template render --batch.
# Builds release binaries into $CARGO_TARGET_DIR (default target/). Oracle: $GOTMPL_ORACLE, else
# ../shared/go-template-oracle/bin/gotmpl-oracle next to the repository.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ORACLE="${GOTMPL_ORACLE:-$ROOT/../shared/go-template-oracle/bin/gotmpl-oracle}"
N="${1:-10000}"
CORPUS="$ROOT/crates/kudo-template/tests/corpus/oracle"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
unset TZ

[[ -x "$ORACLE" ]] || { echo "bench-template: oracle not found at $ORACLE (set GOTMPL_ORACLE)" >&2; exit 2; }

cd "$ROOT"
echo "building (release)..." >&2
cargo build --quiet --release -p kubectl-kudo
cargo bench --quiet -p kudo-template --bench render --no-run 2>/dev/null

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# 1. Engine only.
ours="$(cargo bench --quiet -p kudo-template --bench render -- "$N" 2>&1)"
ours_a="$(sed -n 's/^parse once + execute: .*  \([0-9.]*\) us\/render$/\1/p' <<<"$ours")"
ours_b="$(sed -n 's/^parse + execute each: .*  \([0-9.]*\) us\/render$/\1/p' <<<"$ours")"
[[ -n "$ours_a" && -n "$ours_b" ]] || { echo "bench-template: our bench failed:" >&2; echo "$ours" >&2; exit 1; }
oracle_line="$("$ORACLE" --profile kudo --repeat "$N" "$CORPUS/galera-firstboot.tmpl" "$CORPUS/data.json" 2>&1 >/dev/null)"
oracle_us="$(sed -n 's/.*, \([0-9.]*\) us\/render$/\1/p' <<<"$oracle_line")"

# 2. Batch mode over N per-case files (same generator as the oracle's bench.sh).
mkdir -p "$work/oracle" "$work/ours"
for ((i = 0; i < N; i++)); do
  printf -v name 'c%05d' "$i"
  step=firstboot_config; ((i % 2)) && step=deploy
  cp "$CORPUS/galera-firstboot.tmpl" "$work/oracle/$name.tmpl"
  printf '{"Name":"galera-%d","OperatorName":"galera","Namespace":"default","StepName":"%s","Params":{"NODE_COUNT":"%d","SST_USER":"root","SST_PASSWORD":"admin"}}\n' \
    "$i" "$step" $((i % 9 + 1)) > "$work/oracle/$name.json"
done
cp "$work/oracle/"* "$work/ours/"
ns() { date +%s%N; }
s=$(ns); "$ORACLE" --profile kudo --quiet --jobs 1 --batch "$work/oracle"; e=$(ns); oracle_batch=$(( (e - s) / N ))
s=$(ns); "$TARGET/release/kubectl-kudo" template render --quiet --batch "$work/ours"; e=$(ns); ours_batch=$(( (e - s) / N ))
if ! diff -rq "$work/oracle" "$work/ours" >/dev/null; then
  echo "bench-template: batch outputs differ from the oracle's:" >&2
  diff -rq "$work/oracle" "$work/ours" | head -5 >&2
  exit 1
fi

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1fx", a / b }'; }
echo
echo "$(nproc) CPUs, $(uname -m), $("$ORACLE" --version | head -1 | tr '\n' ' ')vs kudo-template (release), N=$N"
printf '%-52s %12s %12s %8s\n' "measure" "oracle us" "ours us" "ratio"
printf '%-52s %12s %12s %8s\n' "engine: oracle parse+exec vs ours parse once+exec" "$oracle_us" "$ours_a" "$(ratio "$oracle_us" "$ours_a")"
printf '%-52s %12s %12s %8s\n' "engine: parse+exec each time (both)" "$oracle_us" "$ours_b" "$(ratio "$oracle_us" "$ours_b")"
printf '%-52s %12s %12s %8s\n' "batch --jobs 1, per-case data.json (incl. file I/O)" \
  "$(awk -v n="$oracle_batch" 'BEGIN{printf "%.1f", n/1000}')" "$(awk -v n="$ours_batch" 'BEGIN{printf "%.1f", n/1000}')" \
  "$(ratio "$oracle_batch" "$ours_batch")"
