# shellcheck shell=bash
# Shared by scripts/images/*.sh: root filesystems from Debian packages, packed as OCI archives.
#
# A root filesystem is the dependency closure of a list of Debian packages, resolved by apt as if
# nothing were installed (an empty dpkg status file) and downloaded with the machine's own apt
# sources, then unpacked with `dpkg-deb -x` (no maintainer scripts run: users, links and config an
# image needs are made by its build script). `ldconfig -r` writes the loader cache.
#
# Cache: $IMAGES_DIR (default <checkout>/target/images): debs/ (downloaded packages, kept),
# <name>.tar (the archive) and <name>.stamp (hash of the inputs; the archive is rebuilt when it changes).
set -euo pipefail
IMG_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
IMAGES_DIR="${IMAGES_DIR:-$IMG_ROOT/target/images}"
OCI_PY="$IMG_ROOT/scripts/images/oci.py"
mkdir -p "$IMAGES_DIR/debs"

img_log() { echo "images: $*" >&2; }

# apt lists must exist once per machine (a fresh machine has none).
img_apt_ready() {
  if ! apt-cache policy libc6 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    img_log "apt-get update"
    apt-get update -qq >&2
  fi
}

# Packages every image gets: a shell and the tools scripts in containers expect.
IMG_BASE_PKGS=(base-files base-passwd libc-bin bash dash coreutils grep sed mawk findutils util-linux procps
  hostname gzip tar debianutils ncurses-base)

# img_rootfs DIR PKG…: DIR gets the closure of the packages (plus IMG_BASE_PKGS) unpacked.
img_rootfs() {
  local dir=$1; shift
  img_apt_ready
  local state; state=$(mktemp -d)
  : >"$state/status"
  mkdir -p "$state/lists/partial" "$state/archives/partial"
  img_log "resolving and downloading: $*"
  # An empty status file makes apt resolve the whole closure; archives land in the shared cache.
  apt-get install -y -qq --download-only --no-install-recommends \
    -o Dir::State::status="$state/status" \
    -o Dir::Cache::archives="$IMAGES_DIR/debs" \
    -o Debug::NoLocking=1 \
    -o APT::Get::AllowUnauthenticated=false \
    "${IMG_BASE_PKGS[@]}" "$@" >&2
  # Which archives belong to this closure: ask apt for the same plan, as URIs it would fetch.
  apt-get install -y -qq --print-uris --no-install-recommends \
    -o Dir::State::status="$state/status" \
    -o Dir::Cache::archives="$state/archives" \
    -o Debug::NoLocking=1 \
    "${IMG_BASE_PKGS[@]}" "$@" | awk '{print $2}' >"$state/files"
  rm -rf "$dir"; mkdir -p "$dir"
  local f n=0
  while read -r f; do
    dpkg-deb -x "$IMAGES_DIR/debs/$f" "$dir"
    n=$((n + 1))
  done <"$state/files"
  rm -rf "$state"
  [[ -e "$dir/bin/sh" ]] || ln -s dash "$dir/bin/sh"
  mkdir -p "$dir/tmp" "$dir/root" "$dir/run" "$dir/var/tmp" "$dir/etc"
  chmod 1777 "$dir/tmp" "$dir/var/tmp"
  # base-passwd ships the master copies; dpkg would install them as /etc/passwd and /etc/group.
  [[ -f "$dir/etc/passwd" ]] || cp "$dir/usr/share/base-passwd/passwd.master" "$dir/etc/passwd"
  [[ -f "$dir/etc/group" ]] || cp "$dir/usr/share/base-passwd/group.master" "$dir/etc/group"
  # libc-bin's postinst installs nsswitch.conf; without it glibc resolves host names with
  # "dns [!UNAVAIL=return] files", so /etc/hosts (where the kubelet writes a pod's own FQDN) is
  # never read once DNS answers, and `hostname -d` / `hostname -f` come back empty.
  [[ -f "$dir/etc/nsswitch.conf" || ! -f "$dir/usr/share/libc-bin/nsswitch.conf" ]] ||
    cp "$dir/usr/share/libc-bin/nsswitch.conf" "$dir/etc/nsswitch.conf"
  img_alternatives "$dir"
  [[ -e "$dir/usr/bin/which" || ! -e "$dir/usr/bin/which.debianutils" ]] || ln -s which.debianutils "$dir/usr/bin/which"
  [[ -e "$dir/usr/bin/awk" || ! -e "$dir/usr/bin/gawk" ]] || ln -s gawk "$dir/usr/bin/awk"
  ldconfig -r "$dir" 2>/dev/null || true
  img_log "$n packages unpacked into $dir"
}

