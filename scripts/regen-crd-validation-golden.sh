#!/usr/bin/env bash
# Records (or, with --check, verifies) kube-apiserver's answers to the custom-object validation
# cases of crates/lab/kudo-apiserver/tests/crd_validation/cases.json into
# crates/lab/kudo-apiserver/tests/golden/crd-validation.json.
#
#   scripts/regen-crd-validation-golden.sh          write the golden from the real control plane
#   scripts/regen-crd-validation-golden.sh --check  fail when the golden differs from its answers
#
# The real control plane is $KUDO_REAL_CLUSTER_KUBECONFIG when set; otherwise the test starts (or
# reuses) ../shared/real-cluster's in target/real-cluster, which keeps running afterwards (stop it
# with ../shared/real-cluster/stop.sh from the workspace root). After regenerating, run
# `cargo test -p kudo-apiserver --test crd_validation` to hold the embedded server to the new golden.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

case "${1:-}" in
  --check) unset KUDO_REGEN_CRD_VALIDATION_GOLDEN ;;
  "") export KUDO_REGEN_CRD_VALIDATION_GOLDEN=1 ;;
  -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

cargo test -p kudo-apiserver --test crd_validation real_cluster_crd_validation_matches_golden \
  -- --ignored --exact --nocapture
