# Shared by the fleet-routing scripts (replicas-routing.sh, token-aware-ttft.sh, pd-conditional.sh); sourced, not run.
# Processes started with `start` are recorded by PID and stopped (TERM, bounded wait, then KILL of the same PID) on
# exit; nothing else is touched. Everything binds 127.0.0.1. Needs: ROOT, NAME (the work directory's prefix).
ROOT="${ROOT:?}"
DATE="${DATE:-$(date -u +%Y-%m-%d)}"
JAVA_HOME="${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}"
# Below the ephemeral range (32768+: outgoing connections of any process may hold those) and fresh per run.
PORT_BASE="${PORT_BASE:-$((20000 + (RANDOM % 150) * 80))}"
WORK="$(mktemp -d "/tmp/kvgate-${NAME:?}.XXXXXX")"
PIDS=()

cleanup() {
  local p
  for p in "${PIDS[@]}"; do
    if kill -0 "$p" 2>/dev/null; then kill "$p" 2>/dev/null || true; fi
  done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then kill -9 "$p" 2>/dev/null || true; fi
    wait "$p" 2>/dev/null || true
  done
  if [ -n "${KEEP_WORK:-}" ]; then echo "work directory kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "[$NAME $(date -u +%H:%M:%S)] $*" >&2; }

# The tools jar the way the launcher runs it (exec: the recorded PID is the JVM itself).
. "$ROOT/deploy/jvm-host.sh"
kv() { exec "$JAVA_HOME/bin/java" @"$ROOT/deploy/jvm.options" $(kvgate_host_jvm_options) ${KVGATE_JAVA_OPTS:-} -Dkvgate.home="$ROOT" \
  -cp "$ROOT/tools/target/kvgate-tools.jar:$ROOT/tools/target/lib/*" io.kvgate.tools.Main "$@"; }

start() { # start NAME CMD... : background, PID recorded, log in $WORK/NAME.log
  local name="$1"; shift
  ( "$@" >"$WORK/$name.log" 2>&1 ) &
  PIDS+=("$!")
  eval "PID_${name//[^A-Za-z0-9_]/_}=$!"
}

stop() { # stop NAME : the process started under NAME, by its PID (bounded wait, then KILL)
  local var="PID_${1//[^A-Za-z0-9_]/_}" p
  p="${!var:-}"
  [ -n "$p" ] || return 0
  kill "$p" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$p" 2>/dev/null; then kill -9 "$p" 2>/dev/null || true; fi
  wait "$p" 2>/dev/null || true
  eval "$var="
}

wait_http() { # wait_http NAME PORT [PATH] : until GET PATH (default /health) answers 200 (bounded: 60 s)
  local name="$1" port="$2" path="${3:-/health}"
  for _ in $(seq 1 300); do
    if curl -s -o /dev/null -m 1 -w '%{http_code}' "http://127.0.0.1:$port$path" 2>/dev/null | grep -q 200; then return 0; fi
    sleep 0.2
  done
  echo "$name (port $port) did not answer 200 on $path within 60 s; log:" >&2; tail -30 "$WORK/$name.log" >&2; exit 1
}

bench() { # bench NAME ARGS... : ./kvgate bench, JSON report in $WORK/NAME.json (bounded by BENCH_TIMEOUT)
  local name="$1"; shift
  log "bench $name: $*"
  timeout "${BENCH_TIMEOUT:-600}" "$JAVA_HOME/bin/java" @"$ROOT/deploy/jvm.options" -Dkvgate.home="$ROOT" \
    -cp "$ROOT/tools/target/kvgate-tools.jar:$ROOT/tools/target/lib/*" io.kvgate.tools.Main bench "$@" --quiet \
    --out "$WORK/$name.json" >"$WORK/bench-$name.log" 2>&1 \
    || { echo "bench $name failed:" >&2; tail -30 "$WORK/bench-$name.log" >&2; exit 1; }
}

machine() {
  echo "$(lscpu | grep 'Model name' | sed 's/  */ /g; s/^Model name: *//'); nproc=$(nproc); mem=$(free -g | awk '/Mem:/{print $2}') GiB;" \
    "kernel $(uname -r); $("$JAVA_HOME/bin/java" -version 2>&1 | head -1 || true)"
}

[ -f "$ROOT/tools/target/kvgate-tools.jar" ] || { echo "build first: ./mvnw -o -q -B -DskipTests package -pl tools -am" >&2; exit 1; }
command -v curl >/dev/null || { echo "needs curl" >&2; exit 1; }
command -v python3 >/dev/null || { echo "needs python3 (the summary)" >&2; exit 1; }
