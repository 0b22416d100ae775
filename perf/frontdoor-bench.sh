#!/usr/bin/env bash
# Front-door benchmark: the same 1 KiB and 16 KiB OpenAI chat POSTs sent (a) straight to an origin, (b) through
# nginx, (c) through HAProxy, (d) through kvgate. Every proxy is pinned as a whole process to core 1 (taskset); the
# load generator and the origin share core 0. One run measures, side by side:
#   - throughput at saturation: wrk, POST body from a Lua script, fixed connections, closed loop;
#   - latency at fixed request rates: h2load --h1 --rps (paced, per-request log -> p50/p99/p99.9);
#   - the proxy's own cost: CPU microseconds and context switches per request (from /proc, all its threads/workers);
#   - a repeat of the kvgate-vs-nginx throughput pair (the machine is shared and noisy: read the ratios);
#   - kvgate's kv_exact rule against a round-robin rule on the same 1 KiB token-id prompts (/v1/completions),
#     three interleaved rounds: what KV-aware routing costs per request on the same core;
#   - profiles at 1 KiB saturation: perf cpu-clock per proxy (kernel / user / JIT split, top symbols), syscalls and
#     epoll_ctl per request (perf stat tracepoints), and a JFR recording of kvgate (useful with PRIO=nice only).
# Everything listens on 127.0.0.1 only. Every process started here is recorded by PID and only those are killed.
#
# usage: perf/frontdoor-bench.sh            (about 8 minutes; results: perf/results/frontdoor-*.md)
# env:   DURATION_S=10 LAT_DURATION_S=6 LAT_WARMUP_S=8 LAT_ROUNDS=3 JIT_QUIET_MS=100 WARMUP_MAX_S=120 CONNS=32 LAT_CONNS=16 RATES="2000 8000" PRIO=none|rr|nice OUT=DIR
#        KVGATE_JAVA_OPTS=...  SKIP_PROFILE=1  PROFILE_S=6
#        KVGATE_B_OPTS="-D..."  adds a second gateway, "kvgate-b" (same config, these extra JVM options; own ports
#        +6/+7) measured side by side with the first in every step: an A/B harness for a gateway change.
#        CORE_PROXY=1 CORE_LOAD=0 ; ports: PORT_BASE=19100 (origin +1, nginx +2, haproxy +3, kvgate +4, admin +5)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HERE="$ROOT/perf/frontdoor"
DURATION_S="${DURATION_S:-10}"
CONNS="${CONNS:-32}"
LAT_CONNS="${LAT_CONNS:-16}"
RATES="${RATES:-2000 8000}"
LAT_DURATION_S="${LAT_DURATION_S:-6}"
LAT_WARMUP_S="${LAT_WARMUP_S:-8}"
LAT_ROUNDS="${LAT_ROUNDS:-3}"
# Scheduling. The default is the normal scheduler (CFS), as a gateway host runs it: PRIO=none. PRIO=rr runs every
# process of the benchmark (origin, proxies, load generators) SCHED_RR priority 10, so that on a machine shared with
# unrelated CPU-bound work the proxy under test gets its core whenever it has work (the kernel's RT throttling still
# leaves 5% of each core to everything else); it hides the cost of thread hand-offs (a woken thread does not preempt
# its waker), so report it separately, never instead of the CFS run. PRIO=nice runs them at nice -10.
PRIO="${PRIO:-none}"
case "$PRIO" in
  rr) PRI=(chrt -r 10) ;;
  nice) PRI=(nice -n -10) ;;
  none) PRI=() ;;
  *) echo "PRIO must be rr, nice or none" >&2; exit 2 ;;
esac
CORE_PROXY="${CORE_PROXY:-1}"
CORE_LOAD="${CORE_LOAD:-0}"
PORT_BASE="${PORT_BASE:-19100}"
ORIGIN_PORT=$((PORT_BASE + 1)); NGINX_PORT=$((PORT_BASE + 2)); HAPROXY_PORT=$((PORT_BASE + 3))
KVGATE_PORT=$((PORT_BASE + 4)); KVGATE_ADMIN_PORT=$((PORT_BASE + 5))
KVGATE_B_PORT=$((PORT_BASE + 6)); KVGATE_B_ADMIN_PORT=$((PORT_BASE + 7)); KVGATE_B_OPTS="${KVGATE_B_OPTS:-}"
KV_EVENTS_PORT=$((PORT_BASE + 8)) # named by the kv_exact rule; nothing listens there
OUT="${OUT:-${TMPDIR:-/tmp}/kvgate-frontdoor-$(date -u +%Y%m%dT%H%M%SZ)}" # raw logs and profiles
RUN="$OUT/run"
export KVGATE_JAVA_OPTS="${KVGATE_JAVA_OPTS:--Xms512m -Xmx512m -XX:+AlwaysPreTouch}"
mkdir -p "$RUN"
SUMMARY="$OUT/summary.md"
log() { echo "[frontdoor $(date -u +%H:%M:%S)] $*" >&2; }

