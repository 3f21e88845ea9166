#!/usr/bin/env bash
# Benchmarks that print figures (tests never assert times).
# Usage: scripts/bench.sh hash|e2e|purge|stream|storm|replicas|swarm|takeover
#   hash  operations/s through one hash server on loopback with pipelining, beside redis-benchmark
#         against a local redis-server in the same run; memory per record at the fill levels 2M,
#         3.3M, 5M, 6.5M, 9M and 12M (IPv4, then IPv6; one hash server with 2 shards), and after a
#         purge of 90% of 10M records, each beside redis-server's for the same count in the same
#         run; with BENCH_BASE_BUILD=DIR (a build of an older commit), GET and UPSERT rates at 10M
#         records, that build's hash server against this one, alternated in one run.
#   e2e   the host's hiccups (tools/hiccup_meter); udp_sim against a local cluster (1, then 3
#         hash servers; 1 login server) and the yardstick ../shared/bench/udp_limit.c back to
#         back, both rates and their ratio; then latency at an offered 50k requests/s (open loop)
#         beside the same load against the yardstick's bare echo server.
#   purge p99 of a 50k/s open-loop load while the hash server serving it purges 5M records it no
#         longer owns, against the same load without a purge, in one run; and the time a new
#         table version takes to reach every node.
#   stream a streaming move of 5M records (BENCH_STREAM_RECORDS) between two hash servers of two
#         shards each (BENCH_STREAM_SHARDS): its duration and records/s unthrottled
#         (--stream-rate 0) and at the default rate; the p99 of a 50k/s open-loop load while the
#         default-rate move runs, against the same load without a move, in one run.
#   storm 12M distinct users log in through one login server into one hash server (1, then 2
#         shards), then each is looked up: LOGINs answered OK / otherwise, users found, each
#         shard's longest event-loop turn, the LOGINs' p99 / p999 (with BENCH_BASE_BUILD, the
#         same storm into that build's hash server too).
#   replicas (issue 14) kill: three hash servers (2 shards each) with replicas 2 and one login
#         server under a verified open-loop load (300k users, 50k requests/s, 20 s); 5 s in hash2
#         is killed with kill -9, 5 s later restarted empty on its address: lookups sent and
#         failed, verify_failed, the longest wait for an answer and the p99, the login server's
#         hint counters, the refill's duration. refill: BENCH_REFILL_RECORDS distinct users stored
#         (a login storm) in BENCH_REFILL_SERVERS hash servers with replicas 2, hash2 killed with
#         kill -9 and restarted empty: the records it holds after its refill, seconds, records/s.
#   swarm one config server (file store, heartbeat 1000 ms) and BENCH_SWARM_NODES node links from
#         one process (tools/node_swarm: real ConfigLinks, role login, each acks every table at
#         once) for BENCH_SWARM_SECONDS; once every node is up, over the rest of the run: the
#         config server's CPU (% of one core), its RSS before the swarm and during, RSS per node,
#         heartbeats handled per second, the heartbeat lag p50/p99/max (its /metrics histogram),
#         and node_swarm's own CPU.
#   takeover three config servers on a 3-member etcd on loopback (/usr/bin/etcd), two hash servers
#         and one login server given all three, under a verified open-loop load (20k users,
#         20000/s) for the whole run; BENCH_TAKEOVER_ROUNDS times the leader is killed with kill -9
#         in the middle of an imctl assign, then once stopped with SIGTERM: from the kill, the time
#         until a standby leads and until it shows every node up at its latest version; whether
#         the change was acknowledged and is in the history; min/median/max against 2 x the lease
#         TTL; the history's versions (each once); the load's failed lookups and verify result.
# Environment: BENCH_SECONDS (default 5), BENCH_RECORDS (default 10000000), BENCH_ROUNDS (2),
# BENCH_FILL_LEVELS (hash: default 2000000,3300000,5000000,6500000,9000000,12000000),
# BENCH_BASE_BUILD (hash, storm: the "before" build for A/B), BENCH_STORM_USERS (12000000),
# BENCH_STORM_SHARDS (default "1 2"), BENCH_STREAM_RECORDS (5000000), BENCH_STREAM_SHARDS (2),
# BENCH_STREAM_RATE (the moving server's --stream-rate; default: its default), BENCH_HASH_PARTS (hash: default "rates memory purge ab"),
# BENCH_AB_ROUNDS (hash A/B: default 3),
# BENCH_HASH_SERVERS (e2e: the cluster sizes to run, default "1 3"), BENCH_E2E_REPLICAS (e2e: the
# copies of each record to run each size with, default "1"; "1 2" gives the cost of replicas,
# sizes with fewer servers than copies are skipped), BENCH_E2E_KEYS (e2e: "on"
# by default, the cluster key on every link; "off on" runs each size without, then with it; "tls":
# the cluster key and TLS on the login -> hash links, so "on tls" gives the cost of TLS),
# BENCH_REPLICAS_PARTS (replicas: default "kill refill"), BENCH_REFILL_RECORDS (5000000),
# BENCH_REFILL_SERVERS (2: each holds every record; 3: hash2 holds about 2/3 of them),
# BENCH_REFILL_STREAM_RATE (replicas refill: the hash servers' --stream-rate; default: theirs),
# BENCH_SWARM_NODES (swarm: default 10000), BENCH_SWARM_SECONDS (swarm: the whole run, default 60),
# BENCH_SWARM_CONNECT_RATE (swarm: node_swarm's --connect-rate, links started per second, 2000),
# BENCH_TAKEOVER_ROUNDS (takeover: kill -9 rounds, default 5), BENCH_TAKEOVER_TTL (takeover: the
# config servers' --lease-ttl-s, default 3), BENCH_TAKEOVER_KILL_DELAYS_MS (takeover: ms between
# the start of the imctl assign and the kill, one per round in turn, default "5 15 25 35 45"),
# BENCH_TAKEOVER_LOAD_S (takeover: udp_sim's --duration bound; it is stopped after the last round),
# BENCH_GUEST_HALT_POLL_NS
# (KVM guests: the halt-polling window for the run, see below).
set -euo pipefail
# --help: the comment above.
[[ "${1:-}" == --help || "${1:-}" == -h ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | grep -v '^shellcheck'; exit 0; }
source "$(dirname "$0")/lib.sh"

# KVM guests: cpuidle-haltpoll polls a few hundred microseconds before halting an idle vCPU. With
# guest_halt_poll_ns at 0 every wake-up of an idle vCPU is a round trip through the host (here: a
# cross-CPU UDP ping-pong 13k/s instead of 117k/s), which dominates latency at moderate load.
# BENCH_GUEST_HALT_POLL_NS=N sets it for the run (root) and puts the old value back at exit.
halt_poll=/sys/module/haltpoll/parameters/guest_halt_poll_ns
halt_poll_saved=""
restore_host() {
  [[ -n "$halt_poll_saved" ]] && echo "$halt_poll_saved" >"$halt_poll" 2>/dev/null || true
}
if [[ -n "${BENCH_GUEST_HALT_POLL_NS:-}" ]]; then
  [[ -w "$halt_poll" ]] || { echo "bench.sh: cannot write $halt_poll (not a KVM guest, or not root)" >&2; exit 1; }
  halt_poll_saved=$(cat "$halt_poll")
  echo "$BENCH_GUEST_HALT_POLL_NS" >"$halt_poll"
fi
host_note() {
  if [[ -r "$halt_poll" ]]; then
    echo "== host: $(nproc) cores, KVM guest halt polling guest_halt_poll_ns=$(cat "$halt_poll") (kernel default 200000)"
  else
    echo "== host: $(nproc) cores"
  fi
}
trap 'stop_all; restore_host' EXIT

seconds="${BENCH_SECONDS:-5}"
records="${BENCH_RECORDS:-10000000}"
work=$(mktemp -d /tmp/imhash-bench.XXXXXX)

bench_hash() {
  build_release --bench -DIMHASH_WERROR=ON
  # The load generator needs a core of its own, as redis-benchmark does beside the single-threaded
  # redis-server: give the hash server the others (at least one shard).
  local shards=$(( $(nproc) > 1 ? $(nproc) - 1 : 1 )) part
  rport=$(free_port)
  for part in ${BENCH_HASH_PARTS:-rates memory purge ab}; do
    case "$part" in
      rates) bench_rates "$shards" ;;
      memory) bench_memory ;;
      purge) bench_purge_memory ;;
      ab) [[ -n "${BENCH_BASE_BUILD:-}" ]] && bench_rates_ab "$shards" ;;
    esac
  done
  return 0
}

bench_rates() {
  local shards="$1" requests out round
  echo "== hash server ($shards shards) vs redis-server: 50 connections, pipeline 16, ${seconds}s per phase, $(nproc) cores"
  # redis-benchmark runs a fixed request count; size it to about the same duration.
  requests=$((seconds * 400000))
  for round in 1 2; do
    start_daemon hash "$work" "$IMHASH_BUILD/hash_server/hash_server" --listen 127.0.0.1:0 \
      --shards "$shards" --log-level warn
    out=$("$IMHASH_BUILD/tools/hash_bench" --target "$LISTEN_ADDR" -c 50 -P 16 --duration "$seconds")
    imhash_set[round]=$(awk '/^SET:/ {print $2}' <<<"$out")
    imhash_get[round]=$(awk '/^GET:/ {print $2}' <<<"$out")
    stop_all

    start_redis
    out=$(redis-benchmark -p "$rport" -P 16 -c 50 -t set,get -n "$requests" -q 2>/dev/null | tr '\r' '\n')
    redis_set[round]=$(awk -F'[: ]+' '/^SET/ {print $2}' <<<"$out" | tail -n 1)
    redis_get[round]=$(awk -F'[: ]+' '/^GET/ {print $2}' <<<"$out" | tail -n 1)
    stop_all
    printf "round %d  imhash SET %10.0f GET %10.0f   redis SET %10.0f GET %10.0f   ratio SET %.2f GET %.2f\n" \
      "$round" "${imhash_set[round]}" "${imhash_get[round]}" "${redis_set[round]}" "${redis_get[round]}" \
      "$(echo "${imhash_set[round]} / ${redis_set[round]}" | bc -l)" \
      "$(echo "${imhash_get[round]} / ${redis_get[round]}" | bc -l)"
  done
}

