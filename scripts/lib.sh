# Shared helpers for the scripts: building, starting daemons on port 0 and reading their
# "listening on" lines, and cleaning up whatever was started. Source it; don't run it.

IMHASH_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMHASH_BUILD="${IMHASH_BUILD:-$IMHASH_ROOT/build}"
STARTED_PIDS=()

# build_release [--bench] [-D...]: setup.sh (with --bench), then configure and build
# $IMHASH_BUILD; further arguments go to cmake (for instance -DIMHASH_WERROR=ON).
build_release() {
  local setup=() defs=()
  for a in "$@"; do
    if [[ $a == -D* ]]; then defs+=("$a"); else setup+=("$a"); fi
  done
  "$IMHASH_ROOT/scripts/setup.sh" "${setup[@]}"
  # IMHASH_NO_BUILD=1: use the binaries already in $IMHASH_BUILD as they are.
  [[ "${IMHASH_NO_BUILD:-0}" == 1 ]] && return 0
  cmake -S "$IMHASH_ROOT" -B "$IMHASH_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${defs[@]}" \
    >/dev/null
  local log
  log=$(mktemp)
  if ! cmake --build "$IMHASH_BUILD" -j2 >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "build failed" >&2
    return 1
  fi
  rm -f "$log"
}

# start_daemon NAME LOGDIR CMD... : starts CMD in the background with stdout to LOGDIR/NAME.out,
# waits for its first "listening on" line and sets LISTEN_ADDR and DAEMON_PID.
start_daemon() {
  local name="$1" logdir="$2"
  shift 2
  # Created before the child starts, so the first read below never races its redirection.
  : >"$logdir/$name.out"
  : >"$logdir/$name.log"
  "$@" >"$logdir/$name.out" 2>"$logdir/$name.log" &
  DAEMON_PID=$!
  STARTED_PIDS+=("$DAEMON_PID")
  for _ in $(seq 1 200); do
    LISTEN_ADDR=$(sed -n 's/^listening on //p' "$logdir/$name.out" | head -n 1)
    [[ -n "$LISTEN_ADDR" ]] && return 0
    kill -0 "$DAEMON_PID" 2>/dev/null || { echo "$name exited early:" >&2; cat "$logdir/$name.log" >&2; return 1; }
    sleep 0.05
  done
  echo "$name did not start listening within 10 s" >&2
  return 1
}

# start_config_server LOGDIR ARGS... : starts config_server with both listeners on 127.0.0.1
# port 0, its state in LOGDIR/state and ARGS, stdout to LOGDIR/config.out; waits for its two
# "listening on" lines and sets CONFIG_ADDR (the nodes' listener) and ADMIN_ADDR (the admin API).
start_config_server() {
  local logdir="$1"
  shift
  : >"$logdir/config.out"
  "$IMHASH_BUILD/config_server/config_server" --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
    --state-dir "$logdir/state" "$@" >"$logdir/config.out" 2>"$logdir/config.log" &
  STARTED_PIDS+=($!)
  for _ in $(seq 1 200); do
    [[ $(grep -c '^listening on' "$logdir/config.out") -ge 2 ]] && break
    sleep 0.05
  done
  CONFIG_ADDR=$(sed -n '1s/^listening on //p' "$logdir/config.out")
  ADMIN_ADDR=$(sed -n '2s/^listening on //p' "$logdir/config.out")
  [[ -n "$ADMIN_ADDR" ]] || { echo "the config server did not start:" >&2; cat "$logdir/config.log" >&2; return 1; }
}

# wait_registered ADMIN NAME: waits (bounded, 5 s) until the config server whose admin API is
# ADMIN lists the node NAME.
wait_registered() {
  for _ in $(seq 1 100); do
    "$IMHASH_BUILD/imctl/imctl" --admin "$1" --json status | grep -q "\"name\":\"$2\"" && return 0
    sleep 0.05
  done
  return 1
}

stop_all() {
  for pid in "${STARTED_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${STARTED_PIDS[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  STARTED_PIDS=()
}

# A free TCP port on loopback, for programs that cannot take port 0 (redis-server).
free_port() {
  local p
  for _ in $(seq 1 50); do
    p=$(shuf -i 20000-60000 -n 1)
    ss -Htln "sport = :$p" | grep -q . || { echo "$p"; return 0; }
  done
  return 1
}
