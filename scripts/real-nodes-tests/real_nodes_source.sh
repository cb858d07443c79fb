#!/usr/bin/env bash
# A package source on real pods: examples/first-operator, pushed and signed with kubectl-kudo into
# the CNCF distribution registry (Debian's docker-registry, htpasswd auth, TLS from a CA made here)
# listening on the node's address, where pods reach the host; an OperatorSource names it with a
# pull Secret (`kubectl create secret docker-registry`), a CA Secret and a cosign key Secret.
#
#   KUBECONFIG=… [KUDO=…] [KUDO_REAL_NODES_DIR=…] scripts/real-nodes-tests/real_nodes_source.sh
#
# Checks: the manager (the stage's, in kudo-system) pulls the artifact from a pod's address (the
# registry's log names the client), verifies the signature and reports Ready and SignatureVerified
# with the pushed digest; it stores the OperatorVersion with the source annotation; an Instance of
# it, applied with kubectl, reaches deploy COMPLETE with 2 nginx pods serving HTTP.
# Needs docker-registry, htpasswd (apache2-utils) and openssl; without them the test says so and
# passes, except under CI=true (.ci/run installs them).
set -euo pipefail
# shellcheck source=scripts/real-nodes-tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

for tool in docker-registry htpasswd openssl; do
  if ! command -v "$tool" >/dev/null; then
    msg="$tool not installed (apt-get install docker-registry apache2-utils openssl; .ci/run does)"
    [[ "${CI:-}" == true || "${CI:-}" == 1 ]] && { echo "real_nodes_source: $msg" >&2; exit 1; }
    echo "real_nodes_source SKIPPED: $msg" >&2
    exit 0
  fi
done

rn_begin source
rn_image nginx.sh
INSTANCE=web
OV=first-operator-1.7.9-0.2.0
REG_DIR="$RN_LOGS/source-registry"
rm -rf "$REG_DIR"
mkdir -p "$REG_DIR"

# The node's address: the kit's bridge address, where the host's services are reached from pods.
NODE_IP=$(kubectl get nodes -o jsonpath='{.items[0].status.addresses[?(@.type=="InternalIP")].address}')
[[ -n "$NODE_IP" ]] || rn_fail "the node has no InternalIP"
PORT=$(python3 -c "import socket; s=socket.socket(); s.bind(('$NODE_IP', 0)); print(s.getsockname()[1])")
ADDR="$NODE_IP:$PORT"
USER_NAME=kudo
PASSWORD="s3cret-$RANDOM$RANDOM"

# A CA and the registry's certificate for the node's address, signed by it.
registry_certificates() {
  local d=$REG_DIR
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=kudo-rs real-node test CA" -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign -keyout "$d/ca.key" -out "$d/ca.crt"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$NODE_IP" \
    -keyout "$d/server.key" -out "$d/server.csr"
  printf 'subjectAltName=IP:%s\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' \
    "$NODE_IP" >"$d/server.ext"
  openssl x509 -req -days 2 -CAcreateserial -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" \
    -extfile "$d/server.ext" -out "$d/server.crt"
}

# docker-registry on the node's address with htpasswd auth and TLS (stopped at exit by lib.sh).
start_registry() {
  registry_certificates >"$REG_DIR/openssl.log" 2>&1 || rn_fail "making certificates (log: $REG_DIR/openssl.log)"
  htpasswd -Bbc "$REG_DIR/htpasswd" "$USER_NAME" "$PASSWORD" 2>/dev/null
  cat >"$REG_DIR/config.yml" <<EOF
version: 0.1
log: {level: info}
storage: {filesystem: {rootdirectory: $REG_DIR/data}}
http:
  addr: $ADDR
  tls: {certificate: $REG_DIR/server.crt, key: $REG_DIR/server.key}
auth:
  htpasswd: {realm: kudo-real-nodes, path: $REG_DIR/htpasswd}
EOF
  docker-registry serve "$REG_DIR/config.yml" >"$REG_DIR/registry.log" 2>&1 &
  RN_BG_PIDS+=("$!")
  rn_until 20 "docker-registry answers on https://$ADDR/v2/ (401 without credentials)" \
    bash -c "[[ \$(curl -s -o /dev/null -w '%{http_code}' --cacert '$REG_DIR/ca.crt' https://$ADDR/v2/) == 401 ]]"
}

# kubectl-kudo with a Docker config and home of this test's own.
kudo_reg() {
  DOCKER_CONFIG="$REG_DIR/docker" "$KUDO" --home "$REG_DIR/kudo" "$@" </dev/null
}

