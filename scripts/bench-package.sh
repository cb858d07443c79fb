#!/usr/bin/env bash
# Whole-process timings of `kubectl kudo package verify` and `package render` on a large generated
# package (25 templates, 250 parameters). Usage: scripts/bench-package.sh [RUNS]
# Needs a release build: CARGO_TARGET_DIR=... cargo build --release -p kubectl-kudo
# Uses hyperfine when installed, else a timing loop.
set -euo pipefail
RUNS="${1:-20}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${KUDO_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/kubectl-kudo}"
[ -x "$BIN" ] || { echo "build first: cargo build --release -p kubectl-kudo ($BIN missing)" >&2; exit 1; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
PKG="$WORK/large"
python3 - "$PKG" <<'PY'
import os, sys
root = sys.argv[1]
os.makedirs(os.path.join(root, "templates", "sub"))
T, P = 25, 250
params = ["apiVersion: kudo.dev/v1beta1", "parameters:"]
for i in range(P):
    kind = ["string", "integer", "boolean", "array", "map"][i % 5]
    default = {"string": f'"value-{i}"', "integer": str(i), "boolean": "true",
               "array": "[a, b, c]", "map": "{k: v, n: 1}"}[kind]
    params += [f"  - name: P{i:03d}", f"    description: Parameter number {i}.", f"    type: {kind}",
               f"    default: {default}"]
open(os.path.join(root, "params.yaml"), "w").write("\n".join(params) + "\n")
tasks, steps = [], []
for t in range(T):
    name = f"sub/t{t:02d}.yaml" if t % 5 == 0 else f"t{t:02d}.yaml"
    tasks += [f"  - name: task{t:02d}", "    kind: Apply", "    spec:", "      resources:", f"        - {name}"]
    steps += [f"          - name: step{t:02d}", "            tasks:", f"              - task{t:02d}"]
    own = [i for i in range(P) if i % T == t]
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata:", f"  name: {{{{ .Name }}}}-cm-{t}",
             "  namespace: {{ .Namespace }}", "data:"]
    for i in own:
        kind = ["string", "integer", "boolean", "array", "map"][i % 5]
        if kind in ("array", "map"):
            lines.append(f"  p{i}: {{{{ toJson .Params.P{i:03d} | quote }}}}")
        else:
            lines.append(f"  p{i}: {{{{ .Params.P{i:03d} | quote }}}}")
    lines.append("  list: |")
    lines.append("    {{- range $i, $v := until 20 }}")
    lines.append("    item-{{ $i }}-{{ $.Name }}-{{ sha256sum (printf \"%d\" $v) | trunc 8 }}")
    lines.append("    {{- end }}")
    lines += ["---", "apiVersion: apps/v1", "kind: Deployment", "metadata:", f"  name: {{{{ .Name }}}}-d-{t}",
              "spec:", "  replicas: 1", "  selector:", "    matchLabels: {app: x}", "  template:",
              "    metadata:", "      labels: {app: x}", "    spec:", "      containers:",
              "        - name: c", "          image: nginx:{{ .AppVersion }}"]
    open(os.path.join(root, "templates", name), "w").write("\n".join(lines) + "\n")
op = ["apiVersion: kudo.dev/v1beta1", "name: large", "operatorVersion: 1.0.0", "appVersion: 1.25.0",
      "kubernetesVersion: 1.20.0", "tasks:"] + tasks + ["plans:", "  deploy:", "    strategy: serial",
      "    phases:", "      - name: main", "        strategy: serial", "        steps:"] + steps
open(os.path.join(root, "operator.yaml"), "w").write("\n".join(op) + "\n")
PY
"$BIN" package verify "$PKG" >/dev/null
"$BIN" package render "$PKG" >/dev/null
echo "objects rendered: $("$BIN" package render "$PKG" | grep -c '^# deploy/')"
if command -v hyperfine >/dev/null; then
  hyperfine -N --warmup 3 --runs "$RUNS" "$BIN package verify $PKG" "$BIN package render $PKG" "$BIN package render $PKG -o json"
else
  for cmd in "package verify $PKG" "package render $PKG" "package render $PKG -o json"; do
    start=$(date +%s%N)
    for _ in $(seq "$RUNS"); do "$BIN" $cmd >/dev/null; done
    end=$(date +%s%N)
    echo "$cmd: mean $(( (end - start) / RUNS / 1000 )) us over $RUNS runs"
  done
fi
