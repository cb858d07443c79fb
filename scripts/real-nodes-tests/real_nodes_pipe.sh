#!/usr/bin/env bash
# Pipe tasks on real pods: the generator Pod really runs, and the manager copies its files out
# through `pods/exec` (`stat -c %s`, `tar cf -` in the `waiter` container, which runs the generator's image).
#   (a) packages/pipe-test: the init container runs openssl in a shell; its certificate and key land in two
#       Secrets, a copy of the certificate in a ConfigMap (binaryData) and an env file in a ConfigMap (keys);
#       the certificate parses with openssl here, has the requested subject, matches the key, and the env
#       file's fingerprint is the certificate's; the generator Pod is gone; then plan `verify` runs a Job that
#       mounts the artifacts by their .Pipes names and verifies them in the cluster; uninstall removes all.
#       A second Instance with VERIFY_IN_DEPLOY=true runs the same Job as deploy's step right after the Pipe
#       step, in the same plan run. This found a manager bug (fixed): the plan was rendered once per pass,
#       before the Pipe task of that pass created its artifacts, so the Job got the dependencies hash of
#       missing objects and the next pass's apply failed with `field is immutable`. The pass now renders
#       again after a Pipe task completes (embedded-cluster regression test: exec_cli.rs
#       a_job_right_after_a_pipe_step_mounts_its_artifacts_and_completes).
#   (b) the catalog's kafka with USE_AUTO_TLS_CERTIFICATE=true and TRANSPORT_ENCRYPTION_ENABLED=true: its
#       `generate-tls-certificates` step (openssl req -x509 -newkey rsa:4096 … -subj /CN=KudoKafkaCA) reaches
#       COMPLETE and the Secrets named in .Pipes hold a real RSA-4096 self-signed certificate and its key. The
#       rest of kafka's plan does not complete here (its broker image, mesosphere/kafka:2.5.1-1.3.1 with
#       imagePullPolicy Always, does not exist); the Instance is uninstalled after the check.
# Wall time on the 2-core VM (own manager, image cached): 31–34 s.
# Image: scripts/images/kafka-cert-generator.sh (mesosphere/kafka:1.1.0-2.4.0 and example.local/kudo-rs/openssl:3.0).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
CATALOG="${KUDO_CATALOG:-$RN_ROOT/../shared/community-operators}"
PKG="$RN_ROOT/scripts/real-nodes-tests/packages/pipe-test"

rn_load_image docker.io/mesosphere/kafka:1.1.0-2.4.0 "$RN_ROOT/scripts/images/kafka-cert-generator.sh"
rn_begin pipe

secret_file() { kubectl -n "$RN_NS" get secret "$1" -o jsonpath="{.data.${2//./\\.}}" | base64 -d; }
tmp="$RN_LOGS/pipe-files"
rm -rf "$tmp" && mkdir -p "$tmp"

# --- (a) the project's own package
CN=pipe.rn-pipe.kudo-rs.local
"$KUDO" install "$PKG" --instance pipe -n "$RN_NS" -p COMMON_NAME="$CN" >&2
rn_plan_complete pipe 180
art=pipe.deploy.certs.generate.generate
secret_file "$art.cert" tls.crt >"$tmp/tls.crt"
secret_file "$art.key" tls.key >"$tmp/tls.key"
rn_check "the Secret's certificate parses as an X.509 PEM certificate" openssl x509 -in "$tmp/tls.crt" -noout
rn_eq "its subject" "CN=$CN" "$(openssl x509 -in "$tmp/tls.crt" -noout -subject -nameopt RFC2253 | sed 's/^subject=//')"
rn_eq "its subject alternative name" "DNS:$CN" \
  "$(openssl x509 -in "$tmp/tls.crt" -noout -ext subjectAltName | tail -n 1 | tr -d ' ')"
rn_eq "the key Secret holds the certificate's private key" \
  "$(openssl x509 -in "$tmp/tls.crt" -noout -pubkey | sha256sum)" "$(openssl pkey -in "$tmp/tls.key" -pubout | sha256sum)"
