#!/usr/bin/env bash
# The wheelhouse an offline image build installs from: every wheel requirements-cpu.txt needs
# (requirements.txt included), fetched or built by this host's pip. The image then gets exactly
# what the host would install: on this kind of machine the CPU build of torch from the host's
# local file (PIP_FIND_LINKS), not the multi-GB CUDA build PyPI resolves to.
#   deploy/wheelhouse.sh [DIR]      # default var/wheelhouse (outside every build context)
#   WHEELHOUSE_PYTHON=python3.11 deploy/wheelhouse.sh   # for a base image whose Python is not the host's /usr/bin/python3
# deploy/images.sh packs DIR into the image chatsite-wheelhouse, which the Dockerfiles' WHEELS
# argument names; without it they install from the package index.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-${CHATSITE_WHEELHOUSE:-var/wheelhouse}}
# Resolved by the interpreter the image runs, so that markers on its exact version hold: Debian
# bookworm's python3 is 3.11.2, and redis needs async-timeout below 3.11.3, which a newer host
# Python would leave out. The host's pip configuration (indexes, find-links, certificates) applies.
PYTHON=${WHEELHOUSE_PYTHON:-/usr/bin/python3}
mkdir -p "$DIR"
started=$(date +%s)
VENV=$(mktemp -d /tmp/chatsite-wheelhouse-pip.XXXXXX)
trap 'rm -rf "$VENV"' EXIT
"$PYTHON" -m venv "$VENV"
echo "==> filling $DIR from requirements-cpu.txt with the pip of $("$PYTHON" -V 2>&1) ($PYTHON)"
"$VENV/bin/pip" wheel --quiet --wheel-dir "$DIR" -r requirements-cpu.txt
echo "==> $DIR: $(find "$DIR" -name '*.whl' | wc -l) wheels, $(du -sh "$DIR" | cut -f1), in $(( $(date +%s) - started )) s"