# ---- tools -------------------------------------------------------------------------------------------------------
need=()
command -v nginx >/dev/null || need+=(nginx)
command -v haproxy >/dev/null || need+=(haproxy)
command -v wrk >/dev/null || need+=(wrk)
command -v h2load >/dev/null || need+=(nghttp2-client)
command -v taskset >/dev/null || need+=(util-linux)
command -v curl >/dev/null || need+=(curl)
command -v perf >/dev/null || need+=(linux-perf)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null || \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]/linux-perf/}" >/dev/null # perf is optional
fi
if [ "$PRIO" = rr ] && ! chrt -r 10 true 2>/dev/null; then
  log "cannot use SCHED_RR here (needs root or CAP_SYS_NICE): falling back to PRIO=nice"; PRIO=nice; PRI=(nice -n -10)
fi
[ "$(nproc)" -ge 2 ] || { echo "needs 2 cores (core $CORE_LOAD: load + origin, core $CORE_PROXY: proxy)" >&2; exit 1; }

# ---- processes: started here, recorded, and only these are stopped -------------------------------------------------
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    local alive=0
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for port in $ORIGIN_PORT $NGINX_PORT $HAPROXY_PORT $KVGATE_PORT $KVGATE_ADMIN_PORT $KVGATE_B_PORT $KVGATE_B_ADMIN_PORT $KV_EVENTS_PORT; do
  if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then echo "port $port is in use: set PORT_BASE" >&2; exit 1; fi
done

render() { # template -> file with the ports and run dir filled in
  sed -e "s#@RUN@#$RUN#g" -e "s#@ORIGIN_PORT@#$ORIGIN_PORT#g" -e "s#@NGINX_PORT@#$NGINX_PORT#g" \
      -e "s#@HAPROXY_PORT@#$HAPROXY_PORT#g" -e "s#@KVGATE_PORT@#$KVGATE_PORT#g" \
      -e "s#@KVGATE_ADMIN_PORT@#$KVGATE_ADMIN_PORT#g" -e "s#@KV_EVENTS_PORT@#$KV_EVENTS_PORT#g" "$1" > "$2"
}
render "$HERE/nginx-origin.conf.in" "$RUN/origin.conf"
render "$HERE/nginx-proxy.conf.in" "$RUN/nginx-proxy.conf"
render "$HERE/haproxy.cfg.in" "$RUN/haproxy.cfg"
render "$HERE/kvgate.yaml.in" "$RUN/kvgate.yaml"
sed -e "s#@RUN@#$RUN#g" -e "s#@ORIGIN_PORT@#$ORIGIN_PORT#g" -e "s#@KVGATE_PORT@#$KVGATE_B_PORT#g" -e "s#@KVGATE_ADMIN_PORT@#$KVGATE_B_ADMIN_PORT#g" \
  -e "s#@KV_EVENTS_PORT@#$((KV_EVENTS_PORT + 1))#g" "$HERE/kvgate.yaml.in" > "$RUN/kvgate-b.yaml"

. "$HERE/bodies.sh"
make_body 1024 "$RUN/body-1k.json"
make_body 16384 "$RUN/body-16k.json"
# Token-id prompts for the kv_exact / round-robin pair (the model names have the same length).
make_token_body bench-kv "$RUN/body-kv.json"
make_token_body bench-rr "$RUN/body-rr.json"

# Build once, here: each `./kvgate serve` below would otherwise build on its own (and two builds at once collide).
log "building kvgate if needed"
(cd "$ROOT" && ./kvgate --help) > "$RUN/build.log" 2>&1 || true
JAR="$ROOT/tools/target/kvgate-tools.jar"
# (perf/ is not part of the gateway: its sources do not make the gateway stale, as in the launcher)
if [ ! -f "$JAR" ] || [ -n "$(find "$ROOT" \( -path "$ROOT/.git" -o -path "$ROOT/perf" \) -prune -o \( -path '*/src/main/*' -o -name pom.xml \) -newer "$JAR" -print -quit)" ]; then
  echo "kvgate build failed or is stale; see $RUN/build.log" >&2; tail -20 "$RUN/build.log" >&2; exit 1
fi

log "starting origin (nginx, core $CORE_LOAD), nginx, haproxy, kvgate (core $CORE_PROXY)"
"${PRI[@]}" taskset -c "$CORE_LOAD" nginx -p "$RUN" -e "$RUN/origin-error.log" -c "$RUN/origin.conf" & PIDS+=($!); ORIGIN_PID=$!
"${PRI[@]}" taskset -c "$CORE_PROXY" nginx -p "$RUN" -e "$RUN/nginx-proxy-error.log" -c "$RUN/nginx-proxy.conf" & PIDS+=($!); NGINX_PID=$!
"${PRI[@]}" taskset -c "$CORE_PROXY" haproxy -db -f "$RUN/haproxy.cfg" > "$RUN/haproxy.log" 2>&1 & PIDS+=($!); HAPROXY_PID=$!
(cd "$ROOT" && exec "${PRI[@]}" taskset -c "$CORE_PROXY" ./kvgate serve --config "$RUN/kvgate.yaml") > "$RUN/kvgate.log" 2>&1 & PIDS+=($!); KVGATE_PID=$!

