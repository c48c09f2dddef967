#!/usr/bin/env bash
# chatsite's images built on a host with Debian's packages and no image registry:
#   deploy/images.sh                 # base images (when missing), wheelhouse, chatsite-web, chatsite-cpu
#   deploy/images.sh --rebuild-bases # make the base images again too
# 1) chatsite-base-{python,postgres,redis}:bookworm from debootstrap (deploy/base_images.sh);
# 2) the wheelhouse from this host's pip (deploy/wheelhouse.sh), packed as the image chatsite-wheelhouse;
# 3) chatsite-web and chatsite-cpu from deploy/docker/Dockerfile.cpu, BASE_IMAGE and WHEELS set to those.
# Builds use the host's network (the engine runs with no bridge, deploy/dockerd.sh): only the worker
# stage's apt-get reads the network, from the Debian mirror. Each image's size and build time go to
# stdout and to var/log/images.md (deploy/smoke.py copies them into its report).
set -euo pipefail
cd "$(dirname "$0")/.."
export DOCKER_BUILDKIT=0  # the engine's own builder: BuildKit would fetch its frontend from a registry
TAG=${CHATSITE_TAG:-latest}
BASE=${CHATSITE_BASE_IMAGE:-chatsite-base-python:bookworm}
WHEELHOUSE=${CHATSITE_WHEELHOUSE:-var/wheelhouse}
REPORT=var/log/images.md
mkdir -p var/log
ROWS=()

size_of() { docker image inspect -f '{{.Size}}' "$1" | awk '{printf "%.0f MB", $1 / 1e6}'; }
timed() {  # $1 label, $2 image, then the command
  local label=$1 image=$2 started
  shift 2
  started=$(date +%s)
  "$@"
  ROWS+=("| $label | \`$image\` | $(size_of "$image") | $(( $(date +%s) - started )) s |")
}

bases=(python postgres redis)
[ "${1:-}" = --rebuild-bases ] || bases=($(for b in "${bases[@]}"; do
  docker image inspect "chatsite-base-$b:bookworm" >/dev/null 2>&1 || echo "$b"; done))
for b in "${bases[@]}"; do
  timed "base ($b, debootstrap)" "chatsite-base-$b:bookworm" deploy/base_images.sh "$b"
done

pack_wheels() {  # the host's wheels as an image holding them under /wheels
  deploy/wheelhouse.sh "$WHEELHOUSE"
  local dockerfile
  dockerfile=$(mktemp)
  printf 'FROM scratch\nCOPY . /wheels/\n' > "$dockerfile"
  docker build -q -t chatsite-wheelhouse -f "$dockerfile" "$WHEELHOUSE" >/dev/null
  rm -f "$dockerfile"
}
timed "wheelhouse (this host's pip)" chatsite-wheelhouse pack_wheels

for target in web worker; do
  image=$([ $target = web ] && echo chatsite-web || echo chatsite-cpu):$TAG
  echo "==> building $image (target $target, FROM $BASE, wheels from chatsite-wheelhouse)"
  timed "$target (Dockerfile.cpu)" "$image" docker build --network host -f deploy/docker/Dockerfile.cpu \
    --target "$target" --build-arg BASE_IMAGE="$BASE" --build-arg WHEELS=chatsite-wheelhouse -t "$image" . \
    > "var/log/image-$target.log"
done

{
  echo "Images built $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores by deploy/images.sh:"
  echo
  echo "| step | image | size | build time |"
  echo "|---|---|---|---|"
  printf '%s\n' "${ROWS[@]}"
} | tee "$REPORT"
