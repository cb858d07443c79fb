#!/usr/bin/env bash
# busybox from Debian's busybox-static (1.35), named docker.io/library/busybox:1.28: the init
# container image examples/galera's StatefulSet asks for. One static binary with a link for every
# applet, /etc/passwd and /tmp.
#
#   scripts/images/busybox.sh        # prints the archive path (cached in target/images/)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/images/lib.sh
source "$HERE/lib.sh"

NAME=busybox-1.28
if img_fresh "$NAME" "$(cat "${BASH_SOURCE[0]}")"; then
  echo "$IMAGES_DIR/$NAME.tar"
  exit 0
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
img_debs "$WORK/deb" busybox-static
R="$WORK/rootfs"
mkdir -p "$R/bin" "$R/etc" "$R/tmp" "$R/root"
chmod 1777 "$R/tmp"
cp "$WORK/deb/bin/busybox" "$R/bin/busybox"
# The static binary runs on the build host: it lists its own applets.
for a in $("$R/bin/busybox" --list); do
  [[ "$a" == busybox ]] || ln -sf busybox "$R/bin/$a"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$R/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$R/etc/group"

img_pack "$NAME" "$R" \
  --name docker.io/library/busybox:1.28 \
  --cmd '["sh"]' \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