declare -A PORT=([direct]=$ORIGIN_PORT [nginx]=$NGINX_PORT [haproxy]=$HAPROXY_PORT [kvgate]=$KVGATE_PORT)
declare -A PID=([direct]=$ORIGIN_PID [nginx]=$NGINX_PID [haproxy]=$HAPROXY_PID [kvgate]=$KVGATE_PID)
TARGETS=(direct nginx haproxy kvgate)
GATEWAYS=(kvgate)
if [ -n "$KVGATE_B_OPTS" ]; then
  (cd "$ROOT" && KVGATE_JAVA_OPTS="$KVGATE_JAVA_OPTS $KVGATE_B_OPTS" exec "${PRI[@]}" taskset -c "$CORE_PROXY" \
    ./kvgate serve --config "$RUN/kvgate-b.yaml") > "$RUN/kvgate-b.log" 2>&1 & PIDS+=($!)
  PORT[kvgate-b]=$KVGATE_B_PORT; PID[kvgate-b]=$!
  TARGETS+=(kvgate-b); GATEWAYS+=(kvgate-b)
  log "kvgate-b: extra JVM options $KVGATE_B_OPTS"
fi

for t in "${TARGETS[@]}"; do
  ok=0
  for _ in $(seq 300); do
    kill -0 "${PID[$t]}" 2>/dev/null || { echo "$t exited; see $RUN" >&2; tail -n 20 "$RUN"/*.log >&2; exit 1; }
    code=$(curl -s -o "$RUN/check-$t.json" -w '%{http_code}' -H 'Content-Type: application/json' \
      --data-binary @"$RUN/body-16k.json" "http://127.0.0.1:${PORT[$t]}/v1/chat/completions" || true)
    if [ "$code" = 200 ] && grep -q chatcmpl-bench "$RUN/check-$t.json"; then ok=1; break; fi
    sleep 0.2
  done
  [ $ok = 1 ] || { echo "$t did not answer 200 on 127.0.0.1:${PORT[$t]} (last: $code)" >&2; exit 1; }
done
for m in kv rr; do
  code=$(curl -s -o "$RUN/check-kvgate-$m.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$RUN/body-$m.json" "http://127.0.0.1:$KVGATE_PORT/v1/completions" || true)
  [ "$code" = 200 ] || { echo "kvgate rule bench-$m did not answer 200 (got $code): $(cat "$RUN/check-kvgate-$m.json")" >&2; exit 1; }
done
log "all targets answer 200 with the origin's completion (kvgate: also the kv_exact and round-robin token-id rules)"

# ---- measurement helpers -----------------------------------------------------------------------------------------
proc_tree() { echo "$1"; pgrep -P "$1" || true; } # nginx: master + worker; java/haproxy: one process
cpu_ticks() { # utime+stime of the process tree (all threads), clock ticks
  local s=0 p
  for p in $(proc_tree "$1"); do
    [ -r "/proc/$p/stat" ] || continue
    s=$((s + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}')))
  done
  echo $s
}
ctx_switches() { # voluntary + involuntary context switches of every thread of the process tree
  local p; for p in $(proc_tree "$1"); do cat /proc/"$p"/task/*/status 2>/dev/null; done \
    | awk '/^(voluntary|nonvoluntary)_ctxt_switches/ {s += $2} END {print s + 0}'
}
HZ=$(getconf CLK_TCK)
# Time the hypervisor took from a core (the steal column of /proc/stat), clock ticks. On a shared VM host a burst
# of steal on the proxy's core stalls whichever proxy is being measured then: it is recorded beside every run.
steal_ticks() { awk -v c="cpu$1" '$1 == c {print $9}' /proc/stat; }
steal_ms() { awk -v a="$1" -v b="$2" -v hz="$HZ" 'BEGIN {printf "%.0f", (b - a) * 1000 / hz}'; }
BODY() { echo "$RUN/body-$1.json"; }

# measure_tput TARGET PAYLOAD LABEL
#   -> appends "LABEL target payload rps cpu_us_per_req cs_per_req non2xx steal_ms" to tput.tsv
measure_tput() {
  local t=$1 pl=$2 label=$3 f="$OUT/wrk-$3-$1-$2.txt"
  local c0 s0 c1 s1 st0 st1
  c0=$(cpu_ticks "${PID[$t]}"); s0=$(ctx_switches "${PID[$t]}"); st0=$(steal_ticks "$CORE_PROXY")
  BODY_FILE="$(BODY "$pl")" URI_PATH="$(uri_of "$pl")" "${PRI[@]}" taskset -c "$CORE_LOAD" wrk -t1 -c"$CONNS" \
    -d"${DURATION_S}s" --latency -s "$HERE/post.lua" "http://127.0.0.1:${PORT[$t]}" > "$f" 2>&1
  c1=$(cpu_ticks "${PID[$t]}"); s1=$(ctx_switches "${PID[$t]}"); st1=$(steal_ticks "$CORE_PROXY")
  local rps n2 total
  rps=$(awk '/^Requests\/sec:/ {print $2}' "$f")
  total=$(awk '/requests in/ {print $1}' "$f")
  n2=$(awk '/Non-2xx or 3xx responses:/ {print $5}' "$f"); n2=${n2:-0}
  if grep -q 'Socket errors' "$f"; then n2="$n2+sockerr"; fi
  local cpu_us cs
  cpu_us=$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" -v n="$total" 'BEGIN {printf "%.1f", (b - a) * 1e6 / hz / n}')
  cs=$(awk -v a="$s0" -v b="$s1" -v n="$total" 'BEGIN {printf "%.2f", (b - a) / n}')
  [ "$t" = direct ] && { cpu_us=-; cs=-; } # the origin shares core 0 with wrk: its cost is not a proxy cost
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$t" "$pl" "$rps" "$cpu_us" "$cs" "$n2" "$(steal_ms "$st0" "$st1")" >> "$OUT/tput.tsv"
  log "throughput $label $t $pl: $rps req/s, proxy ${cpu_us} us CPU/req, ${cs} ctx-switches/req, non-2xx $n2, steal $(tail -n 1 "$OUT/tput.tsv" | cut -f8)ms"
}

