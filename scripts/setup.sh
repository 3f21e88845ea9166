#!/usr/bin/env bash
# Installs every build and test dependency of imhash on Debian 12. Idempotent and quiet when all is
# present. Run as root (or with sudo available). Usage: scripts/setup.sh [--bench]
#   --bench  also install what scripts/bench compares against (redis-server, redis-tools)
set -euo pipefail
# --help: the comment above.
[[ "${1:-}" == --help || "${1:-}" == -h ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | grep -v '^shellcheck'; exit 0; }

packages=(
  cmake ninja-build g++ clang libclang-rt-14-dev
  lld  # ld.lld, the sanitizer tree's linker: a third of GNU ld's time on its test binaries
  libboost1.81-dev libboost-program-options1.81-dev libboost-json1.81-dev
  libspdlog-dev doctest-dev libssl-dev
  openssl  # openssl(1): the TLS tests and the bench make their certificates with it
  libsystemd-dev pkgconf  # sd_notify(3): the daemons tell systemd when they are ready
  iproute2 procps jq
  chromium  # the status page test loads the config server's page in headless Chromium
  prometheus  # the observability test scrapes every daemon; promtool checks metrics and alerts
  dpkg-dev file adduser systemd  # the package test: cpack's dpkg-shlibdeps, dpkg -i, systemd-analyze
  etcd-server  # the etcd control plane's tests run a 3-member etcd on loopback
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
apt=(env DEBIAN_FRONTEND=noninteractive apt-get)  # through sudo too, which drops the environment
# Quiet unless it fails (apt and debconf chatter on stderr too), then everything it said.
if ! out=$($sudo "${apt[@]}" update -qq 2>&1 &&
  $sudo "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}" 2>&1); then
  echo "$out" >&2
  echo "setup.sh: installing ${missing[*]} failed" >&2
  exit 1
fi
# Debian's prometheus package starts a system-wide Prometheus on :9090 where systemd runs; the tests
# start their own (loopback, temporary directory), so one installed here is stopped and disabled.
if [[ " ${missing[*]} " == *" prometheus "* && -d /run/systemd/system ]]; then
  $sudo systemctl disable --now prometheus.service >/dev/null 2>&1 || true
fi
# The same for etcd-server's system-wide etcd on :2379 (the tests pick their own ports).
if [[ " ${missing[*]} " == *" etcd-server "* && -d /run/systemd/system ]]; then
  $sudo systemctl disable --now etcd.service >/dev/null 2>&1 || true
fi