start_redis() {
  redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no "$@" >"$work/redis.log" 2>&1 &
  STARTED_PIDS+=($!)
  for _ in $(seq 1 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.05; done
}
redis_rss() { redis-cli -p "$rport" info memory | awk -F: '/^used_memory_rss:/ {print $2+0}'; }

# Bytes per record at each fill level: imhash (one hash server, 2 shards, records added level by
# level from the same baseline) beside redis-server (keys "user:N" with a value of the same
# information: 18 bytes for IPv4 (id 8, address 4, port 2, last seen 4), 30 for IPv6).
bench_memory() {
  local levels="${BENCH_FILL_LEVELS:-2000000,3300000,5000000,6500000,9000000,12000000}"
  rport=$(free_port)
  local family flag value
  for family in IPv4 IPv6; do
    if [[ $family == IPv4 ]]; then flag=""; value=18; else flag="--ipv6"; value=30; fi
    echo "== memory per $family record, fill levels $levels: one hash server (2 shards) vs redis-server (${value}-byte values)"
    start_daemon hash "$work" "$IMHASH_BUILD/hash_server/hash_server" --listen 127.0.0.1:0 \
      --shards 2 --log-level warn
    "$IMHASH_BUILD/tools/hash_bench" --target "$LISTEN_ADDR" --fill-levels "$levels" $flag \
      --pid "$DAEMON_PID" >"$work/fill.out"
    stop_all
    start_redis --enable-debug-command yes
    local before n after
    before=$(redis_rss)
    : >"$work/redis_fill.out"
    for n in ${levels//,/ }; do
      redis-cli -p "$rport" debug populate "$n" user "$value" >/dev/null  # adds user:K for K < n
      after=$(redis_rss)
      echo "$n $(echo "($after - $before) / $n" | bc -l)" >>"$work/redis_fill.out"
    done
    stop_all
    printf "%12s  %22s  %22s\n" records "imhash bytes/record" "redis bytes/record"
    local worst=0
    while read -r n bpr; do
      local mine
      mine=$(awk -v n="$n" '$1 == "records" && $2 == n {print $8}' "$work/fill.out")
      printf "%12d  %22.1f  %22.1f\n" "$n" "$mine" "$bpr"
      worst=$(echo "if ($mine > $worst) $mine else $worst" | bc -l)
    done <"$work/redis_fill.out"
    printf "worst imhash %s bytes per record: %.1f\n" "$family" "$worst"
  done
}

# The shrink case: 10M records of which 90% are written an hour old, then PURGE OLDER_THAN on each
# shard (the purge's own scan, through the protocol); redis: the same keys, 90% deleted by a
# script, then MEMORY PURGE (jemalloc gives back what it can).
bench_purge_memory() {
  local n="$records"
  echo "== after a purge of 90% of $n IPv4 records: one hash server (2 shards) vs redis-server"
  start_daemon hash "$work" "$IMHASH_BUILD/hash_server/hash_server" --listen 127.0.0.1:0 \
    --shards 2 --log-level warn
  "$IMHASH_BUILD/tools/hash_bench" --target "$LISTEN_ADDR" --fill "$n" --aged-percent 90 \
    --purge-aged --pid "$DAEMON_PID" | sed 's/^/imhash: /'
  stop_all
  start_redis --enable-debug-command yes
  local before full after left
  before=$(redis_rss)
  redis-cli -p "$rport" debug populate "$n" user 18 >/dev/null
  full=$(redis_rss)
  redis-cli -p "$rport" eval "for i = 0, ARGV[1] - 1 do if i % 10 ~= 0 then redis.call('DEL', 'user:' .. i) end end" 0 "$n" >/dev/null
  redis-cli -p "$rport" memory purge >/dev/null
  sleep 1
  after=$(redis_rss)
  left=$(redis-cli -p "$rport" dbsize)
  printf "redis:  records %d  bytes_per_record %.1f; after deleting 90%%: records %d  bytes_per_remaining_record %.1f\n" \
    "$n" "$(echo "($full - $before) / $n" | bc -l)" "$left" "$(echo "($after - $before) / $left" | bc -l)"
  stop_all
}

# GET and UPSERT at 10M records, BENCH_BASE_BUILD's hash server against this build's, alternated:
# each fills 10M records, then hash_bench times UPSERTs of those ids and GETs over all of them,
# and reads the server's CPU time per request (steadier than the rate on a shared machine).
bench_rates_ab() {
  local shards="$1" n="$records" side bin out round
  echo "== GET and UPSERT with $n records: $BENCH_BASE_BUILD (base) vs $IMHASH_BUILD (new), $shards shard(s), 50 connections, pipeline 16, ${seconds}s per phase"
  for round in $(seq 1 "${BENCH_AB_ROUNDS:-3}"); do
    for side in base new; do
      if [[ $side == base ]]; then bin="$BENCH_BASE_BUILD/hash_server/hash_server"; else bin="$IMHASH_BUILD/hash_server/hash_server"; fi
      start_daemon hash "$work" "$bin" --listen 127.0.0.1:0 --shards "$shards" --log-level warn
      "$IMHASH_BUILD/tools/hash_bench" --target "$LISTEN_ADDR" --fill "$n" --pid "$DAEMON_PID" >"$work/ab_fill.out"
      out=$("$IMHASH_BUILD/tools/hash_bench" --target "$LISTEN_ADDR" -c 50 -P 16 --keys "$n" \
        --duration "$seconds" --pid "$DAEMON_PID")
      stop_all
      printf "round %d  %-4s  UPSERT %9.0f/s %6.3f us CPU   GET %9.0f/s %6.3f us CPU   (%s bytes/record)\n" \
        "$round" "$side" "$(awk '/^SET:/ {print $2}' <<<"$out")" "$(awk '/^SET_CPU:/ {print $2}' <<<"$out")" \
        "$(awk '/^GET:/ {print $2}' <<<"$out")" "$(awk '/^GET_CPU:/ {print $2}' <<<"$out")" \
        "$(awk '{print $8}' "$work/ab_fill.out")"
    done
  done
}

json_field() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

bench_e2e() {
  build_release --bench -DIMHASH_WERROR=ON
  local yardstick="$IMHASH_ROOT/../shared/bench/udp_limit.c"
  [[ -f "$yardstick" ]] || { echo "bench.sh: $yardstick not found (shared/ beside the repo)" >&2; exit 1; }
  cc -O2 -o "$work/udp_limit" "$yardstick"
  export IMHASH_RUN="$work/cluster"
  trap 'IMHASH_RUN="$work/cluster" "$IMHASH_ROOT/scripts/cluster.sh" stop >/dev/null; stop_all; restore_host' EXIT
  host_note
  # What the host takes from a thread that wants a whole core, on every core at once: no
  # request that crosses these cores can be faster than their hiccups (the tail's floor).
  echo "== hiccups: every core spinning for ${seconds}s (tools/hiccup_meter)"
  "$IMHASH_BUILD/tools/hiccup_meter" --duration "$seconds" | sed 's/^/   /'
  local sim="$IMHASH_BUILD/tools/udp_sim/udp_sim" port echo_pid
  port=$(free_port)
  # The yardstick's bare echo server on $port, for its own client and for udp_sim --echo.
  start_echo() { "$work/udp_limit" server "$port" & echo_pid=$!; sleep 0.2; }
  stop_echo() { kill "$echo_pid"; wait "$echo_pid" 2>/dev/null || true; }
  # One hash server measures the path itself (UDP in, TCP to a hash server and back, UDP out);
  # three are the test topology, five processes on this machine's cores.
  # The cluster key on (every link proves it, as deployed) and off (BENCH_E2E_KEYS="off on": both,
  # one after the other for each cluster size, for the A/B of docs/performance.md).
  # "tls": the cluster key and TLS on every login -> hash link (certificates made here).
  (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$work/cluster.key")
  [[ " ${BENCH_E2E_KEYS:-on} " == *" tls "* ]] && "$IMHASH_ROOT/scripts/tls_certs.sh" "$work/tls" ca node
  local servers keyed replicas
  for servers in ${BENCH_HASH_SERVERS:-1 3}; do
  for replicas in ${BENCH_E2E_REPLICAS:-1}; do
  ((replicas <= servers)) || continue
  for keyed in ${BENCH_E2E_KEYS:-on}; do
    local key_args=()
    [[ $keyed == on || $keyed == tls ]] && key_args=(--cluster-key-file "$work/cluster.key")
    [[ $keyed == tls ]] &&
      key_args+=(--tls-cert "$work/tls/node.pem" --tls-key "$work/tls/node.key" --tls-ca "$work/tls/ca.pem")
    "$IMHASH_ROOT/scripts/cluster.sh" start --hash "$servers" --shards 1 --threads 1 \
      --replicas "$replicas" "${key_args[@]}" >/dev/null
    local target
    target=$(cat "$work/cluster/login.addr")
    local label="cluster key $keyed"
    [[ $keyed == tls ]] && label="cluster key on + TLS"
    ((replicas > 1)) && label+=", $replicas copies of each record"
    echo "== end to end, $servers hash server(s) (1 shard each), 1 login thread, $label: udp_sim"
    echo "   (closed loop, window 64, 48-byte requests, one source socket) vs udp_limit, ${seconds}s each, $(nproc) cores"
    for round in $(seq 1 "${BENCH_ROUNDS:-2}"); do
      start_echo
      local limit
      limit=$("$work/udp_limit" client "$port" "$seconds" 64 48 | awk '{print $1}')
      stop_echo
      # One source socket, as the yardstick's client has: the login server runs one thread, so more
      # sockets would only add system calls to the load generator sharing these cores.
      local out rate
      out=$("$sim" --target "$target" --users 100000 --duration "$seconds" --window 64 --sockets 1 \
        --json 2>/dev/null)
      rate=$(json_field 'round(d["requests_per_s"])' <<<"$out")
      printf "round %d  imhash %8.0f requests/s   udp_limit %8.0f round trips/s   ratio %.2f   (p99 %s us)\n" \
        "$round" "$rate" "$limit" "$(echo "$rate / $limit" | bc -l)" "$(json_field 'd["latency_us"]["p99"]' <<<"$out")"
    done
    # Latency at an offered 50k/s after a 2 s warm-up (the 100k users' LOGINs), beside the same
    # load against udp_limit's bare echo server: what this machine's UDP path alone gives. The
    # simulator sleeps between sends: busy-waiting (udp_sim --busy-wait) would time more finely
    # but takes a whole core, which on a small host the servers need (docs/performance.md).
    echo "== latency at an offered 50000 requests/s (open loop, 100k users, 2 s warm-up, ${seconds}s measured)"
    local lat=(--users 100000 --warmup 2 --duration "$seconds" --rate 50000 --json)
    local fmt='"p50 %5d us  p99 %5d us  p999 %5d us  max %5d us  errors %d  (%.0f/s)" % (d["latency_us"]["p50"], d["latency_us"]["p99"], d["latency_us"]["p999"], d["latency_us"]["max"], d["requests"] - d["status"]["OK"] - d["status"]["NOT_FOUND"], d["requests_per_s"])'
    start_echo
    printf "bare UDP echo (udp_limit server): %s\n" \
      "$("$sim" --target "127.0.0.1:$port" --echo "${lat[@]}" 2>/dev/null | json_field "$fmt")"
    stop_echo
    printf "imhash:                           %s\n" \
      "$("$sim" --target "$target" "${lat[@]}" 2>/dev/null | json_field "$fmt")"
    "$IMHASH_ROOT/scripts/cluster.sh" stop >/dev/null
  done
  done
  done
}

bench_purge() {
  build_release --bench -DIMHASH_WERROR=ON
  host_note
  local n="${BENCH_PURGE_RECORDS:-5000000}" first=1000000000
  start_config_server "$work" --heartbeat-ms 250 --grace-ms 1000 --auto-purge off \
    --initial-mode range
  local config=$CONFIG_ADDR admin=$ADMIN_ADDR
  local imctl="$IMHASH_BUILD/config_server/imctl --admin $admin"
  local hash1_pid hash1_addr
  for i in 1 2; do
    start_daemon "hash$i" "$work" "$IMHASH_BUILD/hash_server/hash_server" --listen 127.0.0.1:0 \
      --name "hash$i" --shards 1 --config "$config" --log-level warn
    [[ $i == 1 ]] && { hash1_pid=$DAEMON_PID; hash1_addr=$LISTEN_ADDR; }
  done
  wait_registered "$admin" hash2 || true
  $imctl server add hash1 hash2 >/dev/null
  start_daemon login "$work" "$IMHASH_BUILD/login_server/login_server" --udp 127.0.0.1:0 \
    --config "$config" --threads 1 --rate-limit 0 --log-level warn
  local target=$LISTEN_ADDR
  echo "== purge under load: one hash server (1 shard) serves 100k users at an offered 50000/s"
  echo "   and holds $n more records, which it purges in the second run"
  "$IMHASH_BUILD/tools/hash_bench" --target "$hash1_addr" --fill "$n" --first-id "$first" \
    --pid "$hash1_pid" | sed 's/^/   fill: /'
  local sim=("$IMHASH_BUILD/tools/udp_sim/udp_sim" --target "$target" --users 100000
             --duration "$seconds" --rate 50000 --json)
  local base
  base=$("${sim[@]}" 2>/dev/null)
  $imctl assign "$first-$((first + n - 1))" hash2 >/dev/null  # hash1 no longer owns them
  "${sim[@]}" >"$work/purge_run.json" 2>"$work/purge_run.progress" &
  local sim_pid=$!
  sleep 1
  local t0 t1
  t0=$(date +%s.%N)
  $imctl purge hash1 --not-owned >/dev/null
  for _ in $(seq 1 600); do
    sleep 0.05
    $imctl --json purge hash1 --status | grep -q '"state":"done"' && break
  done
  t1=$(date +%s.%N)
  wait "$sim_pid" || true
  local during
  during=$(cat "$work/purge_run.json")
  local p99_base p99_purge
  p99_base=$(json_field 'd["latency_us"]["p99"]' <<<"$base")
  p99_purge=$(json_field 'd["latency_us"]["p99"]' <<<"$during")
  printf "without purge: p50 %s us  p99 %s us  p999 %s us\n" "$(json_field 'd["latency_us"]["p50"]' <<<"$base")" \
    "$p99_base" "$(json_field 'd["latency_us"]["p999"]' <<<"$base")"
  printf "with purge:    p50 %s us  p99 %s us  p999 %s us  (purge of %s records took %.2f s)\n" \
    "$(json_field 'd["latency_us"]["p50"]' <<<"$during")" "$p99_purge" \
    "$(json_field 'd["latency_us"]["p999"]' <<<"$during")" "$n" "$(echo "$t1 - $t0" | bc -l)"
  printf "p99 ratio with/without purge: %.2f\n" "$(echo "$p99_purge / $p99_base" | bc -l)"
  echo "per-second p99 while the purge ran (udp_sim progress lines):"
  grep -o '^\[ *[0-9.]*s\].*p99 [0-9]*us' "$work/purge_run.progress" | sed 's/sent.*done [0-9]*\/s//' | sed 's/^/   /'
  echo "== time for a new table version to reach every node (config server log)"
  grep -o 'version [0-9]* reached every node in [0-9.]* ms' "$work/config.log" | sed 's/^/   /'
}

# One storm: BIN's hash server with SHARDS shards behind one login server (1 thread, no rate
# limit), udp_sim --storm with USERS users (closed loop, window 64, --verify), then its figures and
# each shard's longest event-loop turn (from the hash server's /metrics, when it has them).
storm_once() {
  local bin="$1" shards="$2" users="$3" label="$4"
  start_daemon hash "$work" "$bin" --listen 127.0.0.1:0 --name hash1 --shards "$shards" \
    --metrics 127.0.0.1:0 --log-level warn
  local hash_addr=$LISTEN_ADDR metrics=""
  for _ in $(seq 1 100); do
    metrics=$(sed -n '2s/^listening on //p' "$work/hash.out")
    [[ -n "$metrics" ]] && break
    sleep 0.05
  done
  printf '{"version": 1, "mode": "modulo", "servers": [{"name": "hash1", "address": "%s", "shards": %d}]}\n' \
    "$hash_addr" "$shards" >"$work/storm_table.json"
  start_daemon login "$work" "$IMHASH_BUILD/login_server/login_server" --udp 127.0.0.1:0 \
    --table "$work/storm_table.json" --threads 1 --rate-limit 0 --log-level warn
  echo "== login storm ($label): $users distinct users, 1 login server (1 thread), 1 hash server with $shards shard(s)"
  "$IMHASH_BUILD/tools/udp_sim/udp_sim" --target "$LISTEN_ADDR" --users "$users" --storm --verify \
    --duration "${BENCH_STORM_SECONDS:-900}" --sockets 1 --json >"$work/storm.json" 2>"$work/storm.progress" || true
  local turns histogram
  curl -s "http://$metrics/metrics" >"$work/storm.metrics" || true
  turns=$(awk '/^imhash_hash_longest_turn_seconds/ {
            match($0, /shard="[0-9]+"/); printf "shard %s %.2f ms  ", substr($0, RSTART + 7, RLENGTH - 8), $2 * 1000 }' "$work/storm.metrics")
  # Turns by duration, all shards together (the histogram's buckets are cumulative).
  histogram=$(awk '/^imhash_hash_turn_seconds_bucket/ { match($0, /le="[^"]+"/); le = substr($0, RSTART + 4, RLENGTH - 5); n[le] += $2; if (!(le in seen)) { order[++k] = le; seen[le] = 1 } }
            END { prev = 0; for (i = 1; i <= k; ++i) { le = order[i]; if (n[le] - prev > 0) printf "<= %s s: %d  ", le, n[le] - prev; prev = n[le] } }' "$work/storm.metrics")
  stop_all
  python3 - "$work/storm.json" "${turns:-n/a (this build has no such metric)}" "${histogram:-n/a}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
login, lookup = d["ops"]["LOGIN"], d["ops"]["LOOKUP"]
def others(st):
    o = {k: v for k, v in st.items() if k != "OK" and v}
    return ", ".join(f"{k} {v}" for k, v in o.items()) or "none"
print(f"LOGIN:  sent {login['requests']}  answered OK {login['status']['OK']}  other statuses: {others(login['status'])}"
      f"  no reply {login['no_reply'] + login['abandoned']}  (re-sent tries {login['retries']})")
print(f"        p50 {login['latency_us']['p50']} us  p99 {login['latency_us']['p99']} us  p999 {login['latency_us']['p999']} us  max {login['latency_us']['max']} us")
v = d["verify"]
print(f"LOOKUP: sent {lookup['requests']}  users found {v['verified_ok']}  lost {v['verify_failed']}"
      f"  not judged {v['unjudged']}  statuses other than OK: {others(lookup['status'])}")
print(f"elapsed {d['elapsed_s']:.1f} s ({d['requests_per_s']:.0f} requests/s)")
print(f"longest event-loop turn during the storm: {sys.argv[2]}")
print(f"turns by duration: {sys.argv[3]}")
PY
}

bench_storm() {
  build_release --bench
  host_note
  # A turn that the host takes the core away from lasts as long as that: the storm's processes
  # share the cores, so the longest turn is at least the host's and the scheduler's longest gap.
  echo "== hiccups: every core spinning for 2 s (tools/hiccup_meter)"
  "$IMHASH_BUILD/tools/hiccup_meter" --duration 2 | sed 's/^/   /'
  local users="${BENCH_STORM_USERS:-12000000}" shards
  for shards in ${BENCH_STORM_SHARDS:-1 2}; do
    storm_once "$IMHASH_BUILD/hash_server/hash_server" "$shards" "$users" "this build"
    if [[ -n "${BENCH_BASE_BUILD:-}" ]]; then
      storm_once "$BENCH_BASE_BUILD/hash_server/hash_server" "$shards" "$users" "base: $BENCH_BASE_BUILD"
    fi
  done
}

# A hash server's /metrics address: the second "listening on" line of its stdout.
metrics_of() {
  local out="$1" m=""
  for _ in $(seq 1 100); do
    m=$(sed -n '2s/^listening on //p' "$out")
    [[ -n "$m" ]] && break
    sleep 0.05
  done
  echo "$m"
}
# metric ADDR NAME: the sum of a metric's samples on that /metrics page.
metric() { curl -s -m 5 "http://$1/metrics" | awk -v n="$2" '$1 == n || index($1, n "{") == 1 { s += $2 } END { printf "%.0f", s }'; }

# The move from hash server $1 (its name) after the table change to version $2: waits for its
# stream to run against that version and finish; prints "SECONDS RECORDS".
# The seconds are the config server's: from its log line for the change to the one for the
# server's report of the stream done (both stamped to the millisecond), so the polling here can
# be slow. It must be: a curl every 20 ms is hundreds of processes a second on a 2-vCPU host,
# which cost the move and the load beside it more than the move itself.
time_stream() {
  local name="$1" version="$2"
  for _ in $(seq 1 2400); do
    if grep -q "hash/$name: stream done at version $version " "$work/config.log"; then break; fi
    sleep 0.25
  done
  python3 - "$work/config.log" "$name" "$version" <<'PY'
import datetime, sys
log, name, version = sys.argv[1:]
def stamp(line):
    return datetime.datetime.fromisoformat(line.split()[0]).timestamp()
start = end = None
for line in open(log):
    if start is None and f" version {version}: " in line:
        start = stamp(line)
    elif end is None and f"hash/{name}: stream done at version {version} (" in line:
        end = stamp(line)
        records = line.rsplit("(", 1)[1].split()[0]
if start is None:
    sys.exit(f"bench.sh: no table change to version {version} in {log}")
if end is None:
    sys.exit(f"bench.sh: {name}'s stream at version {version} did not finish in 600 s ({log})")
print(f"{end - start:.3f} {records}")
PY
}
# Polls $1's metrics page four times a second while process $2 runs: the load's measurement
# without a move sees the same light polling as the one during it.
poll_while() { while kill -0 "$2" 2>/dev/null; do metric "$1" imhash_stream_running >/dev/null; sleep 0.25; done; }

bench_stream() {
  build_release --bench -DIMHASH_WERROR=ON
  host_note
  local n="${BENCH_STREAM_RECORDS:-5000000}" first=1000000000 shards="${BENCH_STREAM_SHARDS:-2}"
  local rate="${BENCH_STREAM_RATE:-100000}"
  local d=$((n / rate + 4))  # the load outlasts the default-rate move of n records
  start_config_server "$work" --heartbeat-ms 250 --grace-ms 1000 --initial-mode range
  local config=$CONFIG_ADDR admin=$ADMIN_ADDR
  local imctl="$IMHASH_BUILD/config_server/imctl --admin $admin"
  local hash1_pid hash1_addr m1 m2
  # hash1 streams as fast as the links go; hash2 at the default rate.
  start_daemon hash1 "$work" "$IMHASH_BUILD/hash_server/hash_server" --listen 127.0.0.1:0 \
    --name hash1 --shards "$shards" --config "$config" --metrics 127.0.0.1:0 --stream-rate 0 \
    --log-level warn
  hash1_pid=$DAEMON_PID hash1_addr=$LISTEN_ADDR m1=$(metrics_of "$work/hash1.out")
  local rate_args=()
  [[ -n "${BENCH_STREAM_RATE:-}" ]] && rate_args=(--stream-rate "$BENCH_STREAM_RATE")
  start_daemon hash2 "$work" "$IMHASH_BUILD/hash_server/hash_server" --listen 127.0.0.1:0 \
    --name hash2 --shards "$shards" --config "$config" --metrics 127.0.0.1:0 --log-level warn \
    "${rate_args[@]}"
  m2=$(metrics_of "$work/hash2.out")
  wait_registered "$admin" hash2 || true
  $imctl server add hash1 hash2 >/dev/null
  start_daemon login "$work" "$IMHASH_BUILD/login_server/login_server" --udp 127.0.0.1:0 \
    --config "$config" --threads 1 --rate-limit 0 --log-level warn
  local target=$LISTEN_ADDR last=$((first + n - 1))
  echo "== streaming moves of $n records between two hash servers ($shards shard(s) each) on this host"
  "$IMHASH_BUILD/tools/hash_bench" --target "$hash1_addr" --fill "$n" --first-id "$first" \
    --pid "$hash1_pid" | sed 's/^/   fill: /'
  local r
  $imctl assign "$first-$last" hash2 >/dev/null  # version 2: hash1 streams them to hash2
  r=$(time_stream hash1 2)
  printf "unthrottled (--stream-rate 0): %s records in %.2f s: %.0f records/s\n" \
    "${r#* }" "${r% *}" "$(echo "${r#* } / ${r% *}" | bc -l)"
  # The old copies go with the automatic purge once the stream is done and the grace is over.
  for _ in $(seq 1 600); do
    [[ $(metric "$m1" imhash_hash_records) -lt 1000 && $(metric "$m2" imhash_hash_records) -ge $n ]] && break
    sleep 0.1
  done
  echo "   hash1 after its purge: $(metric "$m1" imhash_hash_records) records, hash2: $(metric "$m2" imhash_hash_records)"

  local sim=("$IMHASH_BUILD/tools/udp_sim/udp_sim" --target "$target" --users 100000 --warmup 2
             --duration "$d" --rate 50000 --json)
  local base during
  "${sim[@]}" >"$work/stream_base.json" 2>/dev/null &
  poll_while "$m2" $!
  base=$(cat "$work/stream_base.json")
  "${sim[@]}" >"$work/stream_run.json" 2>"$work/stream_run.progress" &
  local sim_pid=$!
  sleep 3  # past the warm-up
  $imctl assign "$first-$last" hash1 >/dev/null  # version 3: back, at hash2's default rate
  r=$(time_stream hash2 3)
  wait "$sim_pid" || true
  during=$(cat "$work/stream_run.json")
  printf "rate %s/s (hash2's --stream-rate): %s records in %.2f s: %.0f records/s (under a 50k/s load)\n" \
    "$rate" "${r#* }" "${r% *}" "$(echo "${r#* } / ${r% *}" | bc -l)"
  local p99_base p99_move
  p99_base=$(json_field 'd["latency_us"]["p99"]' <<<"$base")
  p99_move=$(json_field 'd["latency_us"]["p99"]' <<<"$during")
  echo "== a 50k/s open-loop load (100k users, ${d} s measured after a 2 s warm-up)"
  printf "without a move:              p50 %s us  p99 %s us  p999 %s us  errors %s\n" \
    "$(json_field 'd["latency_us"]["p50"]' <<<"$base")" "$p99_base" \
    "$(json_field 'd["latency_us"]["p999"]' <<<"$base")" \
    "$(json_field 'd["requests"] - d["status"]["OK"] - d["status"]["NOT_FOUND"]' <<<"$base")"
  printf "during a default-rate move:  p50 %s us  p99 %s us  p999 %s us  errors %s\n" \
    "$(json_field 'd["latency_us"]["p50"]' <<<"$during")" "$p99_move" \
    "$(json_field 'd["latency_us"]["p999"]' <<<"$during")" \
    "$(json_field 'd["requests"] - d["status"]["OK"] - d["status"]["NOT_FOUND"]' <<<"$during")"
  printf "p99 ratio with/without the move: %.2f\n" "$(echo "$p99_move / $p99_base" | bc -l)"
  stop_all
}

# Replicas (docs/design.md §3, "Replicas"; issue 14): a kill -9 under load, and refill speed.
# replicas_cluster DIR SERVERS [HASH_ARGS...]: a config server, SERVERS hash servers hash1.. (2
# shards each, a metrics listener, HASH_ARGS) in the table with replicas 2, and one login server
# (1 thread, no rate limit, a metrics listener), logs in DIR. Sets R_CONFIG, R_IMCTL (an array),
# R_PID[i], R_ADDR[i], R_METRICS[i], R_LOGIN, R_LOGIN_METRICS.
replicas_cluster() {
  local dir="$1" servers="$2" i names=()
  shift 2
  mkdir -p "$dir"
  start_config_server "$dir" --heartbeat-ms 250 --grace-ms 10000
  R_CONFIG=$CONFIG_ADDR
  R_IMCTL=("$IMHASH_BUILD/config_server/imctl" --admin "$ADMIN_ADDR")
  for i in $(seq 1 "$servers"); do
    start_daemon "hash$i" "$dir" "$IMHASH_BUILD/hash_server/hash_server" --listen 127.0.0.1:0 \
      --name "hash$i" --shards 2 --config "$R_CONFIG" --metrics 127.0.0.1:0 --log-level warn "$@"
    R_PID[i]=$DAEMON_PID R_ADDR[i]=$LISTEN_ADDR R_METRICS[i]=$(metrics_of "$dir/hash$i.out")
    wait_registered "$ADMIN_ADDR" "hash$i" || true
    names+=("hash$i")
  done
  "${R_IMCTL[@]}" server add "${names[@]}" >/dev/null
  "${R_IMCTL[@]}" replicas 2 >/dev/null
  start_daemon login "$dir" "$IMHASH_BUILD/login_server/login_server" --udp 127.0.0.1:0 \
    --rate-limit 0 --config "$R_CONFIG" --threads 1 --metrics 127.0.0.1:0 --log-level warn
  R_LOGIN=$LISTEN_ADDR R_LOGIN_METRICS=$(metrics_of "$dir/login.out")
}

# replicas_kill9 I: kill -9 hash server hashI, and reap it (so the shell reports no killed job).
replicas_kill9() { { kill -9 "${R_PID[$1]}" && wait "${R_PID[$1]}"; } 2>/dev/null || true; }

# replicas_restart DIR I [HASH_ARGS...]: starts hashI again, empty, on its old address (logs
# DIR/hashI-restarted.*), and waits (bounded, 10 s) for the config server's log line that starts
# its refill (or refuses one). Sets R_SKIP to the config log's line count before the restart and
# R_T0 to the time of the restart.
replicas_restart() {
  local dir="$1" i="$2"
  shift 2
  R_SKIP=$(wc -l <"$dir/config.log")
  R_T0=$(date +%s.%N)
  start_daemon "hash$i-restarted" "$dir" "$IMHASH_BUILD/hash_server/hash_server" \
    --listen "${R_ADDR[i]}" --name "hash$i" --shards 2 --config "$R_CONFIG" \
    --metrics 127.0.0.1:0 --log-level warn "$@"
  R_PID[i]=$DAEMON_PID R_METRICS[i]=$(metrics_of "$dir/hash$i-restarted.out")
  for _ in $(seq 1 200); do
    tail -n +"$((R_SKIP + 1))" "$dir/config.log" |
      grep -q "hash$i started empty: \|hash$i: not refilled" && return 0
    sleep 0.05
  done
  echo "bench.sh: hash$i did not register within 10 s of its restart ($dir/config.log)" >&2
}

# wait_refills_empty: polls `imctl --json status` (4 times a second, 600 s at most) until its
# "refills" array is empty; prints the seconds since R_T0 (replicas_restart).
wait_refills_empty() {
  local deadline=$((SECONDS + 600))
  for _ in $(seq 1 2400); do
    "${R_IMCTL[@]}" --json status | grep -q '"refills":\[\]' && break
    ((SECONDS < deadline)) || { echo "bench.sh: refills not empty after 600 s" >&2; break; }
    sleep 0.25
  done
  echo "$(date +%s.%N) - $R_T0" | bc -l
}

# refill_seconds LOG NAME SKIP: NAME's refill in the config server's LOG after its first SKIP
# lines, as "SECONDS RECORDS_SENT": from the line that starts it ("NAME started empty: refilling
# it at version V") to the one that ends it ("NAME refilled: ..."), both stamped to the
# millisecond; RECORDS_SENT: what its peers' streams at version V or later reported sent between.
refill_seconds() {
  python3 - "$@" <<'PY'
import datetime, re, sys
log, name, skip = sys.argv[1], sys.argv[2], int(sys.argv[3])
def stamp(line):
    return datetime.datetime.fromisoformat(line.split()[0]).timestamp()
start = end = version = None
sent = 0
for line in open(log).readlines()[skip:]:
    if start is None:
        m = re.search(rf" {re.escape(name)} started empty: refilling it at version (\d+) ", line)
        if m:
            start, version = stamp(line), int(m.group(1))
        elif f" {name}: not refilled (" in line:
            sys.exit(f"not refilled: {line.strip()} ({log})")
        continue
    m = re.search(r" hash/\S+: stream done at version (\d+) \((\d+) records sent\)", line)
    if m and int(m.group(1)) >= version:
        sent += int(m.group(2))
    if f" {name} refilled: " in line:
        end = stamp(line)
        break
if start is None:
    sys.exit(f"no refill of {name} started ({log})")
if end is None:
    sys.exit(f"the refill of {name} did not end ({log})")
print(f"{end - start:.3f} {sent}")
PY
}

# The kill -9 case: a verified open-loop load of 300k users at 50k/s for 20 s through three hash
# servers with replicas 2; 5 s in hash2 dies (kill -9), 5 s later it restarts empty on its
# address and is refilled while the load goes on.
replicas_kill() {
  local dir="$work/kill" r poll_s held
  replicas_cluster "$dir" 3
  echo "== kill -9 under load: 3 hash servers (2 shards each), replicas 2, 1 login server (1 thread);"
  echo "   udp_sim --users 300000 --rate 50000 (open loop) --duration 20 --verify; hash2 killed with"
  echo "   kill -9 at 5 s and restarted empty on its address at 10 s (the first 6 s are mostly the"
  echo "   users' LOGINs: 300k at 50k/s)"
  "$IMHASH_BUILD/tools/udp_sim/udp_sim" --target "$R_LOGIN" --users 300000 --duration 20 \
    --rate 50000 --verify --json >"$dir/udp_sim.json" 2>"$dir/udp_sim.progress" &
  local sim_pid=$!
  STARTED_PIDS+=("$sim_pid")
  sleep 5
  replicas_kill9 2
  sleep 5
  replicas_restart "$dir" 2
  poll_s=$(wait_refills_empty)
  r=$(refill_seconds "$dir/config.log" hash2 "$R_SKIP" 2>&1) || true
  wait "$sim_pid" || true
  held=$(metric "${R_METRICS[2]}" imhash_hash_records)
  python3 - "$dir/udp_sim.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def failed(o):
    bad = {k: v for k, v in o["status"].items() if k not in ("OK", "NOT_FOUND") and v}
    return sum(bad.values()) + o["no_reply"] + o["abandoned"], bad
lk = d["ops"]["LOOKUP"]
n, bad = failed(lk)
print(f"lookups: sent {lk['requests']}  failed {n} (statuses other than OK/NOT_FOUND:"
      f" {', '.join(f'{k} {v}' for k, v in bad.items()) or 'none'};"
      f" no reply after {d['retries'] + 1} tries {lk['no_reply']};"
      f" unanswered at the end {lk['abandoned']})  re-sent tries {lk['retries']}")
v = d["verify"]
print(f"verify: {v['result']}  verify_failed {v['verify_failed']}  verified_ok {v['verified_ok']}"
      f"  unjudged {v['unjudged']}")
for f in v["failures"][:5]:
    print(f"   failure: user {f['user']} {f['op']}: expected {f['expected']}, got {f['got']}")
by_op = []
for op, o in d["ops"].items():
    parts = [f"{k} {v}" for k, v in failed(o)[1].items()]
    if o["no_reply"]:
        parts.append(f"no reply {o['no_reply']}")
    if o["abandoned"]:
        parts.append(f"unanswered {o['abandoned']}")
    if parts:
        by_op.append(f"{op}: " + ", ".join(parts))
print(f"all requests: sent {d['requests']}  failed {failed(d)[0]} ({'; '.join(by_op) or 'none'})"
      f"  re-sent tries {d['retries_sent']}")
lat, llat = d["latency_us"], lk["latency_us"]
print(f"longest wait for an answer (udp_sim's max latency: answered requests only, from the"
      f" scheduled send to the reply's arrival, re-sent tries included): {lat['max']} us"
      f" (lookups {llat['max']} us)")
print(f"p99 {lat['p99']} us  p999 {lat['p999']} us  p50 {lat['p50']} us  (lookups p99 {llat['p99']} us)")
PY
  local m
  printf "login server /metrics:"
  for m in hints_queued hints_replayed hints_dropped replica_reads replica_write_failures; do
    printf "  %s %s" "$m" "$(metric "$R_LOGIN_METRICS" "imhash_login_${m}_total")"
  done
  echo
  if [[ "$r" =~ ^[0-9.]+\ [0-9]+$ ]]; then
    printf "refill of hash2 after its restart: %.3f s (config server log: registration to refilled), %s records streamed to it; it holds %s at the end of the load\n" \
      "${r% *}" "${r#* }" "$held"
  else
    echo "refill of hash2 after its restart: $r"
  fi
  printf "   refills empty in imctl status %.2f s after the restart (the process started; polled every 0.25 s)\n" "$poll_s"
  echo "per second (udp_sim progress; hash2 down from 5 s to 10 s):"
  grep '^\[' "$dir/udp_sim.progress" | sed 's/^/   /' || true
  echo "   logs: $dir"
  stop_all
}

# Refill speed: BENCH_REFILL_RECORDS distinct users stored by a login storm, then hash2 killed
# with kill -9 once it holds its share and restarted empty: its refill from its peers' streams,
# timed by the config server's log.
replicas_refill() {
  local dir="$work/refill" n="${BENCH_REFILL_RECORDS:-5000000}" servers="${BENCH_REFILL_SERVERS:-2}"
  local rate_args=() rate_label="the default --stream-rate (100000/s per server)"
  if [[ -n "${BENCH_REFILL_STREAM_RATE:-}" ]]; then
    rate_args=(--stream-rate "$BENCH_REFILL_STREAM_RATE")
    rate_label="--stream-rate $BENCH_REFILL_STREAM_RATE"
  fi
  replicas_cluster "$dir" "$servers" "${rate_args[@]}"
  local share=$((n * 2 / servers)) t0 t1
  echo "== refill of an empty hash server: $n users in $servers hash servers (2 shards each), replicas 2, $rate_label"
  t0=$(date +%s.%N)
  "$IMHASH_BUILD/tools/udp_sim/udp_sim" --target "$R_LOGIN" --users "$n" --storm --verify \
    --sockets 1 --duration 900 --json >"$dir/storm.json" 2>"$dir/storm.progress" || true
  t1=$(date +%s.%N)
  json_field '"fill (udp_sim --storm): %d LOGINs answered OK of %d, %d users found, %d lost, in %.1f s" % (d["ops"]["LOGIN"]["status"]["OK"], d["ops"]["LOGIN"]["requests"], d["verify"]["verified_ok"], d["verify"]["verify_failed"], '"$(echo "$t1 - $t0" | bc -l)"')' \
    <"$dir/storm.json"
  # Its share (every record with 2 servers, about 2/3 of them with 3): until it has it, or its
  # count stops moving (60 s at most).
  local held last=-1 deadline=$((SECONDS + 60))
  for _ in $(seq 1 120); do
    held=$(metric "${R_METRICS[2]}" imhash_hash_records)
    [[ $held -ge $share || $held -eq $last || $SECONDS -ge $deadline ]] && break
    last=$held
    sleep 0.5
  done
  echo "hash2 before the kill: $held records (its share: $share)"
  replicas_kill9 2
  sleep 1
  local r poll_s
  replicas_restart "$dir" 2 "${rate_args[@]}"
  poll_s=$(wait_refills_empty)
  r=$(refill_seconds "$dir/config.log" hash2 "$R_SKIP" 2>&1) || true
  held=$(metric "${R_METRICS[2]}" imhash_hash_records)
  if [[ "$r" =~ ^[0-9.]+\ [0-9]+$ ]]; then
    printf "refill: hash2 holds %s records after it (%s streamed to it) after %.3f s (config server log: registration to refilled): %.0f records/s\n" \
      "$held" "${r#* }" "${r% *}" "$(echo "$held / ${r% *}" | bc -l)"
  else
    echo "refill: $r; hash2 holds $held records"
  fi
  printf "   refills empty in imctl status %.2f s after the restart (the process started; polled every 0.25 s)\n" "$poll_s"
  echo "   logs: $dir"
  stop_all
}

bench_replicas() {
  build_release --bench -DIMHASH_WERROR=ON
  host_note
  echo "== hiccups: every core spinning for 2 s (tools/hiccup_meter)"
  "$IMHASH_BUILD/tools/hiccup_meter" --duration 2 | sed 's/^/   /'
  local part
  for part in ${BENCH_REPLICAS_PARTS:-kill refill}; do
    case "$part" in
      kill) replicas_kill ;;
      refill) replicas_refill ;;
      *) echo "bench.sh: BENCH_REPLICAS_PARTS: no part $part (kill, refill)" >&2; return 64 ;;
    esac
  done
}

# The config server's cost per node: BENCH_SWARM_NODES node links from one tools/node_swarm process
# (each a real ConfigLink registered as a login server, heartbeating every 1000 ms, acking every
# table at once) for BENCH_SWARM_SECONDS. Once every node is up (waited for half the run at most;
# then as many as are up), and 2 s more so that the heartbeats run at their pace, over the rest of
# the run less 2 s: the config server's CPU and node_swarm's (/proc/PID/stat), the config server's
# RSS before the swarm and at the end of the window, heartbeats handled per second and the
# heartbeat lag's quantiles, both from the deltas of its /metrics between the window's two scrapes.
# Each scrape renders a page of every node (three gauges each), within the window only at its ends.
bench_swarm() {
  build_release --bench -DIMHASH_WERROR=ON
  host_note
  local n="${BENCH_SWARM_NODES:-10000}" total="${BENCH_SWARM_SECONDS:-60}" dir="$work/swarm"
  local rate="${BENCH_SWARM_CONNECT_RATE:-2000}"
  local limit=$((n > 10000 ? 2 * n : 20000))
  mkdir -p "$dir"
  # One descriptor per link on both sides: the config server and node_swarm inherit this limit.
  ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
  if [[ $(ulimit -n) != unlimited ]] && (($(ulimit -n) < n + 128)); then
    echo "bench.sh: swarm: $n nodes need $((n + 128)) file descriptors per process, ulimit -n is $(ulimit -n) (hard $(ulimit -Hn))" >&2
    return 1
  fi
  start_config_server "$dir" --max-node-connections "$limit" \
    --max-node-connections-per-source "$limit" --metrics 127.0.0.1:0
  local cpid=${STARTED_PIDS[-1]} m=""
  for _ in $(seq 1 100); do
    m=$(sed -n '3s/^listening on //p' "$dir/config.out")
    [[ -n "$m" ]] && break
    sleep 0.05
  done
  [[ -n "$m" ]] || { echo "bench.sh: the config server printed no metrics address" >&2; return 1; }
  local tck
  tck=$(getconf CLK_TCK)
  # cpu_ticks PID: utime + stime (after the ")" that ends the command name, fields 12 and 13).
  # (0 for a process that is gone.)
  cpu_ticks() { { cut -d')' -f2- "/proc/$1/stat" 2>/dev/null || true; } | awk '{t = $12 + $13} END {print t + 0}'; }
  rss_kb() { awk '/^VmRSS:/ {r = $2} END {print r + 0}' "/proc/$1/status" 2>/dev/null || echo 0; }
  up_nodes() {
    { curl -s -m 10 "http://$m/metrics" || true; } |
      awk '$1 == "imhash_config_nodes{role=\"login\",state=\"up\"}" {print $2 + 0; found = 1} END {if (!found) print 0}'
  }
  sleep 1
  local rss_before
  rss_before=$(rss_kb "$cpid")
  echo "== config server under $n node links from one process (tools/node_swarm: login role, heartbeat"
  echo "   1000 ms, each acks every table at once; started $rate links/s), ${total} s in all, $(nproc) cores"
  local t_launch
  t_launch=$(date +%s.%N)
  "$IMHASH_BUILD/tools/node_swarm" --config "$CONFIG_ADDR" --nodes "$n" --duration-s "$total" \
    --connect-rate "$rate" >"$dir/swarm.out" 2>"$dir/swarm.log" &
  local spid=$!
  STARTED_PIDS+=("$spid")
  # Every node up (polled once a second: each scrape renders every node), for at most half the
  # run: the other half is measured with as many as are up by then. Up at the config server and
  # welcomed at node_swarm both: a node whose welcome came after its link's deadline (2 s) is up
  # at the config server (it registered) but the node dials again and does not heartbeat.
  local up=0 t_up="" t_all="" reg_s=$((total / 2))
  while :; do
    up=$(up_nodes)
    [[ -z "$t_up" ]] && ((up >= n)) && t_up=$(date +%s.%N)
    if [[ -n "$t_up" ]] && grep -q "^node_swarm: all $n nodes welcomed" "$dir/swarm.out"; then
      t_all=$(date +%s.%N)
      break
    fi
    kill -0 "$spid" 2>/dev/null || break
    (($(echo "$(date +%s.%N) - $t_launch > $reg_s" | bc -l))) && break
    sleep 1
  done
  # welcomed_now: node_swarm's latest progress line's "welcomed N".
  welcomed_now() { { grep -o 'welcomed [0-9]*' "$dir/swarm.out" || true; } | tail -n 1 | awk '{w = $2} END {print w + 0}'; }
  local welcomed
  welcomed=$(welcomed_now)
  if [[ -n "$t_all" ]]; then
    printf "registered: all %d nodes up at the config server and welcomed at node_swarm %.1f s after it started (polled once a second)\n" \
      "$n" "$(echo "$t_all - $t_launch" | bc -l)"
  else
    local at_cs="never all up at the config server"
    [[ -n "$t_up" ]] && at_cs=$(printf "all up at the config server after %.1f s" "$(echo "$t_up - $t_launch" | bc -l)")
    echo "registered: NOT all $reg_s s after node_swarm started: $at_cs ($up up at the last poll), $welcomed welcomed at node_swarm; measuring the rest of the run as it is"
  fi
  sleep 2
  local end_at wait_s
  end_at=$(echo "$t_launch + $total - 2" | bc -l)
  wait_s=$(echo "$end_at - $(date +%s.%N)" | bc -l)
  if (($(echo "$wait_s < 3" | bc -l))); then
    echo "bench.sh: swarm: less than 3 s left to measure (raise BENCH_SWARM_SECONDS)" >&2
    wait "$spid" 2>/dev/null || true
    stop_all
    return 1
  fi
  # The CPU window lies between the two scrapes (their rendering is not in it); the counters'
  # deltas are over the scrapes' midpoints.
  local c0 s0 t0 c1 s1 t1 rss_during m0a m0b m1a m1b
  m0a=$(date +%s.%N)
  curl -s -m 10 "http://$m/metrics" >"$dir/metrics0.txt" || true
  m0b=$(date +%s.%N)
  t0=$(date +%s.%N) c0=$(cpu_ticks "$cpid") s0=$(cpu_ticks "$spid")
  sleep "$wait_s"
  t1=$(date +%s.%N) c1=$(cpu_ticks "$cpid") s1=$(cpu_ticks "$spid")
  rss_during=$(rss_kb "$cpid")
  welcomed=$(welcomed_now)
  m1a=$(date +%s.%N)
  curl -s -m 10 "http://$m/metrics" >"$dir/metrics1.txt" || true
  m1b=$(date +%s.%N)
  # node_swarm stops its links at the end of its run and exits; at most 20 s more.
  for _ in $(seq 1 200); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
  local swarm_rc=0
  if kill -0 "$spid" 2>/dev/null; then
    echo "bench.sh: node_swarm still running 20 s after its end: killed" >&2
    kill -KILL "$spid" 2>/dev/null || true
  fi
  wait "$spid" 2>/dev/null || swarm_rc=$?
  python3 - "$dir/metrics0.txt" "$dir/metrics1.txt" "$n" "$t0" "$t1" "$c0" "$c1" "$s0" "$s1" \
    "$tck" "$rss_before" "$rss_during" "$welcomed" \
    "$(echo "($m1a + $m1b - $m0a - $m0b) / 2" | bc -l)" <<'PY'
import re, sys
m0, m1, n, t0, t1, c0, c1, s0, s1, tck, rss0, rss1, welcomed, mdt = sys.argv[1:]
n, dt, tck, mdt = int(n), float(t1) - float(t0), float(tck), float(mdt)
def read(path):
    d = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        key, value = line.rsplit(None, 1)
        d[key] = float(value)
    return d
a, b = read(m0), read(m1)
def delta(key):
    return b.get(key, 0) - a.get(key, 0)
def total(prefix):  # the sum over a metric's labels
    f = lambda d: sum(v for k, v in d.items() if k == prefix or k.startswith(prefix + "{"))
    return f(b) - f(a)
print(f"window: {dt:.1f} s, from 2 s after every node was up (or half the run) to 2 s before"
      f" node_swarm's end")
print(f"config server CPU: {100 * (float(c1) - float(c0)) / tck / dt:.1f}% of one core")
rss0, rss1 = int(rss0), int(rss1)
up0 = a.get('imhash_config_nodes{role="login",state="up"}', 0)
up = b.get('imhash_config_nodes{role="login",state="up"}', 0)
per = up if up > 0 else n
print(f"config server RSS: {rss0 / 1024:.1f} MB before the swarm, {rss1 / 1024:.1f} MB during:"
      f" {(rss1 - rss0) / per:.1f} KB per node ({per:.0f} up)")
print(f"heartbeats handled: {delta('imhash_config_heartbeats_total') / mdt:.0f}/s"
      f" ({up0:.0f} nodes up at the window's start, {up:.0f} at its end, of {n}: one each per"
      f" 1000 ms)")
name = "imhash_config_heartbeat_lag_seconds"
buckets = []
for k in b:
    mm = re.fullmatch(name + r'_bucket\{le="([^"]+)"\}', k)
    if mm:
        buckets.append((float("inf") if mm.group(1) == "+Inf" else float(mm.group(1)), delta(k)))
buckets.sort()
count = delta(name + "_count")
if not buckets or count <= 0:
    print("lag: not exposed" if not buckets else "lag: no heartbeat in the window")
else:
    def quantile(q):  # as Prometheus's histogram_quantile: linear within the bucket
        rank, prev_bound, prev_cum = q * count, 0.0, 0.0
        for bound, cum in buckets:
            if cum >= rank:
                if bound == float("inf"):
                    return f"> {prev_bound * 1000:g} ms"
                share = (rank - prev_cum) / (cum - prev_cum) if cum > prev_cum else 1
                return f"{(prev_bound + (bound - prev_bound) * share) * 1000:.2f} ms"
            prev_bound, prev_cum = bound, cum
        return "?"
    top, prev = None, 0.0
    for bound, cum in buckets:
        if cum > prev:
            top = bound
        prev = cum
    finite = [bb for bb, _ in buckets if bb != float("inf")]
    mx = f"> {finite[-1] * 1000:g} ms" if top == float("inf") else f"<= {top * 1000:g} ms"
    mean = delta(name + "_sum") / count * 1000
    print(f"heartbeat lag (the node's send to its handling, {count:.0f} heartbeats in the window):"
          f" p50 {quantile(0.5)}  p99 {quantile(0.99)}  max {mx} (its bucket)  mean {mean:.2f} ms")
down = b.get('imhash_config_nodes{role="login",state="down"}', 0)
lag = b.get('imhash_config_nodes{role="login",state="lagging"}', 0)
print(f"nodes at the end of the window: up {up:.0f}  down {down:.0f}  lagging {lag:.0f}"
      f" (config server), welcomed {welcomed} (node_swarm);"
      f" in the window: node links refused {total('imhash_config_node_links_refused_total'):.0f},"
      f" closed {total('imhash_config_node_links_closed_total'):.0f}")
print(f"node_swarm CPU: {100 * (float(s1) - float(s0)) / tck / dt:.1f}% of one core in the window")
PY
  local summary
  summary=$(grep '^node_swarm: [0-9]' "$dir/swarm.out" || true)
  echo "   ${summary:-node_swarm printed no summary (exit status $swarm_rc; $dir/swarm.log)}"
  ((swarm_rc == 0)) || echo "bench.sh: node_swarm exited with status $swarm_rc ($dir/swarm.log)" >&2
  echo "   logs: $dir"
  stop_all
}

# The control plane's takeover (docs/design.md §5, "Several config servers: the state in etcd"):
# a 3-member etcd on loopback (/usr/bin/etcd), three config servers cfg0..cfg2 on it (lease TTL
# BENCH_TAKEOVER_TTL, heartbeat 1000 ms, range mode), two hash servers and one login server given
# all three, and a verified open-loop load through the whole run. Each round finds the leader,
# starts an `imctl assign` of 2000 of the load's users to the other hash server and kills the
# leader with kill -9 a few ms later (BENCH_TAKEOVER_KILL_DELAYS_MS, one a round, in turn), in the
# middle of the change; the last round stops it with SIGTERM instead (the lease is revoked). From
# the kill: until a survivor answers GET /v1/status as the leader (takeover), and until it shows
# every node up at its latest version (nodes back); whether the change was acknowledged and
# whether it is in the history; then the killed one is started again on its addresses and must
# show as a standby. At the end: the history's versions (each once, none missing) and the load's
# summary. Logs in $work/takeover (etcd's data directories are removed at exit).
T_PY=""
takeover_py() {
  T_PY="$1/takeover.py"
  cat >"$T_PY" <<'PY'
import json, statistics, sys, time, urllib.error, urllib.request

# Loopback only: no proxy from the environment.
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

def get(addr, path="/v1/status", timeout=0.5):
    """(HTTP status or 0 when unreachable, the JSON body or None)"""
    try:
        with opener.open(f"http://{addr}{path}", timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read())
        except Exception:
            return e.code, None
    except Exception:
        return 0, None

def plane(body):
    return (body or {}).get("control_plane") or {}

def poll(check, deadline_s, every=0.05):
    """Calls check() every `every` s until it returns something; prints it with the time it was seen."""
    end = time.time() + deadline_s
    while time.time() < end:
        t0 = time.time()
        got = check()
        if got is not None:
            print(f"{time.time():.6f} {got}")
            return 0
        time.sleep(max(0.0, every - (time.time() - t0)))
    print("timeout")
    return 1

def leader(addrs, skip, settled):
    """The index of the first address answering 200 as the leader (and, with settled, no longer
    refusing changes: no control_plane.settling_ms)."""
    def check():
        for i, a in enumerate(addrs):
            if i == skip:
                continue
            code, body = get(a)
            p = plane(body)
            if code == 200 and p.get("role") == "leader" and not (settled and "settling_ms" in p):
                return i
        return None
    return check

def nodes_back(addr, hashes, logins):
    """The version once addr leads and shows `hashes` hash and `logins` login servers up, every
    node at its version, converged."""
    def check():
        code, body = get(addr)
        if code != 200 or plane(body).get("role") != "leader" or body.get("converged") is not True:
            return None
        v, nodes = body.get("version"), body.get("nodes", [])
        up = lambda role: sum(1 for n in nodes if n.get("role") == role and n.get("state") == "up"
                              and n.get("version") == v)
        if len(nodes) == hashes + logins and up("hash") == hashes and up("login") == logins:
            return v
        return None
    return check

def standby(addr, name):
    def check():
        code, body = get(addr)
        p = plane(body)
        if code == 200 and any(s.get("name") == name for s in p.get("standbys") or []):
            return name
        return None
    return check

def history_changes(path, change, after):
    """The versions after `after` whose change is `change`, comma-separated (or '-')."""
    h = json.load(open(path)).get("versions", [])
    got = sorted(e["version"] for e in h if e.get("change") == change and e["version"] > after)
    print(",".join(map(str, got)) or "-")

def report(rounds_path, history_path, status_path, sim_path, ttl_s):
    rows = [l.split("\t") for l in open(rounds_path).read().splitlines() if l]
    # round, signal, delay, takeover_ms, nodes_ms, acked_version, in_history, change
    ttl_ms = float(ttl_s) * 1000
    def fig(kind):
        return [float(r[3]) for r in rows if r[1] == kind and r[3] != "-"]
    k, t = fig("KILL"), fig("TERM")
    if k:
        print(f"takeover after kill -9: min {min(k):.0f} ms  median {statistics.median(k):.0f} ms"
              f"  max {max(k):.0f} ms  ({len(k)} rounds; TTL {ttl_ms:.0f} ms: TTL x 1.25"
              f" {1.25 * ttl_ms:.0f} ms, 2 x TTL {2 * ttl_ms:.0f} ms; max / 2 x TTL"
              f" {max(k) / (2 * ttl_ms):.2f})")
        slow = [r[0] for r in rows if r[1] == "KILL" and r[3] != "-" and float(r[3]) > 1.25 * ttl_ms + 250]
        if slow:
            print(f"   slower than TTL x 1.25 + 250 ms in round(s) {', '.join(slow)}")
    if t:
        print(f"takeover after SIGTERM: {', '.join(f'{x:.0f}' for x in t)} ms"
              f"  ({max(t) / (2 * ttl_ms):.2f} of 2 x TTL)")
    nb = [float(r[4]) for r in rows if r[4] != "-"]
    if nb:
        print(f"nodes back (from the kill): min {min(nb):.0f} ms  median {statistics.median(nb):.0f} ms"
              f"  max {max(nb):.0f} ms")
    acked = [r for r in rows if r[5] != "-"]
    lost = [r for r in acked if r[5] not in r[6].split(",")]
    twice = [r for r in rows if len(r[6].split(",")) > 1]
    unacked_made = [r for r in rows if r[5] == "-" and r[6] != "-"]
    print(f"changes in flight: {len(rows)}, acknowledged {len(acked)} (lost: {len(lost)}),"
          f" not acknowledged but made {len(unacked_made)}, made twice {len(twice)}")
    for r in lost:
        print(f"   LOST: round {r[0]}: {r[7]} acknowledged as version {r[5]}, history has it at {r[6]}")
    # Versions: 1..latest, each once.
    hist = [e["version"] for e in json.load(open(history_path)).get("versions", [])]
    latest = json.load(open(status_path)).get("version")
    seen = {}
    for v in hist:
        seen[v] = seen.get(v, 0) + 1
    top = max(hist) if hist else 0
    dup = sorted(v for v, n in seen.items() if n > 1)
    missing = sorted(set(range(1, top + 1)) - set(seen))
    if hist and not dup and not missing and top == latest and len(hist) == top:
        print(f"versions: 1..{top}, each once")
    else:
        print(f"versions: ANOMALY: history lists {len(hist)} entries, highest {top}, status version"
              f" {latest}; twice or more: {dup or 'none'}; missing: {missing or 'none'}")
    try:
        d = json.load(open(sim_path))
    except Exception as e:
        print(f"load: no summary from udp_sim ({e})")
        return
    def failed(o):
        bad = {k: v for k, v in o["status"].items() if k not in ("OK", "NOT_FOUND") and v}
        return sum(bad.values()) + o["no_reply"] + o["abandoned"], bad
    lk = d["ops"]["LOOKUP"]
    n, bad = failed(lk)
    print(f"load (udp_sim, {d['elapsed_s']:.1f} s, {d['requests_per_s']:.0f} requests/s):"
          f" requests {d['requests']}, status "
          + ", ".join(f"{k} {v}" for k, v in d["status"].items() if v))
    print(f"lookups failed: {n}  (of {lk['requests']} sent; statuses other than OK/NOT_FOUND:"
          f" {', '.join(f'{k} {v}' for k, v in bad.items()) or 'none'}; no reply after"
          f" {d['retries'] + 1} tries {lk['no_reply']}; unanswered at the end {lk['abandoned']};"
          f" re-sent tries {lk['retries']})")
    by_op = []
    for op, o in d["ops"].items():
        c, b = failed(o)
        if c:
            by_op.append(f"{op} {c}")
    print(f"requests failed: {failed(d)[0]} ({', '.join(by_op) or 'none'})")
    v = d["verify"]
    print(f"verify: {v['result']}  verify_failed {v['verify_failed']}  verified_ok {v['verified_ok']}"
          f"  unjudged {v['unjudged']}")
    for f in v["failures"][:5]:
        print(f"   failure: user {f['user']} {f['op']}: expected {f['expected']}, got {f['got']}")
    lat = d["latency_us"]
    print(f"latency: max {lat['max']} us (lookups {lk['latency_us']['max']} us)  p99 {lat['p99']} us"
          f"  p999 {lat['p999']} us")

cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "leader":      # ADDRS SKIP SETTLED DEADLINE
    sys.exit(poll(leader(args[0].split(","), int(args[1]), args[2] == "1"), float(args[3])))
elif cmd == "nodes":     # ADDR HASHES LOGINS DEADLINE
    sys.exit(poll(nodes_back(args[0], int(args[1]), int(args[2])), float(args[3])))
elif cmd == "standby":   # ADDR NAME DEADLINE
    sys.exit(poll(standby(args[0], args[1]), float(args[2])))
elif cmd == "history":   # FILE CHANGE AFTER
    history_changes(args[0], args[1], int(args[2]))
elif cmd == "report":
    report(*args)
PY
}

# takeover_ports N: N distinct TCP ports in 10000-30000 with no socket on them now (below the
# ephemeral range, so that nothing binding port 0 takes one); etcd cannot take port 0.
takeover_ports() {
  local n="$1" p got=()
  for _ in $(seq 1 1000); do
    ((${#got[@]} < n)) || break
    p=$(shuf -i 10000-30000 -n 1)
    [[ " ${got[*]} " == *" $p "* ]] && continue
    ss -Htan "sport = :$p" | grep -q . && continue
    got+=("$p")
  done
  ((${#got[@]} == n)) || return 1
  echo "${got[@]}"
}

# takeover_stop SIGNAL PID...: signals them (0: none, they are already told), waits (5 s each at most, then SIGKILL), reaps them
# and drops them from STARTED_PIDS.
takeover_stop() {
  local sig="$1" pid
  shift
  for pid in "$@"; do kill "-$sig" "$pid" 2>/dev/null || true; done
  for pid in "$@"; do
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    { kill -KILL "$pid" && echo "bench.sh: takeover: $pid still running 5 s after SIG$sig: killed" >&2; } 2>/dev/null || true
    { wait "$pid"; } 2>/dev/null || true
  done
  takeover_forget "$@"
}

# takeover_etcd DIR: three etcd members m0..m2 on loopback (data in DIR/etcd/mI, logs DIR/etcd/
# mI.log), healthy within 30 s; fresh ports up to 3 times when one was taken meanwhile. Sets
# T_ETCD (their client addresses, comma-separated) and T_ETCD_PIDS.
takeover_etcd() {
  local dir="$1/etcd" attempt i v ports=() cluster client peer healthy failed
  local clean_env=(env)  # etcd reads flags from ETCD_* variables too
  for v in $(compgen -e); do [[ $v == ETCD_* ]] && clean_env+=(-u "$v"); done
  mkdir -p "$dir"
  for attempt in 1 2 3; do
    read -r -a ports <<<"$(takeover_ports 6)"
    cluster="" T_ETCD="" T_ETCD_PIDS=()
    for i in 0 1 2; do cluster+="${cluster:+,}m$i=http://127.0.0.1:${ports[2 * i + 1]}"; done
    for i in 0 1 2; do
      client="http://127.0.0.1:${ports[2 * i]}" peer="http://127.0.0.1:${ports[2 * i + 1]}"
      rm -rf "$dir/m$i"
      echo "=== bench.sh takeover: m$i, attempt $attempt: client $client, peer $peer" >>"$dir/m$i.log"
      "${clean_env[@]}" /usr/bin/etcd --name "m$i" --data-dir "$dir/m$i" \
        --listen-client-urls "$client" --advertise-client-urls "$client" \
        --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
        --initial-cluster "$cluster" --initial-cluster-token "imhash-bench-$$-$attempt" \
        --initial-cluster-state new --heartbeat-interval 100 --election-timeout 1000 \
        --pre-vote=true --logger zap --log-outputs stderr </dev/null >>"$dir/m$i.log" 2>&1 &
      T_ETCD_PIDS+=($!)
      STARTED_PIDS+=($!)
      T_ETCD+="${T_ETCD:+,}127.0.0.1:${ports[2 * i]}"
    done
    healthy=0 failed=""
    for _ in $(seq 1 300); do
      healthy=0
      for i in 0 1 2; do
        kill -0 "${T_ETCD_PIDS[i]}" 2>/dev/null || failed+=" m$i exited"
        curl -s --noproxy '*' -m 1 "http://127.0.0.1:${ports[2 * i]}/health" 2>/dev/null |
          grep -q '"health":"true"' && healthy=$((healthy + 1))
      done
      [[ -n "$failed" || $healthy == 3 ]] && break
      sleep 0.1
    done
    [[ -z "$failed" && $healthy == 3 ]] && return 0
    takeover_stop KILL "${T_ETCD_PIDS[@]}"
    grep -q "address already in use" "$dir"/m[0-2].log || break
  done
  echo "bench.sh: takeover: etcd not healthy within 30 s:${failed:- $healthy of 3 healthy} (logs $dir/mI.log)" >&2
  tail -n 5 "$dir"/m[0-2].log >&2
  return 1
}

# takeover_cfg I LISTEN ADMIN LOG: config server cfgI on the etcd store, its node listener on
# LISTEN and admin API on ADMIN (127.0.0.1:0 the first time, then its old addresses), stdout and
# stderr in T_DIR/LOG.out and .log; waits for its two "listening on" lines (10 s at most). Sets
# T_CFG_PID[I], T_NODE[I], T_ADMIN[I].
takeover_cfg() {
  local i="$1" listen="$2" admin="$3" log="$T_DIR/$4" pid
  : >"$log.out"
  "$IMHASH_BUILD/config_server/config_server" --store "etcd://$T_ETCD/bench" --name "cfg$i" \
    --lease-ttl-s "$T_TTL" --listen "$listen" --admin "$admin" --heartbeat-ms 1000 \
    --initial-mode range >"$log.out" 2>"$log.log" &
  pid=$!
  STARTED_PIDS+=("$pid")
  for _ in $(seq 1 200); do
    [[ $(grep -c '^listening on' "$log.out") -ge 2 ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  if [[ $(grep -c '^listening on' "$log.out") -lt 2 ]]; then
    echo "bench.sh: takeover: cfg$i did not start on $listen / $admin ($log.log):" >&2
    tail -n 5 "$log.log" >&2
    takeover_stop KILL "$pid"
    return 1
  fi
  T_CFG_PID[i]=$pid
  T_NODE[i]=$(sed -n '1s/^listening on //p' "$log.out")
  T_ADMIN[i]=$(sed -n '2s/^listening on //p' "$log.out")
}

# takeover_change ARGS...: `imctl ARGS` until it is done, 20 s at most: a new leader refuses
# changes for its first few seconds (503, "has just taken over and waits"), and none is elected
# for a moment at the start.
takeover_change() {
  local deadline=$((SECONDS + 20)) rc
  while :; do
    rc=0
    takeover_imctl "$@" >"$T_DIR/change.out" 2>"$T_DIR/change.err" || rc=$?
    ((rc == 0)) && return 0
    if ((SECONDS >= deadline)) || ! grep -q 'just taken over\|standby\|cannot reach' "$T_DIR/change.err"; then
      echo "bench.sh: takeover: imctl $* failed (exit $rc): $(head -c 400 "$T_DIR/change.err")" >&2
      return 1
    fi
    sleep 0.2
  done
}

takeover_admins() { local IFS=,; echo "${T_ADMIN[*]}"; }
# imctl given every config server's admin address as they are now (it follows the leader).
takeover_imctl() { "$IMHASH_BUILD/config_server/imctl" --admin "$(takeover_admins)" "$@"; }
# takeover_forget PID...: drops processes already reaped from STARTED_PIDS.
takeover_forget() {
  local p keep=()
  for p in "${STARTED_PIDS[@]}"; do [[ " $* " == *" $p "* ]] || keep+=("$p"); done
  STARTED_PIDS=("${keep[@]}")
}
takeover_ms() { echo "($1 - $2) * 1000" | bc -l | xargs printf "%.0f"; }

# takeover_round R SIGNAL DELAY_MS: one round (above); prints its line and appends its figures to
# T_DIR/rounds.tsv.
takeover_round() {
  local r="$1" sig="$2" delay="$3" out li ni lo hi owner target before t_kill t_lead t_nodes
  out=$(python3 "$T_PY" leader "$(takeover_admins)" -1 1 30) ||
    { echo "bench.sh: takeover: round $r: no leader taking changes within 30 s" >&2; return 1; }
  li=${out#* }
  # 2000 of the load's users (1..20000), a fresh block each round, to the hash server that does
  # not own the first of them.
  lo=$(( ((r - 1) % 10) * 2000 + 1 )) hi=$(( ((r - 1) % 10 + 1) * 2000 ))
  takeover_imctl --json where "$lo" >"$T_DIR/where.json"
  owner=$(json_field 'd["server"]' <"$T_DIR/where.json")
  before=$(json_field 'd["version"]' <"$T_DIR/where.json")
  if [[ $owner == hash1 ]]; then target=hash2; else target=hash1; fi
  local change="assign $lo-$hi to $target" rd="$T_DIR/round$r" admins="${T_ADMIN[li]}" i
  for i in 0 1 2; do [[ $i == "$li" ]] || admins+=",${T_ADMIN[i]}"; done
  mkdir -p "$rd"
  # The change goes to the leader first (then, as imctl does, to the others); the kill DELAY ms
  # after imctl started, timed with bash's own clock (a busy wait: no process started between).
  local t_start=${EPOCHREALTIME/./}
  "$IMHASH_BUILD/config_server/imctl" --admin "$admins" --timeout-ms 2000 --json \
    assign "$lo-$hi" "$target" >"$rd/assign.out" 2>"$rd/assign.err" &
  local apid=$!
  STARTED_PIDS+=("$apid")
  while ((${EPOCHREALTIME/./} < t_start + delay * 1000)); do :; done
  kill "-$sig" "${T_CFG_PID[li]}"
  t_kill=$EPOCHREALTIME
  delay=$(( (${t_kill/./} - t_start) / 1000 ))
  if [[ $sig == KILL ]]; then
    { wait "${T_CFG_PID[li]}"; } 2>/dev/null || true
    takeover_forget "${T_CFG_PID[li]}"
  fi
  local takeover="-" nodes="-" acked="-" standby_ms="-"
  if out=$(python3 "$T_PY" leader "$(takeover_admins)" "$li" 0 30); then
    t_lead=${out% *} ni=${out#* }
    takeover=$(takeover_ms "$t_lead" "$t_kill")
  else
    echo "bench.sh: takeover: round $r: no config server led within 30 s of the kill of cfg$li" >&2
    return 1
  fi
  if out=$(python3 "$T_PY" nodes "${T_ADMIN[ni]}" 2 1 60); then
    t_nodes=${out% *}
    nodes=$(takeover_ms "$t_nodes" "$t_kill")
  fi
  # The change's answer (imctl: 2 s per exchange, each address once), then the old leader gone.
  local arc=0
  wait "$apid" 2>/dev/null || arc=$?
  takeover_forget "$apid"
  [[ $sig == TERM ]] && takeover_stop 0 "${T_CFG_PID[li]}"
  if ((arc == 0)); then acked=$(json_field 'd["version"]' <"$rd/assign.out"); fi
  takeover_imctl --json history --limit 1000 >"$rd/history.json"
  local made
  made=$(python3 "$T_PY" history "$rd/history.json" "$change" "$before")
  # The old leader back on its addresses (or new ones, if another program took them), as a standby.
  local t_restart
  t_restart=$EPOCHREALTIME
  takeover_cfg "$li" "${T_NODE[li]}" "${T_ADMIN[li]}" "cfg$li-round$r" ||
    takeover_cfg "$li" 127.0.0.1:0 127.0.0.1:0 "cfg$li-round$r-new"
  if out=$(python3 "$T_PY" standby "${T_ADMIN[ni]}" "cfg$li" 30); then
    standby_ms=$(takeover_ms "${out% *}" "$t_restart")
  fi
  local answer
  if ((arc == 0)); then
    answer="acknowledged (version $acked)"
  else
    # imctl's sentence says what each address answered: the leader's (the first) is the news.
    local why
    why=$(sed -n 's/^imctl: no config server served the request: [0-9.]*:[0-9]*: \([^;]*\);.*/the leader: \1/p' "$rd/assign.err")
    answer="not acknowledged (imctl exit $arc: ${why:-$(head -n 1 "$rd/assign.err" | cut -c 1-160)})"
  fi
  local label="kill -9"
  [[ $sig == TERM ]] && label="SIGTERM"
  printf "round %d  %-7s cfg%d %3d ms after the start of imctl \"%s\" (at version %s): takeover %5s ms (cfg%d), nodes back %5s ms;\n" \
    "$r" "$label" "$li" "$delay" "$change" "$before" "$takeover" "$ni" "$nodes"
  printf "         change %s, in the history: %s; cfg%d a standby again %s ms after its restart\n" \
    "$answer" "$([[ $made == - ]] && echo no || echo "yes (version $made)")" "$li" "$standby_ms"
  printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$r" "$sig" "$delay" "$takeover" "$nodes" "$acked" "$made" \
    "$change" >>"$T_DIR/rounds.tsv"
}

bench_takeover() {
  build_release --bench -DIMHASH_WERROR=ON
  host_note
  [[ -x /usr/bin/etcd ]] || { echo "bench.sh: takeover needs /usr/bin/etcd (etcd-server)" >&2; return 1; }
  T_DIR="$work/takeover" T_TTL="${BENCH_TAKEOVER_TTL:-3}"
  local rounds="${BENCH_TAKEOVER_ROUNDS:-5}" delays=()
  read -r -a delays <<<"${BENCH_TAKEOVER_KILL_DELAYS_MS:-5 15 25 35 45}"
  mkdir -p "$T_DIR"
  : >"$T_DIR/rounds.tsv"
  trap 'stop_all; rm -rf "$T_DIR"/etcd/m[0-2]; restore_host' EXIT
  takeover_py "$T_DIR"
  takeover_etcd "$T_DIR"
  T_CFG_PID=() T_NODE=() T_ADMIN=()
  local i
  for i in 0 1 2; do takeover_cfg "$i" 127.0.0.1:0 127.0.0.1:0 "cfg$i"; done
  local nodes
  nodes=$(IFS=,; echo "${T_NODE[*]}")
  python3 "$T_PY" leader "$(takeover_admins)" -1 0 30 >/dev/null ||
    { echo "bench.sh: takeover: no config server leads 30 s after the start ($T_DIR/cfgI.log)" >&2; return 1; }
  local others=()
  for i in 1 2; do
    start_daemon "hash$i" "$T_DIR" "$IMHASH_BUILD/hash_server/hash_server" --listen 127.0.0.1:0 \
      --name "hash$i" --shards 1 --config "$nodes" --log-level warn
    others+=("$DAEMON_PID")
    wait_registered "$(takeover_admins)" "hash$i" || true
  done
  takeover_change server add hash1 hash2
  start_daemon login "$T_DIR" "$IMHASH_BUILD/login_server/login_server" --udp 127.0.0.1:0 \
    --config "$nodes" --threads 1 --rate-limit 0 --log-level warn
  others+=("$DAEMON_PID")
  local target=$LISTEN_ADDR lead
  lead=$(python3 "$T_PY" leader "$(takeover_admins)" -1 0 10) &&
    python3 "$T_PY" nodes "${T_ADMIN[${lead#* }]}" 2 1 30 >/dev/null ||
    { echo "bench.sh: takeover: the nodes did not converge within 30 s" >&2; return 1; }
  # The load outlasts every round (one takes well under 60 s) and is stopped after the last.
  local load_s="${BENCH_TAKEOVER_LOAD_S:-$(( (rounds + 1) * 60 + 30 ))}"
  echo "== takeover: 3 config servers on a 3-member etcd (loopback), lease TTL ${T_TTL} s, heartbeat 1000 ms;"
  echo "   2 hash servers (1 shard each) and 1 login server given all three; udp_sim --users 20000"
  echo "   --rate 20000 --verify --timeout-ms 1000 throughout; $rounds rounds of kill -9 and one of"
  echo "   SIGTERM, each in the middle of an imctl assign; times from the kill (polled every 50 ms)"
  "$IMHASH_BUILD/tools/udp_sim/udp_sim" --target "$target" --users 20000 --rate 20000 --verify \
    --timeout-ms 1000 --duration "$load_s" --json >"$T_DIR/udp_sim.json" 2>"$T_DIR/udp_sim.progress" &
  local sim_pid=$!
  STARTED_PIDS+=("$sim_pid")
  sleep 3  # the users' LOGINs (one second of the load), then steady
  local r
  for r in $(seq 1 "$rounds"); do
    takeover_round "$r" KILL "${delays[(r - 1) % ${#delays[@]}]}"
  done
  takeover_round "$((rounds + 1))" TERM "${delays[0]}"
  sleep 2
  # The load's end: its first SIGTERM ends the load and waits for late replies (udp_sim bounds it).
  kill -TERM "$sim_pid" 2>/dev/null || true
  for _ in $(seq 1 200); do kill -0 "$sim_pid" 2>/dev/null || break; sleep 0.1; done
  takeover_stop TERM "$sim_pid"
  takeover_imctl --json history --limit 1000 >"$T_DIR/history.json"
  takeover_imctl --json status >"$T_DIR/status.json"
  python3 "$T_PY" report "$T_DIR/rounds.tsv" "$T_DIR/history.json" "$T_DIR/status.json" \
    "$T_DIR/udp_sim.json" "$T_TTL"
  echo "   logs: $T_DIR"
  # The nodes and config servers before etcd, so that the config servers give up their leases;
  # etcd's members may take more than stop_all's 5 s to stop together.
  takeover_stop TERM "${others[@]}"
  takeover_stop TERM "${T_CFG_PID[@]}"
  kill -TERM "${T_ETCD_PIDS[@]}" 2>/dev/null || true
  for _ in $(seq 1 200); do kill -0 "${T_ETCD_PIDS[@]}" 2>/dev/null || break; sleep 0.05; done
  { kill -KILL "${T_ETCD_PIDS[@]}"; wait "${T_ETCD_PIDS[@]}"; } 2>/dev/null || true
  takeover_forget "${T_ETCD_PIDS[@]}"
  stop_all
}

declare -a imhash_set imhash_get redis_set redis_get
rport=""
case "${1:-}" in
  hash) bench_hash ;;
  e2e) bench_e2e ;;
  purge) bench_purge ;;
  stream) bench_stream ;;
  storm) bench_storm ;;
  replicas) bench_replicas ;;
  swarm) bench_swarm ;;
  takeover) bench_takeover ;;
  *) echo "usage: scripts/bench.sh hash|e2e|purge|stream|storm|replicas|swarm|takeover" >&2; exit 64 ;;
esac
