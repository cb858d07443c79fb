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
#      oracle --batch vs kubectl-kudo template render --batch, as wall time and as user CPU (the
#      like-for-like figure: parse + execute of every case in both).
#   3. the differential corpus (less key generation/derivation cases) copied $COPIES (default 7)
#      times, as one batch, user CPU.
# OURS=bench uses kudo-template's `batch` bench binary (the CLI's batch loop) instead of the CLI.
# The default, the CLI binary itself, is the figure of record (docs/benchmarks.md).
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
cargo bench --quiet -p kudo-template --bench render --no-run 2>/dev/null
# Our batch renderer: the CLI's `template render --batch`, or with OURS=bench the same loop in
# kudo-template's `batch` bench binary (no Kubernetes dependencies to build in release).
if [[ "${OURS:-cli}" == bench ]]; then
  batch_bin="$(cargo bench -p kudo-template --bench batch --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))$/\1/p' | tail -1)"
  [[ "$batch_bin" == /* ]] || batch_bin="$ROOT/$batch_bin"
  ours_batch_cmd=("$batch_bin")
else
  cargo build --quiet --release -p kubectl-kudo
  ours_batch_cmd=("$TARGET/release/kubectl-kudo" template render --quiet --batch)
fi

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
# User CPU of the whole batch process (bash's `time`, TIMEFORMAT %U), the like-for-like figure:
# wall time on a shared machine mostly measures the neighbours.
user_cpu() { local TIMEFORMAT=%U; { time "$@" >/dev/null 2>&1; } 2>&1; }
s=$(ns); oracle_user="$(user_cpu "$ORACLE" --profile kudo --quiet --jobs 1 --batch "$work/oracle")"; e=$(ns); oracle_batch=$(( (e - s) / N ))
s=$(ns); ours_user="$(user_cpu "${ours_batch_cmd[@]}" "$work/ours")"; e=$(ns); ours_batch=$(( (e - s) / N ))
if ! diff -rq "$work/oracle" "$work/ours" >/dev/null; then
  echo "bench-template: batch outputs differ from the oracle's:" >&2
  diff -rq "$work/oracle" "$work/ours" | head -5 >&2
  exit 1
fi

# 3. The whole differential corpus (every category, ~820 cases) copied $COPIES times into one batch
#    directory, each case with its own data file: parse + execute of many different templates.
COPIES="${COPIES:-7}"
mkdir -p "$work/corpus-oracle"
for dir in "$ROOT"/crates/kudo-template/tests/corpus/*/; do
  cat="$(basename "$dir")"
  shared=""
  for ext in json yaml yml; do [[ -f "$dir/data.$ext" ]] && { shared="$dir/data.$ext"; break; }; done
  for tmpl in "$dir"*.tmpl; do
    name="$(basename "$tmpl" .tmpl)"
    data=""
    for ext in json yaml yml; do [[ -f "$dir$name.$ext" ]] && { data="$dir$name.$ext"; break; }; done
    data="${data:-$shared}"
    for ((k = 0; k < COPIES; k++)); do
      cp "$tmpl" "$work/corpus-oracle/$cat-$name-$k.tmpl"
      [[ -n "$data" ]] && cp "$data" "$work/corpus-oracle/$cat-$name-$k.${data##*.}"
    done
  done
done
# Key generation and key derivation (RSA/ECDSA keys, certificates, scrypt, bcrypt, AES) spend
# their time in the crypto libraries, not in the template engine: left out (they dominate
# otherwise; see docs/benchmarks.md).
for f in $(grep -lE 'genPrivateKey|genCA|genSelfSignedCert|genSignedCert|buildCustomCert|derivePassword|bcrypt|htpasswd|encryptAES|decryptAES' "$work/corpus-oracle"/*.tmpl); do
  rm -f "${f%.tmpl}".*
done
cp -r "$work/corpus-oracle" "$work/corpus-ours"
ncorpus="$(ls "$work/corpus-oracle" | grep -c '\.tmpl$')"
corpus_oracle_user="$(user_cpu "$ORACLE" --profile kudo --quiet --jobs 1 --batch "$work/corpus-oracle")"
corpus_ours_user="$(user_cpu "${ours_batch_cmd[@]}" "$work/corpus-ours")"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1fx", a / b }'; }
echo
echo "$(nproc) CPUs, $(uname -m), $("$ORACLE" --version | head -1 | tr '\n' ' ')vs kudo-template (release), N=$N"
printf '%-52s %12s %12s %8s\n' "measure" "oracle us" "ours us" "ratio"
printf '%-52s %12s %12s %8s\n' "engine: oracle parse+exec vs ours parse once+exec" "$oracle_us" "$ours_a" "$(ratio "$oracle_us" "$ours_a")"
printf '%-52s %12s %12s %8s\n' "engine: parse+exec each time (both)" "$oracle_us" "$ours_b" "$(ratio "$oracle_us" "$ours_b")"
printf '%-52s %12s %12s %8s\n' "batch --jobs 1, per-case data.json (incl. file I/O)" \
  "$(awk -v n="$oracle_batch" 'BEGIN{printf "%.1f", n/1000}')" "$(awk -v n="$ours_batch" 'BEGIN{printf "%.1f", n/1000}')" \
  "$(ratio "$oracle_batch" "$ours_batch")"
us_per() { awk -v s="$1" -v n="$N" 'BEGIN{printf "%.1f", s * 1e6 / n}'; }
printf '%-52s %12s %12s %8s\n' "batch --jobs 1, user CPU per case" \
  "$(us_per "$oracle_user")" "$(us_per "$ours_user")" "$(ratio "$oracle_user" "$ours_user")"
printf '%-52s %12s %12s %8s\n' "corpus batch ($ncorpus cases), user CPU per case" \
  "$(awk -v s="$corpus_oracle_user" -v n="$ncorpus" 'BEGIN{printf "%.1f", s*1e6/n}')" \
  "$(awk -v s="$corpus_ours_user" -v n="$ncorpus" 'BEGIN{printf "%.1f", s*1e6/n}')" \
  "$(ratio "$corpus_oracle_user" "$corpus_ours_user")"
