#!/usr/bin/env bash
# The second seed on real pods: examples/wordpress (WordPress and MySQL in one operator) and
# examples/wordpress-on-mysql (WordPress whose database is the examples/mysql operator, installed as a
# dependency). Images: wordpress:4.8.0-apache from scripts/images/wordpress.sh (Debian's WordPress,
# Apache, PHP) and, for the database, mysql:5.7 from scripts/images/mariadb.sh (Debian's MariaDB),
# given as MYSQL_IMAGE at install time (the examples default to mysql:5.6, which nothing here builds).
#
#   KUBECONFIG=… [KUDO=…] [KUDO_REAL_NODES_DIR=…] scripts/real-nodes-tests/real_nodes_wordpress.sh
#
# Checks, for each operator: install reaches deploy COMPLETE; through the WordPress Service's
# cluster IP, wp-admin/install.php answers with WordPress's installer; the installer's step 2 (a
# POST that writes the site's tables and its admin user into MySQL) says Success; then / renders
# the blog title just set, a page WordPress builds from the database; the tables are in MySQL
# (read with the mysql client in the database pod).
set -euo pipefail
# shellcheck source=scripts/real-nodes-tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rn_begin wordpress
rn_image mariadb.sh wordpress.sh
rn_writable_volumes
PW='s3cret-pw'

# installer_answers IP: the installer page (step 0 or 1: language choice or the site form).
installer_answers() {
  curl -fsS --max-time 10 "http://$1/wp-admin/install.php" | grep -q 'WordPress &rsaquo; Installation'
}

# check_site INSTANCE DB_POD_SELECTOR DB_NAME: the HTTP checks through the Service, then MySQL's view.
check_site() {
  local inst=$1 db_sel=$2 db=$3 ip title out pod
  title="Blog of $inst on real pods"
  ip=$(kubectl -n "$RN_NS" get service "$inst-wordpress" -o jsonpath='{.spec.clusterIP}')
  rn_until 180 "install page of $inst on http://$ip/wp-admin/install.php (Service)" installer_answers "$ip"
  out=$(curl -fsS --max-time 60 "http://$ip/wp-admin/install.php?step=2" \
    --data-urlencode "weblog_title=$title" --data-urlencode user_name=admin \
    --data-urlencode admin_password=kudo-rs-Adm1n --data-urlencode admin_password2=kudo-rs-Adm1n \
    --data-urlencode pw_weak=1 --data-urlencode admin_email=admin@example.invalid \
    --data-urlencode blog_public=0 --data-urlencode language=) || rn_fail "POST install.php?step=2 on $ip"
  grep -q 'Success!' <<<"$out" ||
    { echo "$out" | tail -n 40 >&2; rn_fail "installer step 2 of $inst: no Success!"; }
  rn_log "ok: installer step 2 of $inst: Success!"
  out=$(curl -fsS --max-time 30 "http://$ip/") || rn_fail "GET / on $ip"
  grep -qF "$title" <<<"$out" ||
    { echo "$out" | head -n 40 >&2; rn_fail "front page of $inst without its title"; }
  rn_log "ok: front page of $inst renders '$title' (read from MySQL)"
  pod=$(kubectl -n "$RN_NS" get pods -l "$db_sel" -o jsonpath='{.items[0].metadata.name}')
  rn_eq "blogname in MySQL ($pod)" "$title" "$(rn_exec "$pod" -- mysql -uroot -p"$PW" -N -B \
    -e "SELECT option_value FROM $db.wp_options WHERE option_name='blogname'")"
}

INSTANCE=wp
(cd "$RN_ROOT/examples/wordpress" && "$KUDO" install . -n "$RN_NS" --instance "$INSTANCE" \
  -p MYSQL_ROOT_PASSWORD="$PW" -p MYSQL_IMAGE=docker.io/library/mysql:5.7 \
  -p MYSQL_STORAGE=1Gi -p WORDPRESS_STORAGE=1Gi) >&2
rn_plan_complete "$INSTANCE" 300
check_site "$INSTANCE" "app=wordpress,tier=mysql,instance=$INSTANCE" wordpress

INSTANCE=wpm
(cd "$RN_ROOT/examples/wordpress-on-mysql" && "$KUDO" install . -n "$RN_NS" --instance "$INSTANCE" \
  -p MYSQL_ROOT_PASSWORD="$PW" -p MYSQL_IMAGE=docker.io/library/mysql:5.7 -p WORDPRESS_STORAGE=1Gi) >&2
rn_plan_complete "$INSTANCE" 300
# The dependency is the Instance <instance>-mysql of examples/mysql, whose pods say so.
check_site "$INSTANCE" "app=mysql,instance=$INSTANCE-mysql" wordpress
