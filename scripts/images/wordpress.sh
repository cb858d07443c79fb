#!/usr/bin/env bash
# WordPress on Apache with PHP from Debian's packages, for examples/wordpress and
# examples/wordpress-on-mysql on real pods (their database: scripts/images/mariadb.sh's image).
#
#   scripts/images/wordpress.sh        # prints the archive path (cached in target/images/)
#
# Named docker.io/library/wordpress:4.8.0-apache, the name the examples ask for
# (wordpress:<appVersion>-apache); the software is Debian bookworm's: WordPress 6.1, Apache 2.4, PHP 8.2,
# whatever the tag says.
# What the templates rely on (the Docker library image's behaviour, done by our own
# scripts/images/wordpress/entrypoint.sh): WORDPRESS_DB_HOST and WORDPRESS_DB_PASSWORD, the database
# created when missing, port 80, wp-content on the volume at /var/www/html.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/images/lib.sh
source "$HERE/lib.sh"

NAME=wordpress-4.8.0-apache
PKGS=(wordpress wordpress-theme-twentytwentythree apache2 libapache2-mod-php php-mysql media-types)
IMG_INPUTS="$HERE/wordpress/entrypoint.sh $HERE/wordpress/apache2.conf" img_begin "$NAME" "${PKGS[@]}"
# Our configuration replaces Debian's (whose enabled modules and sites the postinst would have linked).
rm -rf "$R"/etc/apache2/{sites-available,sites-enabled,mods-enabled,conf-available,conf-enabled,ports.conf}
install -m 0644 "$HERE/wordpress/apache2.conf" "$R/etc/apache2/apache2.conf"
install -D -m 0755 "$HERE/wordpress/entrypoint.sh" "$R/usr/local/bin/docker-entrypoint.sh"
# PHP's extensions: each package ships its .ini files under /usr/share/php8.2-*/; its postinst
# (phpenmod) copies them to mods-available and links them into the SAPI's conf.d with their
# "; priority=N" prefix. Without them mysqli is not loaded.
mkdir -p "$R/etc/php/8.2/mods-available" "$R/etc/php/8.2/apache2/conf.d"
for ini in "$R"/usr/share/php8.2-*/*/*.ini; do
  base=$(basename "$ini")
  install -m 0644 "$ini" "$R/etc/php/8.2/mods-available/$base"
  prio=$(sed -n 's/^; *priority=\([0-9]*\).*/\1/p' "$ini"); prio=${prio:-20}
  ln -sf "/etc/php/8.2/mods-available/$base" "$R/etc/php/8.2/apache2/conf.d/$prio-$base"
done
[[ -L "$R/etc/php/8.2/apache2/conf.d/20-mysqli.ini" ]] || { img_log "no mysqli extension for PHP"; exit 1; }
mkdir -p "$R/var/www/html" "$R/run/apache2" "$R/run/lock/apache2" "$R/var/log/apache2" "$R/etc/wordpress"
# The configuration must parse (checked in the root filesystem when the build runs as root).
if [[ "$(id -u)" == 0 ]]; then
  chroot "$R" /bin/bash -c 'source /etc/apache2/envvars && mkdir -p /run/apache2 && apache2 -t' >&2
fi

img_pack "$NAME" "$R" \
  --name docker.io/library/wordpress:4.8.0-apache \
  --entrypoint '["/usr/local/bin/docker-entrypoint.sh"]' \
  --cmd '["apache2-foreground"]' \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env LANG=C.UTF-8 \
  --workdir /var/www/html