fp="$(openssl x509 -in "$tmp/tls.crt" -noout -fingerprint -sha256 | cut -d= -f2)"
rn_eq "the env-file ConfigMap's FINGERPRINT" "$fp" \
  "$(kubectl -n "$RN_NS" get configmap "$art.certinfo" -o jsonpath='{.data.FINGERPRINT}')"
rn_eq "the env-file ConfigMap's SUBJECT" "subject=CN=$CN" \
  "$(kubectl -n "$RN_NS" get configmap "$art.certinfo" -o jsonpath='{.data.SUBJECT}')"
rn_check "the env file's comment line is not a key" \
  test -z "$(kubectl -n "$RN_NS" get configmap "$art.certinfo" -o jsonpath='{.data}' | grep -o '#')"
rn_eq "the file ConfigMap's binaryData ca.crt is the certificate" "$(sha256sum <"$tmp/tls.crt")" \
  "$(kubectl -n "$RN_NS" get configmap "$art.ca" -o jsonpath='{.binaryData.ca\.crt}' | base64 -d | sha256sum)"
rn_eq "the artifacts are owned by the Instance" "Instance/pipe" \
  "$(kubectl -n "$RN_NS" get secret "$art.cert" -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}')"
# The manager deletes the generator Pod with the default grace period: its waiter (`sleep infinity`, PID 1,
# which ignores SIGTERM) is killed only after terminationGracePeriodSeconds (30 s).
pod_deleting() {
  local pod; pod="$(kubectl -n "$RN_NS" get pod "$art.pipepod" --ignore-not-found -o jsonpath='{.metadata.name} {.metadata.deletionTimestamp}')"
  [[ -z "$pod" || "$pod" == *" "?* ]]
}
rn_until 30 "the generator Pod is deleted or being deleted" pod_deleting
"$KUDO" plan trigger --name verify --instance pipe -n "$RN_NS" >&2
rn_plan_complete pipe 120
rn_eq "plan verify's Job (mounting the artifacts by their KUDO names) succeeded" 1 \
  "$(kubectl -n "$RN_NS" get job pipe-verify -o jsonpath='{.status.succeeded}')"
verified="$(kubectl -n "$RN_NS" logs job/pipe-verify)"
rn_log "verify Job: $verified"
rn_check "its log says verified with the same fingerprint" grep -q "verified: subject=CN=$CN, key matches, fingerprint $fp" <<<"$verified"
"$KUDO" uninstall --instance pipe -n "$RN_NS" >&2
# The artifacts go by owner reference (the garbage collector: the stage waits until it knows kudo.dev).
rn_until 60 "uninstall removed the artifacts" \
  test -z "$(kubectl -n "$RN_NS" get secret,configmap -l kudo.dev/instance=pipe -o name)"

# --- (a2) the verifying Job in the same plan run as the Pipe step
"$KUDO" install "$PKG" --instance pipe2 -n "$RN_NS" -p COMMON_NAME="$CN" -p VERIFY_IN_DEPLOY=true >&2
plan_state() {
  kubectl -n "$RN_NS" get instance "$1" -o jsonpath='{.status.planStatus.deploy.status}'
}
terminal() { [[ "$(plan_state pipe2)" =~ ^(COMPLETE|FATAL_ERROR)$ ]]; }
rn_until 120 "pipe2's deploy (Pipe step, then the verifying Job) ended" terminal
if [[ "$(plan_state pipe2)" != COMPLETE ]]; then
  rn_fail "pipe2's deploy is $(plan_state pipe2): $("$KUDO" plan status --instance pipe2 -n "$RN_NS" 2>&1 | tail -n 3)"
fi
rn_eq "pipe2's verifying Job succeeded in deploy" 1 \
  "$(kubectl -n "$RN_NS" get job pipe2-verify -o jsonpath='{.status.succeeded}')"
"$KUDO" uninstall --instance pipe2 -n "$RN_NS" >&2

