#!/usr/bin/env bash
# Regenerates (or, with --check, verifies) the expected results of the kudo-template differential
# corpus with the Go oracle (real text/template + Sprig, KUDO's function set).
#
#   scripts/regen-template-goldens.sh          write NAME.out / NAME.err next to every NAME.tmpl
#   scripts/regen-template-goldens.sh --check  fail (exit 1) listing every case whose golden differs
#
# The oracle renders a temporary copy of the corpus (templates and data only), so a failed run never
# leaves the checked-in goldens half-written. Oracle binary: $GOTMPL_ORACLE, else
# ../shared/go-template-oracle/bin/gotmpl-oracle next to the repository (build it with its build.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CORPUS="$ROOT/crates/kudo-template/tests/corpus"
ORACLE="${GOTMPL_ORACLE:-$ROOT/../shared/go-template-oracle/bin/gotmpl-oracle}"

check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

if [[ ! -x "$ORACLE" ]]; then
  echo "regen-template-goldens: oracle not found at $ORACLE (set GOTMPL_ORACLE or run ../shared/go-template-oracle/build.sh)" >&2
  exit 2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Date functions must be reproducible: the oracle uses UTC when TZ is unset.
unset TZ

status=0
ncases=0
ndiff=0

# The function names of the kudo profile (the corpus must use each of them at least twice).
"$ORACLE" --profile kudo --list-funcs > "$work/kudo-funcs.txt"
if ((check)); then
  if ! cmp -s "$work/kudo-funcs.txt" "$CORPUS/kudo-funcs.txt"; then
    echo "DIFF kudo-funcs.txt (oracle --profile kudo --list-funcs):" >&2
    diff "$CORPUS/kudo-funcs.txt" "$work/kudo-funcs.txt" | sed 's/^/    /' >&2 || true
    ndiff=$((ndiff + 1)); status=1
  fi
else
  cp "$work/kudo-funcs.txt" "$CORPUS/kudo-funcs.txt"
fi
for dir in "$CORPUS"/*/; do
  cat="$(basename "$dir")"
  mkdir -p "$work/$cat"
  find "$dir" -maxdepth 1 -type f \( -name '*.tmpl' -o -name '*.json' -o -name '*.yaml' -o -name '*.yml' \) \
    -exec cp -p {} "$work/$cat/" \;
  if ! "$ORACLE" --profile kudo --quiet --batch "$work/$cat"; then
    echo "regen-template-goldens: oracle batch failed for $cat" >&2
    exit 3
  fi
  for tmpl in "$work/$cat"/*.tmpl; do
    name="$(basename "$tmpl" .tmpl)"
    ncases=$((ncases + 1))
    if [[ -f "$work/$cat/$name.out" ]]; then new="$work/$cat/$name.out"; kind=out; other=err
    elif [[ -f "$work/$cat/$name.err" ]]; then new="$work/$cat/$name.err"; kind=err; other=out
    else echo "regen-template-goldens: $cat/$name: oracle wrote no result" >&2; exit 3
    fi
    golden="$dir$name.$kind"
    if ((check)); then
      if [[ -f "$dir$name.$other" ]]; then
        echo "DIFF $cat/$name: golden is .$other, oracle now gives .$kind" >&2
        ndiff=$((ndiff + 1)); status=1
      elif [[ ! -f "$golden" ]]; then
        echo "MISSING $cat/$name.$kind" >&2
        ndiff=$((ndiff + 1)); status=1
      elif ! cmp -s "$new" "$golden"; then
        echo "DIFF $cat/$name.$kind:" >&2
        diff -u "$golden" "$new" | sed -n '3,12p' | sed 's/^/    /' >&2 || true
        ndiff=$((ndiff + 1)); status=1
      fi
    else
      rm -f "$dir$name.$other"
      cp "$new" "$golden"
    fi
  done
  # Goldens without a template are stale.
  for g in "$dir"*.out "$dir"*.err; do
    [[ -e "$g" ]] || continue
    name="$(basename "${g%.*}")"
    if [[ ! -f "$dir$name.tmpl" ]]; then
      if ((check)); then echo "STALE $cat/$(basename "$g")" >&2; ndiff=$((ndiff + 1)); status=1
      else rm -f "$g"; fi
    fi
  done
done

if ((check)); then
  if ((status)); then
    echo "regen-template-goldens: $ndiff of $ncases cases differ from the oracle ($("$ORACLE" --version | head -1)); run scripts/regen-template-goldens.sh" >&2
  else
    echo "regen-template-goldens: $ncases cases match the oracle" >&2
  fi
else
  echo "regen-template-goldens: wrote goldens for $ncases cases" >&2
fi
exit "$status"
