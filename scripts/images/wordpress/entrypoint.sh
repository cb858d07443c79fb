#!/bin/bash
# Entrypoint of the WordPress image that scripts/images/wordpress.sh builds from Debian's packages.
# Written for kudo-rs. It behaves the way the KUDO examples (examples/wordpress,
# examples/wordpress-on-mysql) expect the Docker library's wordpress:*-apache image to behave:
#
#   WORDPRESS_DB_HOST (default mysql), WORDPRESS_DB_USER (default root), WORDPRESS_DB_PASSWORD,
#   WORDPRESS_DB_NAME (default wordpress): written to /etc/wordpress/config-default.php (where
#   Debian's wp-config.php looks); the database is created when missing, waiting up to
#   WORDPRESS_DB_WAIT seconds (default 120) for the server to answer;
#   /var/www/html/wp-content (a volume) gets Debian's wp-content when it has none;
#   then Apache in the foreground (`apache2 -DFOREGROUND`), or any other program given as arguments.
set -euo pipefail

log() { echo "$(date -u '+%Y-%m-%d %H:%M:%S') entrypoint: $*" >&2; }

if [[ $# -gt 0 && "$1" != apache2* ]]; then exec "$@"; fi

host=${WORDPRESS_DB_HOST:-mysql} user=${WORDPRESS_DB_USER:-root} pass=${WORDPRESS_DB_PASSWORD:-}
name=${WORDPRESS_DB_NAME:-wordpress} wait=${WORDPRESS_DB_WAIT:-120}

# A PHP single-quoted string: backslash and quote escaped.
php_str() { local s=${1//\\/\\\\}; printf "'%s'" "${s//\'/\\\'}"; }
salt() { head -c 48 /dev/urandom | base64 | tr -d '\n/+='; }

content=/var/www/html/wp-content
if [[ ! -d "$content/themes" ]]; then
  log "copying Debian's wp-content into $content"
  mkdir -p "$content"
  cp -a /usr/share/wordpress/wp-content/. "$content/"
fi
mkdir -p "$content/uploads"
chown -R www-data:www-data "$content"

{
  echo "<?php"
  echo "define('DB_NAME', $(php_str "$name"));"
  echo "define('DB_USER', $(php_str "$user"));"
  echo "define('DB_PASSWORD', $(php_str "$pass"));"
  echo "define('DB_HOST', $(php_str "$host"));"
  echo "define('WP_CONTENT_DIR', '$content');"
  for k in AUTH_KEY SECURE_AUTH_KEY LOGGED_IN_KEY NONCE_KEY \
    AUTH_SALT SECURE_AUTH_SALT LOGGED_IN_SALT NONCE_SALT; do
    echo "define('$k', '$(salt)');"
  done
  echo "\$table_prefix = 'wp_';"
} >/etc/wordpress/config-default.php
chmod 0640 /etc/wordpress/config-default.php
chgrp www-data /etc/wordpress/config-default.php

# The database, as the library image makes it (the server may still be starting).
end=$((SECONDS + wait))
until MYSQL_PWD=$pass mariadb -h "$host" -u "$user" --connect-timeout=5 \
  -e "CREATE DATABASE IF NOT EXISTS \`$name\`" 2>/tmp/db-error; do
  if ((SECONDS >= end)); then
    log "database server $host did not answer within ${wait}s: $(cat /tmp/db-error)"
    exit 1
  fi
  sleep 2
done
log "database $name on $host ready"

# Debian's envvars reads unset variables (APACHE_CONFDIR), which `set -u` refuses.
set +u
# shellcheck disable=SC1091
source /etc/apache2/envvars
set -u
mkdir -p /run/apache2 /run/lock/apache2
exec apache2 -DFOREGROUND
