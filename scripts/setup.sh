#!/usr/bin/env bash
# Installs every build and test dependency of imhash on Debian 12. Idempotent and quiet when all is
# present. Run as root (or with sudo available). Usage: scripts/setup.sh [--bench]
#   --bench  also install what scripts/bench.sh compares against (redis-server, redis-tools)
set -euo pipefail

packages=(
  cmake ninja-build g++ clang libclang-rt-14-dev
  libboost1.81-dev libboost-program-options1.81-dev libboost-json1.81-dev
  libspdlog-dev doctest-dev libssl-dev
  iproute2 procps
  chromium  # the status page test loads the config server's page in headless Chromium
)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(redis-server redis-tools bc python3)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup.sh: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "setup.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
