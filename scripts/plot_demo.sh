#!/usr/bin/env bash
# A short version of scripts/demo.sh that draws its picture: a config server, three hash servers
# and a login server on 127.0.0.1 (no rate limit: every simulated user shares one address);
# udp_sim --verify --csv runs 12 s of load; at 3 s ids 1-25000
# move from hash1 to hash2 (imctl assign), at 6 s a fourth hash server joins and takes ids
# 25001-40000. Then scripts/plot.sh draws throughput and p99 with both moments marked.
#
#   scripts/plot_demo.sh [OUT.png]      (default: docs/live_reassignment.png)
#
# Uses the binaries in build/ (IMHASH_BUILD), building them first unless IMHASH_NO_BUILD=1.
set -euo pipefail
# --help: the comment above.
[[ "${1:-}" == --help || "${1:-}" == -h ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | grep -v '^shellcheck'; exit 0; }
source "$(dirname "$0")/lib.sh"
out=${1:-$IMHASH_ROOT/docs/live_reassignment.png}

work=$(mktemp -d /tmp/imhash-plot.XXXXXX)
trap 'stop_all; echo "logs: $work"' EXIT
imctl() { "$IMHASH_BUILD/imctl/imctl" --admin "$ADMIN" "$@"; }

build_release

start_config_server "$work" --heartbeat-ms 250 --grace-ms 10000 --initial-mode range
CONFIG=$CONFIG_ADDR ADMIN=$ADMIN_ADDR

start_hash() {
  start_daemon "hash$1" "$work" "$IMHASH_BUILD/hash_server/hash_server" --listen 127.0.0.1:0 \
    --name "hash$1" --shards 1 --config "$CONFIG"
  wait_registered "$ADMIN" "hash$1" || true
}
for i in 1 2 3; do start_hash "$i"; done
imctl server add hash1 hash2 hash3
start_daemon login "$work" "$IMHASH_BUILD/login_server/login_server" --udp 127.0.0.1:0 \
  --config "$CONFIG" --threads 1 --name login1 --rate-limit 0
LOGIN=$LISTEN_ADDR
sleep 0.5

# The moments are measured from udp_sim's start, as its elapsed_s column is.
"$IMHASH_BUILD/tools/udp_sim/udp_sim" --target "$LOGIN" --users 50000 --duration 12 --window 32 \
  --verify --csv "$work/run.csv" --log-level warn >"$work/udp_sim.out" 2>&1 &
SIM=$!
STARTED_PIDS+=($SIM)
t0=$(date +%s.%N)
since() { echo "$(date +%s.%N) $t0" | awk '{printf "%.1f", $1 - $2}'; }
sleep 3
t_assign=$(since)
imctl assign 1-25000 hash2
sleep 3
t_join=$(since)
start_hash 4
imctl server add hash4
imctl assign 25001-40000 hash4
wait "$SIM" && sim_rc=0 || sim_rc=$?
sed -n '/^udp_sim summary/,$p' "$work/udp_sim.out"
failed=$(grep -o 'verify_failed [0-9]*' "$work/udp_sim.out" | head -n 1 | grep -o '[0-9]*$' || echo "?")

"$IMHASH_ROOT/scripts/plot.sh" "$work/run.csv" "$out" \
  --title "live reassignment under load: 50,000 users, lookups of logged-in users that failed: $failed" \
  --mark "$t_assign:imctl assign 1-25000 hash2" --mark "$t_join:hash4 joins (server add, assign 25001-40000)"
[[ $sim_rc -eq 0 && $failed == 0 ]] || { echo "udp_sim exit $sim_rc, verify_failed $failed" >&2; exit 1; }