# lat TARGET PAYLOAD RATE LABEL
#   -> appends "LABEL target payload rate achieved p50 p99 p999 max non200 steal_ms jit_ms" to lat.tsv
#   (jit_ms: the gateway's JIT compilation time inside the run, jstat; "-" for nginx, HAProxy and the origin)
lat() {
  local t=$1 pl=$2 rate=$3 label=$4 f="$OUT/h2load-$4-$1-$2-$3"
  local per=$(( rate / LAT_CONNS )) st0 st1 j0=- j1=-
  case "$t" in kvgate*) j0=$(jit_ms "$t") ;; esac
  st0=$(steal_ticks "$CORE_PROXY")
  "${PRI[@]}" taskset -c "$CORE_LOAD" h2load --h1 -t1 -c"$LAT_CONNS" -m1 --rps="$per" -D "$LAT_DURATION_S" --warm-up-time=1 \
    -d "$(BODY "$pl")" -H 'content-type: application/json' --log-file="$f.log" \
    "http://127.0.0.1:${PORT[$t]}/v1/chat/completions" > "$f.txt" 2>&1 || true
  st1=$(steal_ticks "$CORE_PROXY")
  case "$t" in kvgate*) j1=$(jit_ms "$t"); j1=$((j1 - j0)) ;; esac
  # Columns: start (us since epoch), status, duration (us). The warm-up rows are not logged by h2load.
  local row
  row=$(awk '{print $3, $2}' "$f.log" | sort -n | awk -v d="$LAT_DURATION_S" '
    {v[NR] = $1; if ($2 != 200) bad++}
    END {
      n = NR; if (n == 0) {print "0 - - - - 0"; exit}
      p50 = v[int(0.50 * (n - 1)) + 1]; p99 = v[int(0.99 * (n - 1)) + 1]; p999 = v[int(0.999 * (n - 1)) + 1]
      printf "%.0f %d %d %d %d %d\n", n / d, p50, p99, p999, v[n], bad + 0
    }')
  read -r ach p50 p99 p999 max bad <<< "$row"
  local steal; steal=$(steal_ms "$st0" "$st1")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$t" "$pl" "$rate" "$ach" "$p50" "$p99" "$p999" "$max" "$bad" "$steal" "$j1" >> "$OUT/lat.tsv"
  log "latency $label $t $pl @${rate}/s: achieved ${ach}/s p50 ${p50}us p99 ${p99}us p99.9 ${p999}us max ${max}us non-200 $bad, steal ${steal}ms, JIT ${j1}ms"
  rm -f "$f.log"
}

