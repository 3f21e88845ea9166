#!/usr/bin/env bash
# Benchmarks that print figures (tests never assert times). Usage: scripts/bench.sh hash
#   hash  operations/s through one hash server on loopback with pipelining, beside redis-benchmark
#         against a local redis-server in the same run; memory per record at 10 million records.
# Environment: BENCH_SECONDS (default 5), BENCH_RECORDS (default 10000000).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
trap stop_all EXIT

seconds="${BENCH_SECONDS:-5}"
records="${BENCH_RECORDS:-10000000}"
work=$(mktemp -d /tmp/imhash-bench.XXXXXX)

bench_hash() {
  build_release --bench
  # The load generator needs a core of its own, as redis-benchmark does beside the single-threaded
  # redis-server: give the hash server the others (at least one shard).
  local shards=$(( $(nproc) > 1 ? $(nproc) - 1 : 1 ))
  echo "== hash server ($shards shards) vs redis-server: 50 connections, pipeline 16, ${seconds}s per phase, $(nproc) cores"
  local rport requests
  rport=$(free_port)
  # redis-benchmark runs a fixed request count; size it to about the same duration.
  requests=$((seconds * 400000))
  for round in 1 2; do
    start_daemon hash "$work" "$IMHASH_BUILD/hash_server/hash_server" --listen 127.0.0.1:0 \
      --shards "$shards" --log-level warn
    local out
    out=$("$IMHASH_BUILD/tools/hash_bench" --target "$LISTEN_ADDR" -c 50 -P 16 --duration "$seconds")
    imhash_set[round]=$(awk '/^SET:/ {print $2}' <<<"$out")
    imhash_get[round]=$(awk '/^GET:/ {print $2}' <<<"$out")
    stop_all

    redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no >"$work/redis.log" 2>&1 &
    STARTED_PIDS+=($!)
    for _ in $(seq 1 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.05; done
    out=$(redis-benchmark -p "$rport" -P 16 -c 50 -t set,get -n "$requests" -q 2>/dev/null | tr '\r' '\n')
    redis_set[round]=$(awk -F'[: ]+' '/^SET/ {print $2}' <<<"$out" | tail -n 1)
    redis_get[round]=$(awk -F'[: ]+' '/^GET/ {print $2}' <<<"$out" | tail -n 1)
    stop_all
    printf "round %d  imhash SET %10.0f GET %10.0f   redis SET %10.0f GET %10.0f   ratio SET %.2f GET %.2f\n" \
      "$round" "${imhash_set[round]}" "${imhash_get[round]}" "${redis_set[round]}" "${redis_get[round]}" \
      "$(echo "${imhash_set[round]} / ${redis_set[round]}" | bc -l)" \
      "$(echo "${imhash_get[round]} / ${redis_get[round]}" | bc -l)"
  done

  echo "== memory per record at $records records"
  start_daemon hash "$work" "$IMHASH_BUILD/hash_server/hash_server" --listen 127.0.0.1:0 \
    --shards "$shards" --log-level warn
  "$IMHASH_BUILD/tools/hash_bench" --target "$LISTEN_ADDR" --fill "$records" --pid "$DAEMON_PID" |
    sed 's/^/imhash: /'
  stop_all
  redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --enable-debug-command yes \
    >"$work/redis.log" 2>&1 &
  STARTED_PIDS+=($!)
  for _ in $(seq 1 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.05; done
  local before after
  before=$(redis-cli -p "$rport" info memory | awk -F: '/^used_memory_rss:/ {print $2+0}')
  # Keys like "user:123" with an 18-byte value: the same information as one imhash record.
  redis-cli -p "$rport" debug populate "$records" user 18 >/dev/null
  after=$(redis-cli -p "$rport" info memory | awk -F: '/^used_memory_rss:/ {print $2+0}')
  printf "redis:  records %d  rss_before %d  rss_after %d  bytes_per_record %.1f\n" \
    "$records" "$before" "$after" "$(echo "($after - $before) / $records" | bc -l)"
  stop_all
}

declare -a imhash_set imhash_get redis_set redis_get
case "${1:-}" in
  hash) bench_hash ;;
  *) echo "usage: scripts/bench.sh hash" >&2; exit 64 ;;
esac
