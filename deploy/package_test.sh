#!/usr/bin/env bash
# shellcheck disable=SC2317  # cleanup is called from a trap
# The .deb end to end, on this machine (CI runs as root on a throwaway machine):
#  1. cpack builds it from BUILD_DIR; its files, Depends (dpkg-shlibdeps) and conffiles are checked;
#  2. dpkg -i installs it: the system user imhash, /var/lib/imhash (imhash, 0700), units installed
#     but not enabled; `systemd-analyze verify` passes on the installed units;
#  3. installing it again (dpkg's upgrade path) keeps an edited config file;
#  4. the installed binaries run as the units' ExecStart= says (as the user imhash, with the
#     installed config files; the ports moved to loopback port 0 with flags, which win over the
#     files): a config server, hash server hash1 (/etc/imhash/hash1.conf, as docs/operations.md
#     says) and a login server; imctl adds hash1, status shows them converged, udp_sim --verify
#     passes through the login server, SIGHUP leaves them running, SIGTERM stops them cleanly;
#  5. dpkg -r keeps the config files; dpkg --purge removes them, the state and the user.
# usage: package_test.sh BUILD_DIR
# Exit: 0 pass, 1 fail, 77 skipped (not root, a tool missing, imhash already installed here).
set -u

[[ $# -eq 1 ]] || { echo "usage: $0 BUILD_DIR" >&2; exit 64; }
BUILD=$1

export TEST_NAME=package_test
# shellcheck source=tests/shell/test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/shell/test_lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root to install the package with dpkg (running as uid $(id -u))"
for tool in dpkg dpkg-deb dpkg-shlibdeps cpack systemd-analyze setpriv jq; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (scripts/setup.sh installs it)"
done
if dpkg-query -W -f='${Status}' imhash 2>/dev/null | grep -q "ok installed"; then
  skip "the package imhash is installed on this machine: the test would replace and purge it"
fi
[[ -e /var/lib/imhash ]] && skip "/var/lib/imhash exists (a config server's state?): purge would delete it"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/imhash_package.XXXXXX")
chmod 755 "$WORK"  # the daemons run as imhash and write their output here
PIDS=()
INSTALLED=0
cleanup() {
  local rc=$?
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  done
  if [[ $INSTALLED -eq 1 ]]; then
    rm -f /etc/imhash/hash1.conf
    dpkg --purge imhash >"$WORK/purge.log" 2>&1 || { echo "dpkg --purge failed:"; cat "$WORK/purge.log"; }
  fi
  if [[ $rc -ne 0 && $rc -ne 77 ]]; then
    for f in "$WORK"/*.err "$WORK"/*.log; do
      [[ -f $f ]] || continue
      echo "---- last lines of $(basename "$f")"
      tail -n 20 "$f"
    done
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "FAIL: interrupted or out of time"; exit 1' INT TERM

# --- 1. build the package and look inside -------------------------------------------------------
log "cpack -G DEB in $BUILD"
(cd "$BUILD" && timeout 300 cpack -G DEB -B "$WORK/pkg") >"$WORK/cpack.log" 2>&1 ||
  fail "cpack failed: $(tail -n 20 "$WORK/cpack.log")"
DEB=$(ls "$WORK"/pkg/imhash_*.deb 2>/dev/null | head -n 1)
[[ -f $DEB ]] || fail "cpack made no imhash_*.deb: $(ls "$WORK/pkg")"
log "$(basename "$DEB"): dpkg -c"
dpkg -c "$DEB" | awk '{print "   " $1, $2, $6}'
contents=$(dpkg -c "$DEB" | awk '{print $6}')
for f in ./usr/bin/config_server ./usr/bin/imctl ./usr/bin/hash_server ./usr/bin/login_server \
  ./usr/bin/udp_sim ./usr/lib/systemd/system/imhash-config.service \
  ./usr/lib/systemd/system/imhash-hash@.service ./usr/lib/systemd/system/imhash-login.service \
  ./etc/imhash/config_server.conf ./etc/imhash/hash_server.conf ./etc/imhash/login_server.conf \
  ./usr/share/doc/imhash/README.md ./usr/share/doc/imhash/docs/operations.md \
  ./usr/share/imhash/prometheus/alerts.yml ./usr/share/imhash/grafana/imhash.json; do
  grep -qxF "$f" <<<"$contents" || fail "the package lacks $f"
done
depends=$(dpkg-deb -f "$DEB" Depends)
log "Depends: $depends"
for d in adduser libc6 libsystemd0 libboost-json libboost-program-options libspdlog libfmt libssl; do
  [[ $depends == *"$d"* ]] || fail "Depends lacks $d (dpkg-shlibdeps?)"
done
conffiles=$(dpkg-deb -I "$DEB" conffiles)
log "conffiles: $(echo $conffiles)"
[[ $(wc -l <<<"$conffiles") -eq 3 && $conffiles == *"/etc/imhash/login_server.conf"* ]] ||
  fail "conffiles: $conffiles"

# --- 2. install -------------------------------------------------------------------------------
log "dpkg -i"
INSTALLED=1
dpkg -i "$DEB" >"$WORK/install.log" 2>&1 || fail "dpkg -i failed: $(cat "$WORK/install.log")"
uid=$(id -u imhash 2>/dev/null) || fail "no user imhash after install"
[[ $uid -lt 1000 ]] || fail "imhash is not a system user (uid $uid)"
[[ $(stat -c '%U %G %a' /var/lib/imhash) == "imhash imhash 700" ]] ||
  fail "/var/lib/imhash: $(stat -c '%U %G %a' /var/lib/imhash)"
ls /etc/systemd/system/*.wants/imhash-* >/dev/null 2>&1 && fail "the package enabled a unit"
grep -q "^ExecStart=/usr/bin/config_server --config-file /etc/imhash/config_server.conf " \
  /usr/lib/systemd/system/imhash-config.service || fail "the config unit does not name /usr/bin, /etc/imhash"
[[ $(stat -c '%U %G %a' /etc/imhash/cluster.key 2>/dev/null) == "root imhash 640" ]] ||
  fail "/etc/imhash/cluster.key: $(stat -c '%U %G %a' /etc/imhash/cluster.key 2>&1)"
grep -Eq '^[0-9a-f]{64}$' /etc/imhash/cluster.key || fail "/etc/imhash/cluster.key is not 64 hex digits"
KEY_SUM=$(sha256sum </etc/imhash/cluster.key)
for conf in config_server hash_server login_server; do
  grep -q '^cluster-key-file = /etc/imhash/cluster.key$' "/etc/imhash/$conf.conf" ||
    fail "$conf.conf does not use the cluster key"
done
log "user imhash (uid $uid), /var/lib/imhash imhash:imhash 0700, a cluster key root:imhash 0640 that every config file uses, units installed, none enabled"

log "systemd-analyze verify"
UNITS=(/usr/lib/systemd/system/imhash-config.service /usr/lib/systemd/system/imhash-login.service
  /usr/lib/systemd/system/imhash-hash@.service)
# From /, so that no file of the current directory is taken for a unit; verify loads the template
# as an instance of it (imhash-hash@i.service), checking ExecStart= and Documentation= exist.
if ! (cd / && systemd-analyze verify "${UNITS[@]}") >"$WORK/verify.log" 2>&1; then
  fail "systemd-analyze verify: $(cat "$WORK/verify.log")"
fi
if grep -i "imhash" "$WORK/verify.log"; then fail "systemd-analyze verify warns about our units"; fi
log "systemd-analyze verify: exit 0, nothing about imhash's units$([[ -s $WORK/verify.log ]] && echo " (other output: $(tr '\n' ' ' <"$WORK/verify.log"))")"

# --- 3. an edited conffile survives an upgrade ----------------------------------------------------
echo "# edited by package_test" >>/etc/imhash/login_server.conf
dpkg -i "$DEB" >"$WORK/upgrade.log" 2>&1 || fail "dpkg -i (again) failed: $(cat "$WORK/upgrade.log")"
grep -q "edited by package_test" /etc/imhash/login_server.conf ||
  fail "installing again replaced the edited /etc/imhash/login_server.conf"
[[ $(sha256sum </etc/imhash/cluster.key) == "$KEY_SUM" ]] || fail "installing again replaced the cluster key"
log "installed again (upgrade path): the edited login_server.conf and the cluster key were kept"

# --- 4. the installed daemons, started as the units would start them -----------------------------
cp /etc/imhash/hash_server.conf /etc/imhash/hash1.conf  # what an instance needs (operations.md §2)
exec_start() {  # exec_start UNIT INSTANCE: the unit's ExecStart= with %i and $STATE_DIRECTORY filled
  sed -n 's/^ExecStart=//p' "$1" | sed "s/%i/$2/g; s|\${STATE_DIRECTORY}|/var/lib/imhash|g"
}
start() {  # start NAME UNIT INSTANCE EXTRA_FLAGS...: runs it as User=imhash with the unit's UMask
  local name=$1 unit=$2 instance=$3
  shift 3
  local cmd
  read -r -a cmd <<<"$(exec_start "$unit" "$instance")"
  (umask 0077 && cd / && exec setpriv --reuid=imhash --regid=imhash --init-groups -- \
    "${cmd[@]}" "$@") >"$WORK/$name.out" 2>"$WORK/$name.err" &
  PIDS+=($!)
}
wait_listening() { wait_lines "$WORK/$1.out" "^listening on" "$2"; }  # wait_listening NAME COUNT
addr() { sed -n "s/^listening on //p" "$WORK/$1.out" | sed -n "${2}p"; }

start config "${UNITS[0]}" "" --listen 127.0.0.1:0 --admin 127.0.0.1:0 --heartbeat-ms 200
wait_listening config 2
CONFIG=$(addr config 1) ADMIN=$(addr config 2)
start hash1 "${UNITS[2]}" hash1 --listen 127.0.0.1:0 --config "$CONFIG" --shards 2
wait_listening hash1 1
imctl() { /usr/bin/imctl --admin "$ADMIN" "$@"; }
added=0
for _ in $(seq 1 100); do  # until hash1 has registered
  if imctl server add hash1 >"$WORK/imctl.log" 2>&1; then added=1; break; fi
  sleep 0.1
done
[[ $added -eq 1 ]] || fail "imctl server add hash1: $(cat "$WORK/imctl.log")"
start login "${UNITS[1]}" "" --udp 127.0.0.1:0 --config "$CONFIG" --threads 1 --rate-limit 0
wait_listening login 1
LOGIN=$(addr login 1)
converged=0
for _ in $(seq 1 100); do
  if imctl --json status | jq -e '.converged and ([.nodes[] | select(.state == "up")] | length) == 2' \
    >/dev/null 2>&1; then
    converged=1
    break
  fi
  sleep 0.1
done
[[ $converged -eq 1 ]] || fail "not converged: $(imctl status 2>&1)"
imctl status | sed 's/^/   /'
[[ -n $(find /var/lib/imhash -mindepth 1 -user imhash) ]] || fail "no state written to /var/lib/imhash"
# state-dir = /var/lib/imhash in the shipped hash and login config files: each keeps its table.
# The login server has no name in the shipped file: login-HOST-PORT, its UDP port chosen at bind.
login_name="login-$(hostname | cut -d. -f1 | tr -c 'A-Za-z0-9_\n-' '-')-${LOGIN##*:}"
for saved in hash-hash1 "login-$login_name"; do
  [[ -f /var/lib/imhash/$saved.table.json ]] || fail "no saved table /var/lib/imhash/$saved.table.json"
done

out=$(timeout 60 /usr/bin/udp_sim --target "$LOGIN" --users 2000 --duration 2 --verify --json \
  --log-level warn 2>"$WORK/udp_sim.err") || fail "udp_sim --verify through the installed login server failed"
echo "$out" | jq -c '{requests, replies, status, verify: .verify.result}'
[[ $(echo "$out" | jq -r .verify.result) == pass ]] || fail "udp_sim --verify did not pass"

for pid in "${PIDS[@]}"; do kill -HUP "$pid"; done
imctl status >/dev/null || fail "imctl status failed after SIGHUP"
for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null || fail "a daemon died of SIGHUP (pid $pid)"; done
for pid in "${PIDS[@]}"; do
  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  [[ $rc -eq 0 ]] || fail "a daemon exited $rc on SIGTERM (pid $pid)"
done
PIDS=()
log "installed daemons, their links proving the cluster key, served (udp_sim --verify pass), lived through SIGHUP, stopped cleanly"

# --- 5. remove, then purge -------------------------------------------------------------------
dpkg -r imhash >"$WORK/remove.log" 2>&1 || fail "dpkg -r failed: $(cat "$WORK/remove.log")"
[[ ! -e /usr/bin/hash_server && -f /etc/imhash/login_server.conf && -d /var/lib/imhash ]] ||
  fail "dpkg -r: binaries left, or config or state gone"
rm -f /etc/imhash/hash1.conf
dpkg --purge imhash >"$WORK/purge.log" 2>&1 || fail "dpkg --purge failed: $(cat "$WORK/purge.log")"
INSTALLED=0
[[ ! -e /etc/imhash/login_server.conf && ! -e /etc/imhash/cluster.key && ! -e /var/lib/imhash ]] ||
  fail "purge left config, key or state"
getent passwd imhash >/dev/null && fail "purge left the user imhash"
log "dpkg -r kept the config files and state; dpkg --purge removed them and the user"
echo "PASSED"
exit 0