# ---- warm-up: JIT for kvgate (both payloads), keep-alive pools for everyone --------------------------------------
# C2 on the gateway's one core needs tens of seconds of load to settle: a JFR recording of 16 KiB saturation from a
# cold start showed 8.2 s of compilation in the first 8 s, 4.3 s in the next 8, and 1.2 s around 30 s (recompiles
# after type-profile deoptimizations; single compiles of 400-570 ms), so a fixed 10 s warm-up left compiles inside
# the measured runs. Each gateway is loaded with both payloads in turn, 5 s runs, until a run sees less than
# JIT_QUIET_MS of compilation (jstat -compiler), at least 4 runs and at most WARMUP_MAX_S; the summary says how long.
JIT_QUIET_MS="${JIT_QUIET_MS:-100}"; WARMUP_MAX_S="${WARMUP_MAX_S:-120}"
jit_ms() { # gateway -> total JIT compile milliseconds so far
  taskset -c "$CORE_LOAD" "$(dirname "$(readlink -f /proc/"${PID[$1]}"/exe)")/jstat" -compiler "${PID[$1]}" | awk 'NR == 2 {printf "%.0f", $4 * 1000}'
}
warm_until_quiet() { # gateway uri-payloads... (alternated)
  local g=$1; shift
  local n=0 t=0 before after spent pl
  while :; do
    pl=${*:$(( n % $# + 1 )):1}
    before=$(jit_ms "$g")
    BODY_FILE="$(BODY "$pl")" URI_PATH="$(uri_of "$pl")" "${PRI[@]}" taskset -c "$CORE_LOAD" wrk -t1 -c"$CONNS" -d5s \
      -s "$HERE/post.lua" "http://127.0.0.1:${PORT[$g]}" > "$OUT/warmup-$g-$pl-$n.txt" 2>&1
    after=$(jit_ms "$g"); spent=$((after - before)); n=$((n + 1)); t=$((t + 5))
    log "warm-up $g $pl: ${spent} ms of JIT compilation in 5 s"
    if { [ $n -ge 4 ] && [ "$spent" -lt "$JIT_QUIET_MS" ]; } || [ $t -ge "$WARMUP_MAX_S" ]; then break; fi
  done
  printf '%s\t%s\t%d\t%d\n' "$g" "$*" "$t" "$spent" >> "$OUT/warmup.tsv"
}
: > "$OUT/warmup.tsv"
log "warm-up"
for g in "${GATEWAYS[@]}"; do warm_until_quiet "$g" 1k 16k; done
for pl in 1k 16k; do
  for t in direct nginx haproxy; do
    BODY_FILE="$(BODY $pl)" "${PRI[@]}" taskset -c "$CORE_LOAD" wrk -t1 -c"$CONNS" -d2s -s "$HERE/post.lua" "http://127.0.0.1:${PORT[$t]}" > "$OUT/warmup-$t-$pl.txt" 2>&1
  done
done

: > "$OUT/tput.tsv"; : > "$OUT/lat.tsv"
log "throughput at saturation (wrk -t1 -c$CONNS -d${DURATION_S}s)"
for pl in 1k 16k; do for t in "${TARGETS[@]}"; do measure_tput "$t" "$pl" r1; done; done
# Paced load takes code paths saturation does not (connections idle between requests: their timers fire, reads
# come one request at a time), and C2 was measured still compiling them through the first paced run after the wrk
# warm-up (perf sched: the compiler thread ran beside the I/O thread on its core, p99 2-3x that of a later run).
# Every gateway gets the paced load at each rate first, so the latency measured is that of a warm process (nginx and
# HAProxy compile nothing at run time). Compiles that slow periodic work (the ingest poll, timers) brings minutes
# after start still land in some runs: perf/results/frontdoor-2026-12-03.md.
log "latency warm-up: ${LAT_WARMUP_S}s of the paced load per rate and payload on each gateway"
for rate in $RATES; do for pl in 1k 16k; do for g in "${GATEWAYS[@]}"; do
  "${PRI[@]}" taskset -c "$CORE_LOAD" h2load --h1 -t1 -c"$LAT_CONNS" -m1 --rps="$(( rate / LAT_CONNS ))" -D "$LAT_WARMUP_S" \
    -d "$(BODY "$pl")" -H 'content-type: application/json' "http://127.0.0.1:${PORT[$g]}/v1/chat/completions" \
    > "$OUT/warmup-lat-$g-$pl-$rate.txt" 2>&1 || true
done; done; done
log "latency at fixed rates (h2load --h1 -c$LAT_CONNS --rps, rates: $RATES)"
# One 6 s paced run is at the mercy of a burst of steal or another tenant: nginx and the gateways are measured in
# LAT_ROUNDS back-to-back rounds at each rate and payload (the origin and HAProxy once), and the ratios are per round
# with their median.
for rate in $RATES; do for pl in 1k 16k; do
  for t in direct haproxy; do lat "$t" "$pl" "$rate" r1; done
  for r in $(seq 1 "$LAT_ROUNDS"); do lat nginx "$pl" "$rate" "r$r"; for g in "${GATEWAYS[@]}"; do lat "$g" "$pl" "$rate" "r$r"; done; done
done; done
log "repeat: nginx vs kvgate, throughput, two more rounds"
for r in r2 r3; do for pl in 1k 16k; do
  measure_tput nginx "$pl" $r; for g in "${GATEWAYS[@]}"; do measure_tput "$g" "$pl" $r; done
done; done
log "kvgate: kv_exact rule vs round-robin rule, 1 KiB token-id prompts, three interleaved rounds"
for g in "${GATEWAYS[@]}"; do warm_until_quiet "$g" kv rr; done
for r in r1 r2 r3; do for g in "${GATEWAYS[@]}"; do measure_tput "$g" rr $r; measure_tput "$g" kv $r; done; done

# ---- gateway-wide allocation per proxied request (1 KiB, saturation) ------------------------------------------------
# JFR records every thread's cumulative allocated bytes when the recording starts and when it stops (alloc.jfc: no
# other events), around one wrk run: bytes / requests = what one proxied request allocates in the whole gateway
# (I/O thread, routing thread, everything). nginx allocates from per-request pools and has no GC heap: nothing to
# compare but its CPU.
alloc_per_request() { # gateway
  local g=$1 jdk rec total
  jdk="$(dirname "$(readlink -f /proc/"${PID[$g]}"/exe)")"
  rec="$OUT/alloc-$g-1k.jfr"
  "$jdk/jcmd" "${PID[$g]}" JFR.start name=alloc settings="$HERE/alloc.jfc" filename="$rec" > "$RUN/jfr-alloc-start-$g.txt" 2>&1 || return 0
  BODY_FILE="$(BODY 1k)" "${PRI[@]}" taskset -c "$CORE_LOAD" wrk -t1 -c"$CONNS" -d"${ALLOC_S:-6}s" -s "$HERE/post.lua" \
    "http://127.0.0.1:${PORT[$g]}" > "$OUT/wrk-alloc-$g-1k.txt" 2>&1
  "$jdk/jcmd" "${PID[$g]}" JFR.stop name=alloc > "$RUN/jfr-alloc-stop-$g.txt" 2>&1 || return 0
  total=$(awk '/requests in/ {print $1}' "$OUT/wrk-alloc-$g-1k.txt")
  "$jdk/jfr" print --json --events jdk.ThreadAllocationStatistics "$rec" | python3 "$HERE/jfr-alloc.py" \
    | awk -v g="$g" -v n="$total" '{printf "%s\t%d\t%d\t%.0f\t%d\n", g, n, $1, $1 / n, $2}' >> "$OUT/alloc.tsv"
  log "allocation $g 1k: $(tail -n 1 "$OUT/alloc.tsv" | cut -f4) bytes per request"
}
: > "$OUT/alloc.tsv"
log "gateway-wide allocation per request (JFR ThreadAllocationStatistics around a ${ALLOC_S:-6}s 1 KiB run)"
for g in "${GATEWAYS[@]}"; do alloc_per_request "$g"; done

# ---- profiles at saturation, 1 KiB (separate from the measured runs: recording costs a little) ------------------
# Every proxy: perf cpu-clock sampling (kernel vs user vs JIT-compiled code, per thread; JIT symbols come from the
# perf map that `jcmd Compiler.perfmap` writes) and syscall counts per request (tracepoints). kvgate: also JFR.
PROFILE_S="${PROFILE_S:-6}"
perf_profile() { # target
  local t=$1 pids prec pstat total
  pids=$(proc_tree "${PID[$t]}" | paste -sd,)
  perf record -q -e cpu-clock -F 999 -p "$pids" -o "$RUN/perf-$t.data" > "$RUN/perf-$t.log" 2>&1 & prec=$!
  PIDS+=($prec)
  perf stat -x, -e raw_syscalls:sys_enter,syscalls:sys_enter_epoll_ctl,context-switches -p "$pids" \
    -o "$RUN/perf-stat-$t.csv" > /dev/null 2>&1 & pstat=$!
  PIDS+=($pstat)
  sleep 0.5
  BODY_FILE="$(BODY 1k)" "${PRI[@]}" taskset -c "$CORE_LOAD" wrk -t1 -c"$CONNS" -d"${PROFILE_S}s" -s "$HERE/post.lua" \
    "http://127.0.0.1:${PORT[$t]}" > "$OUT/wrk-profile-$t-1k.txt" 2>&1
  kill -INT "$prec" "$pstat" 2>/dev/null || true
  wait "$prec" "$pstat" 2>/dev/null || true
  total=$(awk '/requests in/ {print $1}' "$OUT/wrk-profile-$t-1k.txt")
  awk -F, -v n="$total" -v t="$t" '$3 ~ /sys_enter$/ {s = $1} $3 ~ /epoll_ctl/ {e = $1} $3 ~ /context-switches/ {c = $1}
    END {printf "%s\t%.2f\t%.2f\t%.3f\n", t, s / n, e / n, c / n}' "$RUN/perf-stat-$t.csv" >> "$OUT/syscalls.tsv"
}
perf_summary() { # target
  local t=$1
  { echo "# perf cpu-clock samples of $t at 1 KiB saturation, by thread and DSO"
    perf report -i "$RUN/perf-$t.data" --stdio --no-children --sort comm,dso 2>/dev/null | grep -v '^#' | grep -v '^$' | head -25 || true
    echo; echo "# top symbols"
    perf report -i "$RUN/perf-$t.data" --stdio --no-children --sort dso,sym 2>/dev/null | grep -v '^#' | grep -v '^$' | head -80 || true
  } > "$OUT/perf-$t.txt"
}
if [ "${SKIP_PROFILE:-0}" != 1 ]; then
  JDK_BIN="$(dirname "$(readlink -f /proc/"$KVGATE_PID"/exe)")" # the JDK that runs the gateway
  JCMD="$JDK_BIN/jcmd"; JFR_BIN="$JDK_BIN/jfr"
  log "profiles at 1k saturation (${PROFILE_S}s each): perf + syscall counts for every proxy, JFR for kvgate"
  : > "$OUT/syscalls.tsv"
  "$JCMD" "$KVGATE_PID" JFR.start name=fb settings=profile duration=$((PROFILE_S + 1))s filename="$OUT/kvgate-1k.jfr" \
    > "$RUN/jfr-start.txt" 2>&1 || true
  if command -v perf >/dev/null; then
    perf_profile kvgate
    "$JCMD" "$KVGATE_PID" Compiler.perfmap > "$RUN/perfmap.txt" 2>&1 || true
    perf_summary kvgate
    rm -f "/tmp/perf-$KVGATE_PID.map"
    for t in nginx haproxy; do perf_profile "$t"; perf_summary "$t"; done
    [ -z "${PID[kvgate-b]:-}" ] || { perf_profile kvgate-b; "$JCMD" "${PID[kvgate-b]}" Compiler.perfmap > /dev/null 2>&1 || true
      perf_summary kvgate-b; rm -f "/tmp/perf-${PID[kvgate-b]}.map"; }
  else
    BODY_FILE="$(BODY 1k)" "${PRI[@]}" taskset -c "$CORE_LOAD" wrk -t1 -c"$CONNS" -d"${PROFILE_S}s" -s "$HERE/post.lua" \
      "http://127.0.0.1:$KVGATE_PORT" > "$OUT/wrk-profile-kvgate-1k.txt" 2>&1
  fi
  for _ in $(seq 50); do [ -s "$OUT/kvgate-1k.jfr" ] && break; sleep 0.2; done
  sleep 1
  "$JFR_BIN" view --width 200 hot-methods "$OUT/kvgate-1k.jfr" > "$OUT/jfr-hot-methods.txt" 2>&1 || true
  "$JFR_BIN" print --events jdk.ExecutionSample --stack-depth 40 "$OUT/kvgate-1k.jfr" > "$RUN/jfr-samples.txt" 2>&1 || true
  # Samples per thread, and inclusive counts of io.kvgate frames (each frame counted once per sample).
  awk '
    /jdk.ExecutionSample/ {delete seen; next}
    /sampledThread = / {sub(/.*sampledThread = "/, ""); sub(/".*/, ""); th[$0]++; next}
    /line:/ && /io\.kvgate\./ {f = $1; if (!(f in seen)) {seen[f] = 1; kv[f]++}}
    END {
      for (t in th) printf "thread\t%d\t%s\n", th[t], t
      for (f in kv) printf "kvgate-frame\t%d\t%s\n", kv[f], f
    }' "$RUN/jfr-samples.txt" | sort -t$'\t' -k1,1 -k2,2nr > "$OUT/jfr-threads-and-gateway-frames.tsv" || true
  { "$JFR_BIN" summary "$OUT/kvgate-1k.jfr" | grep -E 'ExecutionSample|NativeMethodSample|GarbageCollection ' || true; } > "$OUT/jfr-summary.txt"
fi

# ---- summary -----------------------------------------------------------------------------------------------------
{
  echo "## Run"
  echo
  echo "| | |"
  echo "|---|---|"
  echo "| date | $(date -u +%Y-%m-%dT%H:%M:%SZ) (end of run) |"
  echo "| machine | $(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}'), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, kernel $(uname -r) |"
  echo "| scheduler | PRIO=$PRIO ($(case $PRIO in none) echo 'default CFS, nice 0' ;; rr) echo 'SCHED_RR 10 for every benchmark process' ;; *) echo 'CFS, nice -10' ;; esac)) |"
  echo "| layout | proxy under test: core $CORE_PROXY (whole process, taskset); wrk / h2load + origin: core $CORE_LOAD |"
  echo "| load average at the end | $(cut -d' ' -f1-3 /proc/loadavg) |"
  echo "| kvgate commit | $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown) |"
  echo "| kvgate JVM options (beyond deploy/jvm.options) | $(. "$ROOT/deploy/jvm-host.sh"; kvgate_host_jvm_options) $KVGATE_JAVA_OPTS |"
  awk -F'\t' '{printf "| warm-up of %s (%s, until a 5 s run compiles < %s ms) | %s s, last run %s ms of JIT |\n", $1, $2, q, $3, $4}' \
    q="$JIT_QUIET_MS" "$OUT/warmup.tsv"
  echo
  echo "## Throughput at saturation (wrk -t1 -c$CONNS, ${DURATION_S}s, closed loop)"
  echo
  echo "Proxy core busy = CPU us/req x req/s (100% = the proxy saturated core $CORE_PROXY); capacity = 1e6 / CPU us/req,"
  echo "the rate the proxy would sustain with its core to itself."
  echo
  echo "Steal: the time the hypervisor took from core $CORE_PROXY during the run (/proc/stat)."
  echo
  echo "| round | target | payload | req/s | proxy CPU us/req | proxy core busy | capacity req/s | proxy ctx-switches/req | non-2xx | steal ms |"
  echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"
  awk -F'\t' '{busy = ($5 == "-") ? "-" : sprintf("%.0f%%", $5 * $4 / 1e4); cap = ($5 == "-") ? "-" : sprintf("%.0f", 1e6 / $5)
    printf "| %s | %s | %s | %.0f | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, busy, cap, $6, $7, $8}' "$OUT/tput.tsv"
  echo
  echo "## Latency at fixed rates (h2load --h1 -c$LAT_CONNS -m1 --rps, ${LAT_DURATION_S}s), microseconds"
  echo
  echo "JIT ms: the gateway's JIT compilation inside the run (jstat); its compiler threads share the proxy's core with the I/O thread."
  echo
  echo "| round | target | payload | rate/s | achieved/s | p50 | p99 | p99.9 | max | non-200 | steal ms | JIT ms |"
  echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  awk -F'\t' '{printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12}' "$OUT/lat.tsv"
  echo
  echo "## kvgate / nginx ratios"
  echo
  echo "The kernel charges stolen time to steal, not to the process that was running: CPU per request (and the CPU-capacity"
  echo "ratio) is what a burst of steal moves least, while it lowers the throughput and raises the latency of its run."
  echo
  echo "| measure | payload | ratios (one per round or rate) |"
  echo "|---|---|---|"
  for g in "${GATEWAYS[@]}"; do for pl in 1k 16k; do
    r=$(awk -F'\t' -v pl="$pl" -v g="$g" '$3 == pl && $2 == "nginx" {n[$1] = $4; sn[$1] = $8} $3 == pl && $2 == g {k[$1] = $4; sk[$1] = $8}
      END {for (i = 1; i <= 3; i++) {r = "r" i; if (n[r] > 0) printf "%s %.2f (steal %s / %s ms); ", r, k[r] / n[r], sk[r], sn[r]}}' "$OUT/tput.tsv")
    echo "| throughput ($g/nginx, ≥ 0.90 is the goal; the hypervisor's steal on the proxy core in $g's / nginx's run) | $pl | $r |"
  done; done
  for g in "${GATEWAYS[@]}"; do for pl in 1k 16k; do
    r=$(awk -F'\t' -v pl="$pl" -v g="$g" '$3 == pl && $2 == "nginx" {n[$1] = $5} $3 == pl && $2 == g {k[$1] = $5}
      END {for (i = 1; i <= 3; i++) {r = "r" i; if (k[r] > 0) printf "%s %.2f; ", r, n[r] / k[r]}}' "$OUT/tput.tsv")
    echo "| CPU capacity (nginx CPU/req ÷ $g CPU/req; ≥ 0.91 = $g CPU/req ≤ 1.1× nginx's) | $pl | $r |"
  done; done
  for q in p99:7 p50:6; do for g in "${GATEWAYS[@]}"; do for pl in 1k 16k; do
    r=""
    for rate in $RATES; do
      r+=$(awk -F'\t' -v pl="$pl" -v g="$g" -v rate="$rate" -v col="${q#*:}" '
        $3 == pl && $4 == rate && $2 == "nginx" {n[$1] = $col} $3 == pl && $4 == rate && $2 == g {k[$1] = $col}
        END {
          m = 0
          for (i = 1; ("r" i) in n; i++) if (n["r" i] > 0 && ("r" i) in k) {x[++m] = k["r" i] / n["r" i]; s = s sprintf(" %.2f", x[m])}
          if (m == 0) exit
          for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (x[j] < x[i]) {t = x[i]; x[i] = x[j]; x[j] = t}
          med = (m % 2) ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2
          printf "@%s/s **%.2f** (rounds%s); ", rate, med, s
        }' "$OUT/lat.tsv")
    done
    echo "| ${q%%:*} ($g/nginx, median of the rounds; ≤ 1.20 is the goal) | $pl | $r |"
  done; done; done
  for g in "${GATEWAYS[@]}"; do
    r=$(awk -F'\t' -v g="$g" '$2 == g && $3 == "rr" {n[$1] = $4} $2 == g && $3 == "kv" {k[$1] = $4}
      END {for (i = 1; i <= 3; i++) {r = "r" i; if (n[r] > 0) printf "%s %.2f; ", r, k[r] / n[r]}}' "$OUT/tput.tsv")
    echo "| throughput ($g kv_exact rule / round-robin rule, ≥ 0.80 is the goal) | 1k token ids | $r |"
    r=$(awk -F'\t' -v g="$g" '$2 == g && $3 == "rr" {n[$1] = $5} $2 == g && $3 == "kv" {k[$1] = $5}
      END {for (i = 1; i <= 3; i++) {r = "r" i; if (k[r] > 0) printf "%s %.2f; ", r, n[r] / k[r]}}' "$OUT/tput.tsv")
    echo "| CPU capacity ($g round-robin CPU/req ÷ kv_exact CPU/req) | 1k token ids | $r |"
  done
  if [ -s "$OUT/alloc.tsv" ]; then
    echo
    echo "## Heap allocation per proxied request, whole gateway (1 KiB, saturation, JFR ThreadAllocationStatistics)"
    echo
    echo "| target | requests | bytes allocated (all threads) | bytes / request | threads |"
    echo "|---|---:|---:|---:|---:|"
    awk -F'\t' '{printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5}' "$OUT/alloc.tsv"
    echo "| nginx | - | - | 0 (no GC heap: per-request pools) | - |"
  fi
  if [ -s "$OUT/syscalls.tsv" ]; then
    echo
    echo "## Kernel work per request at 1 KiB saturation (perf stat tracepoints, ${PROFILE_S}s)"
    echo
    echo "| target | syscalls/req | epoll_ctl/req | context switches/req |"
    echo "|---|---:|---:|---:|"
    awk -F'\t' '{printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4}' "$OUT/syscalls.tsv"
  fi
} > "$SUMMARY"
cat "$SUMMARY"
log "raw output in $OUT"
