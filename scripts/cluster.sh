#!/usr/bin/env bash
# A local imhash cluster on loopback: hash servers and a login server from a table file.
# Usage:
#   scripts/cluster.sh start [--hash N] [--shards S] [--threads T] [--mode modulo|range|ring]
#                            [--replicas R]   (copies of each record, 1 to 3: docs/design.md §3)
#                            [--cluster-key-file FILE]   (every link proves the key: docs/security.md)
#                            [--tls-cert FILE --tls-key FILE --tls-ca FILE]   (TLS on login -> hash
#                            links; one certificate for every node: scripts/tls_certs.sh makes one)
#   scripts/cluster.sh status
#   scripts/cluster.sh stop
# State (pids, logs, table.json, addresses) lives in $IMHASH_RUN (default: run/cluster in the repo).
# The login server's UDP address is printed by start and status, and kept in $IMHASH_RUN/login.addr.
set -euo pipefail
# --help: the comment above.
[[ "${1:-}" == --help || "${1:-}" == -h ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | grep -v '^shellcheck'; exit 0; }
source "$(dirname "$0")/lib.sh"

run="${IMHASH_RUN:-$IMHASH_ROOT/run/cluster}"

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 64; }

alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# spawn NAME CMD...: starts a daemon detached from this shell, waits for "listening on".
spawn() {
  local name="$1"
  shift
  : >"$run/$name.out"
  setsid "$@" >"$run/$name.out" 2>"$run/$name.log" </dev/null &
  echo $! >"$run/$name.pid"
  for _ in $(seq 1 200); do
    local addr
    addr=$(sed -n 's/^listening on //p' "$run/$name.out" | head -n 1)
    if [[ -n "$addr" ]]; then echo "$addr" >"$run/$name.addr"; return 0; fi
    alive "$run/$name.pid" || { echo "$name failed to start:" >&2; cat "$run/$name.log" >&2; return 1; }
    sleep 0.05
  done
  echo "$name did not start listening within 10 s (see $run/$name.log)" >&2
  return 1
}

write_table() {
  local mode="$1" shards="$2" n="$3" replicas="$4" i
  {
    # "replicas" only when there are some, as the config server writes it (older nodes refuse it).
    local copies=""
    [[ $replicas != 1 ]] && copies="\"replicas\": $replicas, "
    echo "{\"version\": 1, \"mode\": \"$mode\", $copies\"servers\": ["
    for ((i = 1; i <= n; i++)); do
      printf '  {"name": "hash%d", "address": "%s", "shards": %d}%s\n' "$i" "$(cat "$run/hash$i.addr")" \
        "$shards" "$([[ $i -lt $n ]] && echo ,)"
    done
    echo "]"
    if [[ "$mode" == range ]]; then
      # Even split of the id space (as imctl would make it).
      echo ", \"ranges\": ["
      local step=$(( (1 << 62) / n * 4 )) lo=0
      for ((i = 1; i <= n; i++)); do
        if [[ $i -lt $n ]]; then
          printf '  {"lo": %s, "hi": %s, "server": "hash%d"},\n' "$lo" "$(bc <<<"$lo + $step - 1")" "$i"
          lo=$(bc <<<"$lo + $step")
        else
          printf '  {"lo": %s, "hi": 18446744073709551615, "server": "hash%d"}\n' "$lo" "$i"
        fi
      done
      echo "]"
    fi
    echo "}"
  } >"$run/table.json"
}

cmd_start() {
  local hash=3 shards=1 threads=1 mode=ring replicas=1 key=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --cluster-key-file) key+=(--cluster-key-file "$2"); shift 2 ;;
      --tls-cert | --tls-key | --tls-ca) key+=("$1" "$2"); shift 2 ;;
      --hash) hash="$2"; shift 2 ;;
      --shards) shards="$2"; shift 2 ;;
      --threads) threads="$2"; shift 2 ;;
      --mode) mode="$2"; shift 2 ;;
      --replicas) replicas="$2"; shift 2 ;;
      *) usage ;;
    esac
  done
  if ls "$run"/*.pid >/dev/null 2>&1; then
    for p in "$run"/*.pid; do
      if alive "$p"; then echo "a cluster is already running in $run (scripts/cluster.sh stop)" >&2; exit 1; fi
    done
  fi
  build_release
  mkdir -p "$run"
  rm -f "$run"/*.pid "$run"/*.addr "$run"/*.out "$run"/*.log
  local i
  for ((i = 1; i <= hash; i++)); do
    spawn "hash$i" "$IMHASH_BUILD/hash_server/hash_server" --listen 127.0.0.1:0 --name "hash$i" \
      --shards "$shards" --log-level warn "${key[@]}"
  done
  write_table "$mode" "$shards" "$hash" "$replicas"
  # --rate-limit 0: load tests send every simulated user from 127.0.0.1.
  spawn login "$IMHASH_BUILD/login_server/login_server" --udp 127.0.0.1:0 --table "$run/table.json" \
    --rate-limit 0 \
    --threads "$threads" --log-level warn "${key[@]}"
  cmd_status
}

cmd_status() {
  [[ -d "$run" ]] || { echo "no cluster in $run"; exit 1; }
  local p name state down=0
  for p in "$run"/*.pid; do
    [[ -e "$p" ]] || continue
    name=$(basename "$p" .pid)
    if alive "$p"; then state=up; else state=DOWN; down=1; fi
    printf '%-8s %-5s pid %-8s %s\n' "$name" "$state" "$(cat "$p")" "$(cat "$run/$name.addr" 2>/dev/null)"
  done
  [[ -f "$run/login.addr" ]] && echo "clients: udp_sim --target $(cat "$run/login.addr")"
  return $down
}

cmd_stop() {
  [[ -d "$run" ]] || return 0
  local p
  for p in "$run"/*.pid; do
    [[ -e "$p" ]] || continue
    kill -TERM "$(cat "$p")" 2>/dev/null || true
  done
  for p in "$run"/*.pid; do
    [[ -e "$p" ]] || continue
    for _ in $(seq 1 100); do alive "$p" || break; sleep 0.05; done
    alive "$p" && kill -KILL "$(cat "$p")" 2>/dev/null
    rm -f "$p"
  done
  echo "cluster in $run stopped"
}

case "${1:-}" in
  start) shift; cmd_start "$@" ;;
  status) cmd_status ;;
  stop) cmd_stop ;;
  *) usage ;;
esac
