#!/usr/bin/env bash
# shellcheck disable=SC2317  # cleanup and the helpers are called from traps and poll()
# Several hosts (issue 5): every program in its own network namespace, joined by veth pairs to a
# bridge in a hub namespace, on 10.77.N.0/24 addresses that exist only inside these namespaces (the
# root namespace gets no interface, route or address: no packet can leave the test's hosts).
#
#   cfg 10.77.N.1   hash1 .11   hash2 .12   login .20   client .30 (tc netem loss + delay)
#
# Loss and delay (5%, 20ms±5ms, each direction) come from tc netem on the client's link; where the
# kernel has no sch_netem, from tools/lossy_relay run in the client namespace for step 1 (udp_sim
# sends to it on 127.0.0.1 there, it relays to the login server); steps 2 and 3 then go direct.
#
# 1. udp_sim in the client namespace, with loss and delay on the client's link, passes --verify.
# 2. hash2's link is cut: the ids it owns get UNAVAILABLE, hash1's keep working.
# 3. The link comes back: hash2's ids are served again (polled, bounded).
#
# usage: netns_test.sh CONFIG_SERVER HASH_SERVER LOGIN_SERVER UDP_SIM IMCTL LOSSY_RELAY
# Exit: 0 pass, 1 fail, 77 skipped (not root, no network namespaces). A trap deletes every
# namespace and process the test made. Where netem is missing (no sch_netem module) lossy_relay
# makes the loss and delay instead, and the test says so; IMHASH_NETNS_REQUIRE_NETEM=1 makes that a
# skip.
set -u

