#!/usr/bin/env bash
# The manager image without Docker: turns the release binary into an OCI image archive.
#
#   scripts/manager-image.sh OUT.tar        # last line of stdout: the image name it tagged
#
# The image holds /usr/local/bin/kubectl-kudo (debug info stripped), the shared libraries it links
# (as `ldd` lists them, with the loader), the CA bundle /etc/ssl/certs/ca-certificates.crt, and
# /etc/passwd and /etc/group naming the user `kudo` (65532), which the image runs as. Entrypoint
# kubectl-kudo, command `manager` — the Dockerfile's layout, so `kubectl kudo init` deploys either.
# Reproducible: the same binary and libraries give the same digest (file times 0, sorted entries,
# owners 0:0; see scripts/images/oci.py). The digest is printed on stderr.
#
# Environment: KUDO_BINARY (default target/release/kubectl-kudo, built with `cargo build --release`
# when missing), KUDO_IMAGE (default docker.io/kudo-rs/manager:v<version of the binary>, the name
# `kubectl kudo init` deploys by default).
#
# Getting it into a cluster: containerd `ctr -n k8s.io images import OUT.tar`; kind `kind load
# image-archive OUT.tar`; a registry `skopeo copy oci-archive:OUT.tar docker://REGISTRY/kudo-rs/manager:vX`
# (then `kubectl kudo init --kudo-image REGISTRY/kudo-rs/manager:vX`). The other way is the Dockerfile.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:?usage: scripts/manager-image.sh OUT.tar}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
bin="${KUDO_BINARY:-$ROOT/target/release/kubectl-kudo}"
if [[ ! -x "$bin" ]]; then
  echo "manager-image: building $bin (cargo build --release -p kubectl-kudo)" >&2
  (cd "$ROOT" && cargo build --release --locked -p kubectl-kudo >&2)
fi
version="$("$bin" version 2>/dev/null | grep -o 'v\?[0-9][0-9.]*[0-9]' | head -n1)"
version="v${version#v}"
image="${KUDO_IMAGE:-docker.io/kudo-rs/manager:$version}"

rootfs="$(mktemp -d)"
trap 'rm -rf "$rootfs"' EXIT
install -d "$rootfs/usr/local/bin" "$rootfs/etc/ssl/certs" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
# Debug info is for profiling builds (Cargo profile `profiling`); an image ships the code alone.
objcopy --strip-debug "$bin" "$rootfs/usr/local/bin/kubectl-kudo"
# The libraries and the loader, at the paths the binary asks for (symlinks resolved).
for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do
  cp --parents -L "$lib" "$rootfs/"
done
ca=/etc/ssl/certs/ca-certificates.crt
if [[ ! -f "$ca" ]]; then
  apt-get install -y -qq ca-certificates >&2
fi
cp -L "$ca" "$rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nkudo:x:65532:65532:kudo manager:/nonexistent:/usr/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nkudo:x:65532:\n' >"$rootfs/etc/group"
find "$rootfs" -exec touch -h -d @0 {} +

digest="$(python3 "$ROOT/scripts/images/oci.py" "$out" --rootfs "$rootfs" --name "$image" \
  --owner 0:0 --user 65532:65532 --entrypoint '["/usr/local/bin/kubectl-kudo"]' --cmd '["manager"]' \
  --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --label org.opencontainers.image.title=kudo-rs-manager --label "org.opencontainers.image.version=$version")"
echo "manager-image: $out ($(du -h "$out" | cut -f1)), manifest $digest" >&2
echo "$image"
