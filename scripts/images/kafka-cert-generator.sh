#!/usr/bin/env bash
# Image docker.io/mesosphere/kafka:1.1.0-2.4.0 as the KUDO catalog's kafka package uses it: only as the
# generator of its Pipe task `generate-tls-certificates` (templates/cert-generator.yaml, with
# USE_AUTO_TLS_CERTIFICATE=true), whose init container runs
#   /bin/sh -c 'openssl req -x509 -newkey rsa:4096 -sha256 -nodes -keyout /tmp/tls.key -out /tmp/tls.crt -subj … -days 365'
# and whose files the manager copies out through a `waiter` container of the same image (`sleep`, then
# `stat -c %s FILE` and `tar cf - FILE` by exec).
#
# The real image: Mesosphere's KUDO Kafka image (Apache Kafka 2.4.0 on a Linux userland with a shell and openssl).
# This one holds no Kafka: Debian 12's openssl 3.0, dash as /bin/sh, coreutils (sleep, stat), tar, grep, sed.
# The same image is also named example.local/kudo-rs/openssl:3.0 for the project's own Pipe test package
# (scripts/real-nodes-tests/packages/pipe-test).
#
#   scripts/images/kafka-cert-generator.sh      # prints the OCI archive path (cached in target/images/)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NAME=kafka-cert-generator
REFS=(docker.io/mesosphere/kafka:1.1.0-2.4.0 example.local/kudo-rs/openssl:3.0)
PKGS=(openssl)

img_begin "$NAME" "${PKGS[@]}"
names=()
for ref in "${REFS[@]}"; do names+=(--name "$ref"); done
img_pack "$NAME" "$R" "${names[@]}" --cmd '["/bin/sh"]'