start_registry
REF="oci://$ADDR/kudo/first-operator"
echo "$PASSWORD" | DOCKER_CONFIG="$REG_DIR/docker" "$KUDO" --home "$REG_DIR/kudo" \
  registry login "$ADDR" -u "$USER_NAME" --password-stdin --ca-file "$REG_DIR/ca.crt" >&2 ||
  rn_fail "registry login $ADDR"
kudo_reg package keygen -d "$REG_DIR/keys" >&2 || rn_fail "package keygen"
DIGEST=$(kudo_reg package push "$RN_ROOT/examples/first-operator" "$REF" --ca-file "$REG_DIR/ca.crt" -o json |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["digest"])') || rn_fail "package push $REF"
rn_log "pushed $REF@$DIGEST"
kudo_reg package sign "$REF@$DIGEST" --key "$REG_DIR/keys/kudo.key" --ca-file "$REG_DIR/ca.crt" >&2 ||
  rn_fail "package sign $REF@$DIGEST"

# The Secrets as a user makes them, and the source as Git would hold it.
kubectl -n "$RN_NS" create secret docker-registry regcred --docker-server="$ADDR" \
  --docker-username="$USER_NAME" --docker-password="$PASSWORD" >/dev/null
kubectl -n "$RN_NS" create secret generic registry-ca --from-file ca.crt="$REG_DIR/ca.crt" >/dev/null
kubectl -n "$RN_NS" create secret generic cosign-keys --from-file cosign.pub="$REG_DIR/keys/kudo.pub" >/dev/null
kubectl -n "$RN_NS" apply -f - >&2 <<EOF
apiVersion: kudo-rs.dev/v1alpha1
kind: OperatorSource
metadata: {name: first-operator}
spec:
  url: $REF
  ref: {tag: 0.2.0}
  interval: 30s
  secretRef: {name: regcred}
  certSecretRef: {name: registry-ca}
  verify: {provider: cosign, secretRef: {name: cosign-keys}}
EOF

source_field() {
  kubectl -n "$RN_NS" get operatorsources.kudo-rs.dev first-operator -o jsonpath="$1"
}
source_ready() { [[ $(source_field '{.status.conditions[?(@.type=="Ready")].status}') == True ]]; }
rn_until 120 "OperatorSource first-operator Ready" source_ready
rn_eq "SignatureVerified" True "$(source_field '{.status.conditions[?(@.type=="SignatureVerified")].status}')"
rn_eq "the digest the source resolved" "$DIGEST" "$(source_field '{.status.artifact.digest}')"
rn_eq "the OperatorVersion the source stored" "$OV" "$(source_field '{.status.artifact.operatorVersion}')"
rn_eq "the stored OperatorVersion's source annotation" "$REF@$DIGEST" \
  "$(kubectl -n "$RN_NS" get operatorversions.kudo.dev "$OV" -o jsonpath='{.metadata.annotations.kudo-rs\.dev/source}')"

# The pull came from a pod, not from this host: the registry logs each request's client address.
pod_pulled() {
  grep "/v2/kudo/first-operator/blobs/" "$REG_DIR/registry.log" |
    grep -o 'http.request.remoteaddr="\?[0-9.]*' | grep -o '[0-9.]*$' | grep -vx "$NODE_IP" | head -n1
}
puller=$(pod_pulled || true)
[[ -n "$puller" ]] || rn_fail "no blob of kudo/first-operator was fetched from a pod address (log: $REG_DIR/registry.log)"
manager_ips=$(kubectl -n kudo-system get pods -l app=kudo-manager -o jsonpath='{.items[*].status.podIP}')
rn_check "the blobs were fetched by a manager pod ($puller; manager pods: $manager_ips)" \
  grep -qwF -- "$puller" <<<"$manager_ips"

kubectl -n "$RN_NS" apply -f - >&2 <<EOF
apiVersion: kudo.dev/v1beta1
kind: Instance
metadata: {name: $INSTANCE, labels: {kudo.dev/operator: first-operator}}
spec: {operatorVersion: {name: $OV}}
EOF
rn_plan_complete "$INSTANCE" 180
running() {
  kubectl -n "$RN_NS" get pods -l "app=nginx,instance=$INSTANCE" --field-selector=status.phase=Running \
    -o jsonpath='{range .items[*]}{.status.podIP}{"\n"}{end}'
}
rn_until 60 "2 nginx pods Running" bash -c "[[ \$(kubectl -n $RN_NS get pods -l app=nginx,instance=$INSTANCE --field-selector=status.phase=Running -o name | wc -l) == 2 ]]"
serves() { curl -fsS --max-time 5 "http://$1/" | grep -q 'Welcome to nginx!'; }
for ip in $(running); do
  rn_until 30 "nginx page from the host on http://$ip/" serves "$ip"
done
