#!/usr/bin/env bash
# Base images from Debian's own packages, for a host that reaches a Debian mirror but no
# image registry: `debootstrap bookworm` into a folder, then `docker import`.
#   deploy/base_images.sh                    # all three
#   deploy/base_images.sh python redis       # some
# Made (tag :bookworm):
#   chatsite-base-python    Python 3.11 (python3, venv, pip, CA certificates): the Dockerfiles' BASE_IMAGE
#   chatsite-base-postgres  PostgreSQL 15 with an entrypoint that reads POSTGRES_USER/PASSWORD/DB as
#                           the official image does: compose's CHATSITE_POSTGRES_IMAGE
#   chatsite-base-redis     Redis 7.0, `redis-server` as user redis in /data: compose's CHATSITE_REDIS_IMAGE
# Needs root, `apt-get install debootstrap docker.io`, and a running engine (deploy/dockerd.sh start).
# DEBIAN_MIRROR (default: the first mirror in the host's apt sources) and DEBIAN_SECURITY_MIRROR
# choose where packages come from; downloaded packages are kept in var/debootstrap-cache.
set -euo pipefail
cd "$(dirname "$0")/.."

host_mirror() {  # the first URI of the host's deb822 apt sources whose Suites include $1
  awk -v suite="$1" 'BEGIN { RS = "" } {
    uri = ""; found = 0; n = split($0, lines, "\n")
    for (i = 1; i <= n; i++) {
      if (lines[i] ~ /^URIs:/) { split(lines[i], words, " "); uri = words[2] }
      if (lines[i] ~ /^Suites:/) { m = split(lines[i], words, " "); for (j = 2; j <= m; j++) if (words[j] == suite) found = 1 }
    }
    if (found && uri != "") { print uri; exit }
  }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true
}
MIRROR=${DEBIAN_MIRROR:-$(host_mirror bookworm)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=${DEBIAN_SECURITY_MIRROR:-$(host_mirror bookworm-security)}
SECURITY=${SECURITY:-http://deb.debian.org/debian-security}
CACHE=$PWD/var/debootstrap-cache
mkdir -p "$CACHE"

# python3-gdbm: celery beat keeps its schedule in a dbm file; without gdbm, Python falls back to ndbm,
# which has no sync(), and the file (beat's health check looks at its age) is written only at exit.
python_packages=python3,python3-venv,python3-pip,python3-gdbm,ca-certificates
postgres_packages=postgresql-15,ca-certificates
redis_packages=redis-server

# $1 name, $2 packages, then `docker import --change` lines
make_image() {
  local name=$1 packages=$2 root started
  shift 2
  started=$(date +%s)
  root=$(mktemp -d /tmp/chatsite-rootfs.XXXXXX)
  echo "==> $name: debootstrap bookworm ($packages) from $MIRROR"
  debootstrap --variant=minbase --include="$packages" --cache-dir="$CACHE" bookworm "$root" "$MIRROR" \
    > "$root.log" 2>&1 || { tail -30 "$root.log" >&2; rm -rf "$root" "$root.log"; exit 1; }
  cat > "$root/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECURITY bookworm-security main
EOF
  customize_"$name" "$root"
  # Leave out what an image does not need: package caches and lists, logs, man pages.
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log \
    "$root"/usr/share/man/* "$root"/usr/share/doc/* "$root"/tmp/* "$root"/root/.cache
  tar --numeric-owner -C "$root" -c . | docker import "$@" - "chatsite-base-$name:bookworm" >/dev/null
  rm -rf "$root" "$root.log"
  echo "==> chatsite-base-$name:bookworm: $(docker image inspect -f '{{.Size}}' "chatsite-base-$name:bookworm" \
    | awk '{printf "%.0f MB", $1 / 1e6}'), made in $(( $(date +%s) - started )) s"
}

customize_python() { :; }

customize_postgres() {
  # The package made a cluster of its own at install: the entrypoint makes one under PGDATA instead.
  rm -rf "$1"/var/lib/postgresql/15 "$1"/etc/postgresql/15
  install -m 755 deploy/docker/postgres-entrypoint.sh "$1/usr/local/bin/docker-entrypoint.sh"
  mkdir -p "$1/var/lib/postgresql/data" "$1/var/run/postgresql"
  chroot "$1" chown postgres:postgres /var/lib/postgresql/data /var/run/postgresql
}

customize_redis() {
  mkdir -p "$1/data"
  chroot "$1" chown redis:redis /data
}

PATH_ENV="ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NAMES=("$@")
[ ${#NAMES[@]} -gt 0 ] || NAMES=(python postgres redis)
for name in "${NAMES[@]}"; do
  case "$name" in
    python) make_image python "$python_packages" -c "$PATH_ENV" -c "ENV LANG=C.UTF-8" -c 'CMD ["python3"]' ;;
    postgres) make_image postgres "$postgres_packages" \
      -c "ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
      -c "ENV LANG=C.UTF-8" -c "ENV PGDATA=/var/lib/postgresql/data" -c "EXPOSE 5432" \
      -c 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' -c 'CMD ["postgres"]' ;;
    redis) make_image redis "$redis_packages" -c "$PATH_ENV" -c "USER redis" -c "WORKDIR /data" \
      -c "EXPOSE 6379" -c 'CMD ["redis-server"]' ;;
    *) echo "unknown base image $name (python, postgres, redis)" >&2; exit 2 ;;
  esac
done
