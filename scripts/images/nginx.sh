#!/usr/bin/env bash
# nginx from Debian's package, for examples/first-operator on real pods.
#
#   scripts/images/nginx.sh        # prints the archive path (cached in target/images/)
#
# Named docker.io/library/nginx:1.7.9, the name examples/first-operator asks for (its appVersion);
# the software is Debian bookworm's nginx 1.22, whatever the tag says (nothing can be pulled here).
# Like the Docker library image: the master starts as root and serves /usr/share/nginx/html (Debian's
# "Welcome to nginx!" page) on port 80 with workers as www-data, in the foreground
# (`nginx -g 'daemon off;'`), access log on stdout and error log on stderr; /etc/nginx/conf.d/*.conf
# is included.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/images/lib.sh
source "$HERE/lib.sh"

NAME=nginx-1.7.9
PKGS=(nginx)
IMG_INPUTS="$HERE/nginx/nginx.conf" img_begin "$NAME" "${PKGS[@]}"
# Our configuration replaces Debian's (whose default site the postinst would have enabled).
rm -rf "$R/etc/nginx/sites-available" "$R/etc/nginx/sites-enabled" "$R/etc/nginx/modules-enabled"
install -m 0644 "$HERE/nginx/nginx.conf" "$R/etc/nginx/nginx.conf"
mkdir -p "$R/etc/nginx/conf.d" "$R/var/lib/nginx" "$R/var/log/nginx" "$R/var/cache/nginx"
# Anything still configured to log to the default files ends up in the container's log.
ln -sf /dev/stdout "$R/var/log/nginx/access.log"
ln -sf /dev/stderr "$R/var/log/nginx/error.log"
# The configuration must parse (checked in the root filesystem when the build runs as root).
if [[ "$(id -u)" == 0 ]]; then chroot "$R" /usr/sbin/nginx -t -q -g 'daemon off;'; fi

img_pack "$NAME" "$R" \
  --name docker.io/library/nginx:1.7.9 \
  --cmd '["nginx", "-g", "daemon off;"]' \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --workdir /
