#!/usr/bin/env bash
# The whole imhash system on this machine, on loopback: a config server, three hash servers and a
# login server; a simulated load of 50,000 users (udp_sim --verify) runs while a range of users is
# reassigned live, a fourth hash server joins, and the old copies are purged. Then every user gets a
# second copy (imctl replicas 2), and under a second verified load one hash server is killed with
# kill -9 and restarted empty. Prints what happened, then stops everything it started. Installs and
# builds what is missing (Debian 12, as root).
set -euo pipefail
# --help: the comment above.
[[ "${1:-}" == --help || "${1:-}" == -h ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | grep -v '^shellcheck'; exit 0; }
source "$(dirname "$0")/lib.sh"

work=$(mktemp -d /tmp/imhash-demo.XXXXXX)
trap 'stop_all; echo; echo "logs: $work"' EXIT

# Bold headings on a terminal only: piped or redirected, plain text (no escape codes in a file).
if [[ -t 1 ]]; then
  say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  say() { printf '\n== %s\n' "$*"; }
fi
imctl() { "$IMHASH_BUILD/imctl/imctl" --admin "$ADMIN" "$@"; }
records_of() { imctl --json servers | grep -o "\"name\":\"$1\"[^}]*\"records\":[0-9]*" | grep -o '[0-9]*$' || echo 0; }

say "Building (first run: installs packages and compiles, a few minutes)"
build_release

say "Starting a config server, three hash servers and a login server on 127.0.0.1"
# One cluster key for every daemon: each internal link proves it both ways (docs/security.md §5).
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$work/cluster.key")
KEY=(--cluster-key-file "$work/cluster.key")
start_config_server "$work" --heartbeat-ms 250 --grace-ms 10000 --initial-mode range "${KEY[@]}"
CONFIG=$CONFIG_ADDR ADMIN=$ADMIN_ADDR
echo "config server: nodes dial $CONFIG (proving the cluster key $work/cluster.key), admin API on http://$ADMIN"

HASH_PID=() HASH_ADDR=()
# start_hash N [LOG [ADDRESS]]: hash server hashN, its output in LOG.out/.log (default hashN),
# listening on ADDRESS (default a free port).
start_hash() {
  start_daemon "${2:-hash$1}" "$work" "$IMHASH_BUILD/hash_server/hash_server" \
    --listen "${3:-127.0.0.1:0}" --name "hash$1" --shards 1 --config "$CONFIG" "${KEY[@]}"
  HASH_PID[$1]=$DAEMON_PID HASH_ADDR[$1]=$LISTEN_ADDR
  echo "hash$1: $LISTEN_ADDR"
  wait_registered "$ADMIN" "hash$1" || true
}
for i in 1 2 3; do start_hash "$i"; done
imctl server add hash1 hash2 hash3
# --rate-limit 0: the simulator sends all 50,000 users from one address, 127.0.0.1.
start_daemon login "$work" "$IMHASH_BUILD/login_server/login_server" --udp 127.0.0.1:0 --rate-limit 0 \
  --config "$CONFIG" --threads 1 --name login1 "${KEY[@]}"
LOGIN=$LISTEN_ADDR
echo "login server: clients send UDP to $LOGIN"
sleep 0.5
imctl status

say "Load: 50,000 simulated users for 14 s (udp_sim --verify checks every lookup)"
# start_load OUT: 50,000 verified users for 14 s in the background, the summary in OUT; sets SIM.
start_load() {
  "$IMHASH_BUILD/tools/udp_sim/udp_sim" --target "$LOGIN" --users 50000 --duration 14 --window 32 \
    --verify --log-level warn >"$1" 2>&1 &
  SIM=$!
  STARTED_PIDS+=($SIM)
}
start_load "$work/udp_sim.out"
sleep 3
before1=$(records_of hash1)
echo "users 1..50000 all live in hash1's range: hash1 holds $before1 records"
tail -n 1 "$work/udp_sim.out"

say "Live change 1: ids 1-25000 move from hash1 to hash2 (imctl assign 1-25000 hash2)"
imctl assign 1-25000 hash2
sleep 3
tail -n 1 "$work/udp_sim.out"
echo "hash1 streamed the records of ids 1-25000 to hash2 (imctl stream status):"
imctl stream status

say "Live change 2: a fourth hash server joins and takes ids 25001-40000"
start_hash 4
imctl server add hash4
imctl assign 25001-40000 hash4
sleep 2
imctl status

say "Waiting for the load to finish"
wait "$SIM" && sim_rc=0 || sim_rc=$?
sed -n '/^udp_sim summary/,$p' "$work/udp_sim.out"

say "Old copies: hash1 still holds records of users it no longer owns; purging them"
echo "records before the purge: hash1 $(records_of hash1)  hash2 $(records_of hash2)  hash4 $(records_of hash4)"
# The config server purges by itself once every node runs the new table and the grace period has
# passed; asking for it explicitly shows the command operators use.
imctl purge hash1 --not-owned
sleep 0.6
for _ in $(seq 1 100); do
  imctl --json purge hash1 --status | grep -q '"state":"running"' || break
  sleep 0.2
done
imctl purge hash1 --status
echo "records after the purge:  hash1 $(records_of hash1)  hash2 $(records_of hash2)  hash4 $(records_of hash4)"
imctl servers
imctl history --limit 5

failed_of() { grep -o 'verify_failed [0-9]*' "$1" | head -n 1 | grep -o '[0-9]*$' || echo "?"; }
failed1=$(failed_of "$work/udp_sim.out")

say "Replicas: every user gets a second copy on another hash server (imctl replicas 2)"
imctl replicas 2
# The new copies stream from the servers that hold the records (imctl stream status).
for _ in $(seq 1 100); do
  imctl --json stream status | grep -q '"state":"running"' || break
  sleep 0.2
done
imctl where 12345

say "Load again: 50,000 users for 14 s; after 4 s hash2 is killed with kill -9"
start_load "$work/udp_sim2.out"
sleep 4
# (wait: reaped here, so the shell does not report the kill as a failed job)
{ kill -9 "${HASH_PID[2]}" && wait "${HASH_PID[2]}"; } 2>/dev/null || true
echo "kill -9 hash2 (pid ${HASH_PID[2]}): its users' lookups go to their second copy"
sleep 3
tail -n 1 "$work/udp_sim2.out"

say "hash2 restarts empty on its old address and is refilled from its peers"
start_hash 2 hash2-restarted "${HASH_ADDR[2]}"
sleep 0.5  # it registers, and the config server starts its refill
for _ in $(seq 1 100); do
  imctl --json status | grep -q '"refills":\[\]' && break
  sleep 0.1
done
echo "hash2 holds $(records_of hash2) records again"
imctl servers
wait "$SIM" && sim2_rc=0 || sim2_rc=$?
sed -n '/^udp_sim summary/,$p' "$work/udp_sim2.out"
failed2=$(failed_of "$work/udp_sim2.out")

say "Result"
echo "table versions: $(imctl --json status | grep -o '"version":[0-9]*' | head -n 1 | cut -d: -f2), every node converged: $(imctl --json status | grep -o '"converged":[a-z]*' | cut -d: -f2)"
echo "while ranges moved and a server joined: lookups of logged-in users that failed: $failed1"
echo "while hash2 was killed and refilled:    lookups of logged-in users that failed: $failed2"
[[ $sim_rc -eq 0 && "$failed1" == 0 ]] || { echo "FAIL (first load: udp_sim exit $sim_rc)"; exit 1; }
[[ $sim2_rc -eq 0 && "$failed2" == 0 ]] || { echo "FAIL (second load: udp_sim exit $sim2_rc)"; exit 1; }
echo "lookups of logged-in users that failed: 0"
echo "PASS: no lookup lost while ranges moved, a server joined, and a server was killed and refilled"