# --- (b) kafka's certificate generator
RN_INSTANCE=kafka
# Under a least-privilege manager kafka is applied as kudo-instance (`admin` on this namespace only). Its
# `external-access` Toggle deletes the NodePort ClusterRole and ClusterRoleBinding when they are off, and
# reading cluster-scoped objects is beyond a namespace admin: kafka needs this grant (docs/security.md).
kubectl apply -f - >/dev/null <<GRANT
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: kudo-rs-kafka-cluster-objects
rules:
  - apiGroups: [rbac.authorization.k8s.io]
    resources: [clusterroles, clusterrolebindings]
    verbs: [get, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kudo-rs-kafka-cluster-objects-$RN_NS
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: kudo-rs-kafka-cluster-objects
subjects:
  - kind: ServiceAccount
    name: kudo-instance
    namespace: $RN_NS
GRANT
"$KUDO" install "$CATALOG/kafka/operator" --instance kafka -n "$RN_NS" \
  -p USE_AUTO_TLS_CERTIFICATE=true -p TRANSPORT_ENCRYPTION_ENABLED=true >&2
step_state() {
  kubectl -n "$RN_NS" get instance kafka -o json | python3 -c '
import json, sys
inst = json.load(sys.stdin)
for plan in (inst.get("status") or {}).get("planStatus", {}).values():
    for ph in plan.get("phases") or []:
        for st in ph.get("steps") or []:
            if st.get("name") == "generate-tls-certificates":
                print(st.get("status", ""), st.get("message", ""))'
}
step_complete() { [[ "$(step_state)" == COMPLETE* ]]; }
rn_until 180 "kafka's generate-tls-certificates step is COMPLETE" step_complete
rn_log "step: $(step_state)"
kart=kafka.deploy.deploykafka.generatetlscertificates.generatetlscertificates  # KUDO: [a-z0-9] of each part
secret_file "$kart.certificate" tls.crt >"$tmp/kafka.crt"
secret_file "$kart.privatekey" tls.key >"$tmp/kafka.key"
rn_check "kafka's certificate Secret parses as an X.509 certificate" openssl x509 -in "$tmp/kafka.crt" -noout
rn_eq "its subject" "CN=KudoKafkaCA" "$(openssl x509 -in "$tmp/kafka.crt" -noout -subject -nameopt RFC2253 | sed 's/^subject=//')"
rn_eq "self-signed (issuer = subject)" "CN=KudoKafkaCA" "$(openssl x509 -in "$tmp/kafka.crt" -noout -issuer -nameopt RFC2253 | sed 's/^issuer=//')"
rn_check "an RSA 4096-bit key" bash -c "openssl x509 -in '$tmp/kafka.crt' -noout -text | grep -q 'Public-Key: (4096 bit)'"
rn_eq "kafka's privatekey Secret holds the certificate's key" \
  "$(openssl x509 -in "$tmp/kafka.crt" -noout -pubkey | sha256sum)" "$(openssl pkey -in "$tmp/kafka.key" -pubout | sha256sum)"
sts_mounts() {
  kubectl -n "$RN_NS" get statefulset kafka-kafka -o jsonpath='{.spec.template.spec.volumes[*].secret.secretName}' |
    grep -q "$kart.certificate"
}
rn_until 120 "the broker StatefulSet (next steps) mounts the .Pipes Secret" sts_mounts
"$KUDO" plan status --instance kafka -n "$RN_NS" >&2 || true
"$KUDO" uninstall --instance kafka -n "$RN_NS" >&2
kafka_gone() {
  local left; left="$(kubectl -n "$RN_NS" get secret,configmap,statefulset -l kudo.dev/instance=kafka -o name)"
  [[ -z "$left" ]] || { echo "left: $left" >&2; return 1; }
}
# The objects go by the garbage collector (owner: the Instance).
rn_until 180 "kafka uninstalled (its Secrets, ConfigMaps and StatefulSet gone)" kafka_gone