# img_debs DIR PKG…: only the named packages (no dependencies, no base packages) unpacked into DIR, for
# images of one static program (busybox-static). Archives land in the shared cache.
img_debs() {
  local dir=$1; shift
  img_apt_ready
  local p f
  mkdir -p "$dir"
  for p in "$@"; do
    f=$(apt-get download --print-uris "$p" 2>/dev/null | awk '{print $2}')
    [[ -n "$f" ]] || { img_log "no archive for $p"; return 1; }
    [[ -f "$IMAGES_DIR/debs/$f" ]] || (cd "$IMAGES_DIR/debs" && apt-get download -qq -o APT::Sandbox::User=root "$p" >&2)
    dpkg-deb -x "$IMAGES_DIR/debs/$f" "$dir"
  done
}

# img_alternatives DIR: the links maintainer scripts would register with update-alternatives (awk for mawk,
# nc for netcat-openbsd or else netcat-traditional, java and keytool for an OpenJDK), made directly, for
# those whose target is there.
img_alternatives() {
  local dir=$1 link target jdk link_target
  for link_target in /usr/bin/awk:/usr/bin/mawk /usr/bin/nawk:/usr/bin/mawk /bin/nc:/bin/nc.openbsd \
    /bin/netcat:/bin/nc.openbsd /bin/nc:/bin/nc.traditional /bin/netcat:/bin/nc.traditional; do
    link=${link_target%%:*} target=${link_target#*:}
    [[ -e "$dir$target" && ! -e "$dir$link" && ! -L "$dir$link" ]] && ln -s "$target" "$dir$link"
  done
  for jdk in "$dir"/usr/lib/jvm/*/bin/java; do
    [[ -x "$jdk" ]] || continue
    jdk=${jdk#"$dir"}; jdk=${jdk%/java}
    for link in java keytool; do
      [[ -e "$dir$jdk/$link" && ! -e "$dir/usr/bin/$link" ]] && ln -s "$jdk/$link" "$dir/usr/bin/$link"
    done
    break
  done
  return 0
}

# img_user DIR NAME UID [HOME]: a system user and group of the same id (what adduser in a postinst does).
img_user() {
  local dir=$1 name=$2 uid=$3 home=${4:-/nonexistent}
  grep -q "^$name:" "$dir/etc/passwd" || echo "$name:x:$uid:$uid::$home:/usr/sbin/nologin" >>"$dir/etc/passwd"
  grep -q "^$name:" "$dir/etc/group" || echo "$name:x:$uid:" >>"$dir/etc/group"
}

# img_strip_docs DIR: what no container reads (man pages, docs, locales but C).
img_strip_docs() {
  rm -rf "$1"/usr/share/{doc,man,info,lintian,linda} "$1"/usr/share/locale/*
}

# img_stamp NAME INPUT…: true when <name>.tar exists and was built from the same inputs
# (the contents of the given files and strings).
img_fresh() {
  local name=$1; shift
  local want; want=$( { cat "$IMG_ROOT/scripts/images/lib.sh" "$OCI_PY"; printf '%s\n' "$@"; } | sha256sum | cut -c1-64)
  IMG_WANT_STAMP=$want
  [[ -f "$IMAGES_DIR/$name.tar" && "$(cat "$IMAGES_DIR/$name.stamp" 2>/dev/null)" == "$want" ]]
}

# img_begin NAME PKG…: how every image script starts. When $IMAGES_DIR/NAME.tar is fresh (built from
# the same calling script, the files in IMG_INPUTS and the same package list) it prints that path and
# exits the script; else it sets R to a new root filesystem (removed when the script exits) holding
# the packages' closure without documentation.
img_begin() {
  local name=$1; shift
  local inputs; inputs="$(cat "${BASH_SOURCE[1]}" ${IMG_INPUTS:-})"
  if img_fresh "$name" "$inputs" "$*"; then
    echo "$IMAGES_DIR/$name.tar"
    exit 0
  fi
  IMG_WORK=$(mktemp -d)
  trap 'rm -rf "$IMG_WORK"' EXIT
  R="$IMG_WORK/rootfs"
  img_rootfs "$R" "$@"
  img_strip_docs "$R"
}

# img_pack NAME ROOTFS OCI_ARGS…: writes $IMAGES_DIR/NAME.tar and its stamp; prints the archive path.
img_pack() {
  local name=$1 rootfs=$2; shift 2
  python3 "$OCI_PY" "$IMAGES_DIR/$name.tar" --rootfs "$rootfs" "$@" >/dev/null
  echo "$IMG_WANT_STAMP" >"$IMAGES_DIR/$name.stamp"
  img_log "$name: $(du -h "$IMAGES_DIR/$name.tar" | cut -f1) $IMAGES_DIR/$name.tar"
  echo "$IMAGES_DIR/$name.tar"
}