if [[ $# -ne 6 ]]; then
  echo "usage: $0 CONFIG_SERVER HASH_SERVER LOGIN_SERVER UDP_SIM IMCTL LOSSY_RELAY" >&2
  exit 64
fi
CONFIG_SERVER=$1 HASH_SERVER=$2 LOGIN_SERVER=$3 UDP_SIM=$4 IMCTL=$5 LOSSY_RELAY=$6

export TEST_NAME=netns_test
# shellcheck source=tests/shell/test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../shell/test_lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root to create network namespaces (running as uid $(id -u))"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
command -v tc >/dev/null || skip "iproute2 (tc) is not installed"
command -v jq >/dev/null || skip "jq is not installed (used to read udp_sim --json)"

TAG="imh$$"
SUBNET_BYTE=$((($$ % 200) + 20))  # 10.77.X.0/24; only inside our namespaces, but vary it anyway
NET="10.77.${SUBNET_BYTE}"
NS_HUB="${TAG}-hub" NS_CFG="${TAG}-cfg" NS_H1="${TAG}-h1" NS_H2="${TAG}-h2" NS_LOGIN="${TAG}-login"
NS_CLIENT="${TAG}-client"
ALL_NS=("$NS_HUB" "$NS_CFG" "$NS_H1" "$NS_H2" "$NS_LOGIN" "$NS_CLIENT")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/imhash_netns.XXXXXX")
PIDS=()

cleanup() {
  local rc=$?
  [[ -n ${WATCHDOG:-} ]] && kill "$WATCHDOG" 2>/dev/null
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 1 20); do
    local alive=0
    for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [[ $alive -eq 0 ]] && break
    sleep 0.1
  done
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  for ns in "${ALL_NS[@]}"; do
    # Anything still inside one of our own namespaces was started by this test.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  if [[ $rc -ne 0 && $rc -ne 77 ]]; then
    for f in "$WORK"/*.log; do
      [[ -f $f ]] || continue
      echo "---- last lines of $(basename "$f")"
      tail -n 15 "$f"
    done
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "FAIL: interrupted or out of time"; exit 1' INT TERM
# A watchdog well inside ctest's TIMEOUT (which kills with no chance to clean up): on expiry the
# trap above still deletes everything (after the command in progress, itself bounded at 30 s).
(
  sleep 150 &
  sleeper=$!
  trap 'kill $sleeper 2>/dev/null; exit 0' TERM
  wait $sleeper && kill -TERM $$
) >/dev/null 2>&1 &
WATCHDOG=$!

# --- can this machine do it? -----------------------------------------------------------------
ip netns add "$NS_HUB" 2>"$WORK/err" || skip "ip netns add failed: $(cat "$WORK/err")"
ip -n "$NS_HUB" link add name br0 type bridge 2>"$WORK/err" ||
  skip "no bridge device in network namespaces: $(cat "$WORK/err")"
NETEM=1
if ! ip -n "$NS_HUB" link add name probe0 type veth peer name probe1 2>"$WORK/err"; then
  skip "no veth pairs: $(cat "$WORK/err")"
fi
if ! ip netns exec "$NS_HUB" tc qdisc add dev probe0 root netem delay 1ms 2>"$WORK/err"; then
  # Namespaces work but this kernel has no sch_netem: lossy_relay makes the same loss and delay in
  # userspace (IMHASH_NETNS_REQUIRE_NETEM=1 makes that a skip instead).
  if [[ ${IMHASH_NETNS_REQUIRE_NETEM:-0} == 1 ]]; then
    skip "tc netem is not available (kernel module sch_netem missing?): $(tr -d '\n' <"$WORK/err")"
  fi
  [[ -x $LOSSY_RELAY ]] || fail "no tc netem here and lossy_relay is not executable: $LOSSY_RELAY"
  log "NOTE: tc netem is not available here ($(tr -d '\n' <"$WORK/err")): lossy_relay in the client namespace makes the loss and delay instead"
  NETEM=0
fi
ip -n "$NS_HUB" link del probe0 2>/dev/null

# --- the hosts -----------------------------------------------------------------------------
ip -n "$NS_HUB" link set br0 up
ip -n "$NS_HUB" link set lo up
host() {  # host NS HOSTBYTE: a namespace with eth0 = $NET.HOSTBYTE/24, bridged in the hub
  local ns=$1 byte=$2 port="p${2}"
  ip netns add "$ns" || fail "ip netns add $ns"
  ip -n "$NS_HUB" link add name "$port" type veth peer name eth0 netns "$ns" || fail "veth $ns"
  ip -n "$NS_HUB" link set "$port" master br0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$NET.$byte/24" dev eth0
  ip -n "$ns" link set eth0 up
}
host "$NS_CFG" 1
host "$NS_H1" 11
host "$NS_H2" 12
host "$NS_LOGIN" 20
host "$NS_CLIENT" 30

# Every host reaches every other (bounded: the bridge may take a moment to forward).
for target in 1 11 12 20; do
  ok=0
  for _ in $(seq 1 10); do
    if ip netns exec "$NS_CLIENT" ping -c1 -W1 "$NET.$target" >/dev/null 2>&1 ||
      ip netns exec "$NS_LOGIN" bash -c "exec 3<>/dev/tcp/$NET.$target/9" 2>&1 | grep -q refused; then
      ok=1
      break
    fi
    sleep 0.2
  done
  [[ $ok -eq 1 ]] || log "warning: could not confirm $NET.$target is reachable (no ping?)"
done

if [[ $NETEM -eq 1 ]]; then
  # Loss and delay on the client's link, both directions: its eth0 (requests) and the hub's port
  # facing it (replies).
  ip netns exec "$NS_CLIENT" tc qdisc add dev eth0 root netem loss 5% delay 20ms 5ms ||
    fail "netem on the client"
  ip netns exec "$NS_HUB" tc qdisc add dev p30 root netem loss 5% delay 20ms 5ms ||
    fail "netem on the hub port of the client"
fi

# --- the programs --------------------------------------------------------------------------
start() {  # start NAME NS PROGRAM ARGS...: runs in the namespace, output in $WORK/NAME.log
  local name=$1 ns=$2
  shift 2
  ip netns exec "$ns" "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
}
wait_listening() { wait_lines "$WORK/$1.log" "listening on" "$2"; }  # wait_listening NAME COUNT
# Links between hosts prove the cluster key, and the admin API (not on loopback) needs its token:
# without them the daemons refuse these addresses (docs/security.md §5).
KEY="$WORK/cluster.key" TOKEN="$WORK/admin.token"
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$KEY" && echo "netns-test-admin-token-$$" >"$TOKEN")
imctl() { ip netns exec "$NS_CFG" "$IMCTL" --admin "$NET.1:7100" --token-file "$TOKEN" "$@"; }

start config "$NS_CFG" "$CONFIG_SERVER" --listen "$NET.1:7000" --admin "$NET.1:7100" \
  --state-dir "$WORK/state" --heartbeat-ms 200 --grace-ms 1000 --initial-mode range \
  --cluster-key-file "$KEY" --admin-token-file "$TOKEN"
wait_listening config 2
# hash1 binds every address of its host and advertises the one login servers reach it at
# (docs/operations.md §1); hash2 binds its address only.
start hash1 "$NS_H1" "$HASH_SERVER" --listen 0.0.0.0:7001 --advertise "$NET.11:7001" --name hash1 \
  --shards 2 --config "$NET.1:7000" --cluster-key-file "$KEY"
start hash2 "$NS_H2" "$HASH_SERVER" --listen "$NET.12:7001" --name hash2 --shards 2 \
  --config "$NET.1:7000" --cluster-key-file "$KEY"
wait_listening hash1 1
wait_listening hash2 1

nodes_up() {  # nodes_up COUNT [VERSION]: COUNT nodes up (and at VERSION or later)
  imctl --json status 2>/dev/null |
    jq -e --argjson n "$1" --argjson v "${2:-0}" \
      '[.nodes[] | select(.state == "up" and .version >= $v)] | length >= $n' >/dev/null
}
poll() {  # poll TRIES SLEEP COMMAND...
  local tries=$1 pause=$2
  shift 2
  for _ in $(seq 1 "$tries"); do
    "$@" && return 0
    sleep "$pause"
  done
  return 1
}
poll 100 0.1 nodes_up 2 || fail "the hash servers did not register with the config server"
imctl server add hash1 hash2 >/dev/null || fail "imctl server add"
imctl --json table | jq -e --arg a "$NET.11:7001" '.servers[] | select(.name == "hash1") | .address == $a' \
  >/dev/null || fail "hash1 is not in the table at its advertised address: $(imctl table)"
# Users 1..5000 on hash1, 5001..10000 on hash2.
imctl assign 1-5000 hash1 >/dev/null || fail "imctl assign 1-5000 hash1"
imctl assign 5001-10000 hash2 >/dev/null || fail "imctl assign 5001-10000 hash2"
VERSION=$(imctl --json status | jq -r .version)
imctl where 3 | grep -q hash1 || fail "id 3 is not on hash1: $(imctl where 3)"
imctl where 7000 | grep -q hash2 || fail "id 7000 is not on hash2: $(imctl where 7000)"

# The whole load comes from one client address: no per-source rate limit (docs/security.md).
start login "$NS_LOGIN" "$LOGIN_SERVER" --udp "$NET.20:7200" --config "$NET.1:7000" \
  --name login1 --threads 2 --timeout-ms 100 --rate-limit 0 --cluster-key-file "$KEY"
wait_listening login 1
SIM_TARGET="$NET.20:7200"
if [[ $NETEM -eq 1 ]]; then
  EMULATION="loss and delay by tc netem"
else
  # The same loss and delay as netem's, both ways, for step 1: udp_sim sends to the relay on the
  # client's own loopback, the relay sends on from the client's eth0 (so the login server sees
  # $NET.30 as with netem) and relays the replies back. Stopped after step 1.
  EMULATION="loss and delay by lossy_relay (no sch_netem in this kernel)"
  start relay "$NS_CLIENT" "$LOSSY_RELAY" --listen 127.0.0.1:7300 --target "$NET.20:7200" \
    --loss 5 --delay-ms 20 --jitter-ms 5
  RELAY_PID=${PIDS[-1]}
  wait_listening relay 1
  SIM_TARGET="127.0.0.1:7300"
fi
poll 100 0.1 nodes_up 3 "$VERSION" || fail "the nodes did not converge on version $VERSION"
log "hosts up: config $NET.1, hash1 $NET.11, hash2 $NET.12, login $NET.20, client $NET.30" \
  "(loss 5% delay 20ms±5ms both ways on the client's traffic: $EMULATION)"

sim() {  # sim FIRST USERS DURATION: udp_sim --json from the client namespace; prints the summary
  timeout 30 ip netns exec "$NS_CLIENT" "$UDP_SIM" --target "$SIM_TARGET" --first-user "$1" \
    --users "$2" --duration "$3" --window 64 --timeout-ms 250 --retries 6 --verify --json \
    --log-level warn 2>"$WORK/udp_sim.$1.$BASHPID.log"
}
field() { jq -r "$1 // 0"; }

# --- 1. loss and delay: --verify still passes --------------------------------------------------
log "step 1: $EMULATION"
# Users 4001..6000: half on each hash server, few enough to all log in at a 40 ms round trip.
out=$(sim 4001 2000 5)
rc=$?
echo "$out" | jq -c '{requests, replies, retries_sent, no_reply, abandoned, status,
  verify: .verify.result, latency_us: {p50: .latency_us.p50, p99: .latency_us.p99}}' 2>/dev/null
[[ $rc -eq 0 ]] || fail "udp_sim under loss and delay exited $rc"
[[ $(echo "$out" | field .verify.result) == pass ]] || fail "--verify did not pass"
[[ $(echo "$out" | field .status.UNAVAILABLE) -eq 0 ]] || fail "UNAVAILABLE replies with all up"
[[ $(echo "$out" | field .retries_sent) -gt 0 ]] || fail "no retries under 5% loss ($EMULATION)?"
log "step 1 passed: udp_sim --verify under $EMULATION"
if [[ -n ${RELAY_PID:-} ]]; then
  # Step 1 is over: on SIGTERM the relay exits 0 with one summary line (forwarded, lost, overflow
  # ... each way).
  kill -TERM "$RELAY_PID"
  wait "$RELAY_PID"
  relay_rc=$?
  kept=()  # reaped: the cleanup must not signal the pid again (it may be reused)
  for p in "${PIDS[@]}"; do [[ $p == "$RELAY_PID" ]] || kept+=("$p"); done
  PIDS=("${kept[@]}")
  summary=$(grep "lossy_relay summary" "$WORK/relay.log")
  log "${summary:-lossy_relay printed no summary}"
  [[ $relay_rc -eq 0 && -n $summary ]] || fail "lossy_relay exited $relay_rc on SIGTERM"
  lost=0
  if [[ $summary =~ "to target: received "[0-9]+" forwarded "[0-9]+" lost "([0-9]+) ]]; then
    lost=${BASH_REMATCH[1]}
  fi
  [[ $lost -gt 0 ]] || fail "lossy_relay lost nothing toward the login server at 5%?"
  RELAY_PID="" SIM_TARGET="$NET.20:7200"  # steps 2 and 3 go direct, as before
fi

# --- 2. cut hash2's link -----------------------------------------------------------------------
ip -n "$NS_H2" link set eth0 down || fail "could not cut hash2's link"
log "hash2's link is down"
cut_seen() {  # hash2's ids answered UNAVAILABLE (after the timeouts that mark the link down)
  local o
  o=$(sim 5001 500 2)
  CUT_OUT=$o
  [[ $(echo "$o" | field .status.UNAVAILABLE) -gt 0 && $(echo "$o" | field .status.OK) -eq 0 ]]
}
poll 5 0.5 cut_seen || fail "hash2's ids did not get UNAVAILABLE: $(echo "$CUT_OUT" | jq -c .status)"
echo "$CUT_OUT" | jq -c '{ids: "5001-5500 (hash2)", requests, status}'
out=$(sim 1 2000 2)
rc=$?
echo "$out" | jq -c '{ids: "1-2000 (hash1)", requests, status, verify: .verify.result}'
[[ $rc -eq 0 ]] || fail "hash1's ids failed while hash2 was cut (udp_sim exit $rc)"
[[ $(echo "$out" | field .status.UNAVAILABLE) -eq 0 ]] || fail "hash1's ids got UNAVAILABLE"
[[ $(echo "$out" | field .status.TIMEOUT) -eq 0 ]] || fail "hash1's ids got TIMEOUT"
log "step 2 passed: hash2's ids UNAVAILABLE, hash1's served"

# --- 3. restore the link: service comes back -----------------------------------------------------
ip -n "$NS_H2" link set eth0 up || fail "could not restore hash2's link"
log "hash2's link is up again"
back() {
  local o
  o=$(sim 5001 500 2)
  local rc=$?
  BACK_OUT=$o
  [[ $rc -eq 0 && $(echo "$o" | field .status.UNAVAILABLE) -eq 0 &&
    $(echo "$o" | field .status.TIMEOUT) -eq 0 && $(echo "$o" | field .verify.result) == pass ]]
}
poll 15 0.5 back || fail "hash2's ids were not served again: $(echo "$BACK_OUT" | jq -c .status)"
echo "$BACK_OUT" | jq -c '{ids: "5001-5500 (hash2)", requests, status, verify: .verify.result}'
for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null || fail "a server died (pid $p)"; done
log "step 3 passed: service is back after the link returned"
echo "PASSED"
exit 0
