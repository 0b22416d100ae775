#!/usr/bin/env bash
# Where a paced run's tail comes from: bursts held up on the proxy's core. The layout of frontdoor-bench.sh (origin
# and h2load on core 0, nginx as a proxy and kvgate pinned as whole processes to core 1, default scheduler). After a
# wrk and a paced warm-up of each, two paced runs (h2load --h1 -c16, RATE req/s, D s) per proxy: one with `perf sched`
# recording core 1, one with `perf record` sampling both cores (cpu-clock, 5 kHz). Reports per proxy:
#   - the late bursts in h2load's log (10 ms bins holding a request over LATE_US: start offset, count, worst);
#   - the proxy thread's runs of 2 ms or more on core 1 (perf sched timehist: end time, run ms) and how many runs;
#   - the times core 1 was not running at all: gaps of 1.2 ms or more between two samples on it (neither a thread
#     nor the idle loop sampled, so the hypervisor held the vCPU), the threads sampled before and after the gap, and
#     how long before it the kernel's DAMON thread (kdamond, which samples page access every 500 ms) last ran.
# Written for perf/results/paced-stalls-2026-12-06.md and paced-thp-2026-12-06.md: on a PVM guest, after each DAMON
# sampling pass the next JVM thread to run held its vCPU for 3.5-5 ms unless the heap used transparent huge pages.
# usage: perf/paced-stalls.sh     env: RATE=2000 D=6 PL=1k (or 16k) LATE_US=2500 KVGATE_YAML=<config template>
#        OUT=DIR PORT_BASE=34600 KVGATE_JAVA_OPTS=... (the JVM options of the gateway, layout.sh's by default;
#        the launcher adds -XX:+UseTransparentHugePages where the kernel offers them, -XX:-UseTransparentHugePages here
#        turns them off)     (KVGATE_YAML: a perf/frontdoor/kvgate.yaml.in-style template, the bench's by default)
# Needs perf (linux-perf); installs it with apt-get when missing. Only processes started here are stopped.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"; HERE="$ROOT/perf/frontdoor"
RATE=${RATE:-2000}; D=${D:-6}; PL=${PL:-1k}; LATE_US=${LATE_US:-2500}; PB=${PORT_BASE:-34600}
OUT=${OUT:-${TMPDIR:-/tmp}/kvgate-paced-stalls-$(date -u +%Y%m%dT%H%M%SZ)}; RUN=$OUT/run; mkdir -p "$RUN"
command -v perf > /dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf > /dev/null; }
ORIGIN=$((PB+1)); NGX=$((PB+2)); KVG=$((PB+4)); ADM=$((PB+5)); KVE=$((PB+8))
. "$HERE/layout.sh"
layout_render nginx-origin.conf nginx-origin.conf $ORIGIN $NGX 0 0 0; layout_render nginx-proxy.conf nginx-proxy.conf $ORIGIN $NGX 0 0 0
if [ -n "${KVGATE_YAML:-}" ]; then
  sed -e "s#@RUN@#$RUN#g" -e "s#@ORIGIN_PORT@#$ORIGIN#g" -e "s#@KVGATE_PORT@#$KVG#g" -e "s#@KVGATE_ADMIN_PORT@#$ADM#g" \
    -e "s#@KV_EVENTS_PORT@#$KVE#g" "$KVGATE_YAML" > "$RUN/kvgate.yaml"
else
  layout_render kvgate.yaml kvgate.yaml $ORIGIN $NGX $KVG $ADM $KVE
fi
. "$HERE/bodies.sh"; case $PL in 1k) make_body 1024 "$RUN/body.json" ;; 16k) make_body 16384 "$RUN/body.json" ;; *) echo "PL: 1k or 16k" >&2; exit 2 ;; esac
layout_start_nginx
layout_start_kvgate "$ROOT" "$RUN/kvgate.yaml" "$RUN/kvgate.log"
layout_await_200 $KVG "$RUN/body.json" kvgate; layout_await_200 $NGX "$RUN/body.json" nginx
for p in $KVG $NGX; do
  BODY_FILE="$RUN/body.json" taskset -c 0 wrk -t1 -c32 -d15s -s "$HERE/post.lua" "http://127.0.0.1:$p" > /dev/null
  layout_paced $p 10 "$RUN/body.json" "$RATE"
done
for t in nginx kvgate; do
  port=$NGX; [ $t = kvgate ] && port=$KVG
  perf sched record -C 1 -o "$RUN/sched-$t.data" -- sleep $((D + 1)) > /dev/null 2>&1 & SP=$!; PIDS+=($SP)
  sleep 0.3
  layout_paced $port "$D" "$RUN/body.json" "$RATE" "$RUN/h2-$t.log"
  wait $SP || true
  perf sched timehist -i "$RUN/sched-$t.data" > "$RUN/timehist-$t.txt" 2>/dev/null || true
  perf record -e cpu-clock -F 5000 -a -o "$RUN/samples-$t.data" -- sleep $((D + 1)) > /dev/null 2>&1 & SP=$!; PIDS+=($SP)
  sleep 0.3
  layout_paced $port "$D" "$RUN/body.json" "$RATE"
  wait $SP || true
  perf script -i "$RUN/samples-$t.data" -F comm,cpu,time > "$RUN/samples-$t.txt" 2>/dev/null || true
done
{
  echo "# Paced stalls, $(date -u +%Y-%m-%dT%H:%M:%SZ): $PL at $RATE req/s, ${D}s per proxy, kvgate $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "$(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}'), $(nproc) cores, kernel $(uname -r), default CFS"
  for t in nginx kvgate; do
    pat='kvgate-io'; [ $t = nginx ] && pat='nginx\['
    echo; echo "## $t"
    awk '{print $3}' "$RUN/h2-$t.log" | sort -n | awk '{v[NR] = $1} END {printf "p50 %d us, p99 %d us, %d requests\n", v[int(.5 * (NR - 1)) + 1], v[int(.99 * (NR - 1)) + 1], NR}'
    echo "late bursts (start ms: requests over ${LATE_US} us, worst us):"
    awk '{print $1, $3}' "$RUN/h2-$t.log" | sort -n | awk -v late="$LATE_US" 'NR == 1 {t0 = $1}
      $2 > late {b = int(($1 - t0) / 10000) * 10; c[b]++; if ($2 > m[b]) m[b] = $2}
      END {for (k in c) printf "%d: %d, %d\n", k, c[k], m[k]}' | sort -n | paste -sd' ' -
    echo "runs of 2 ms or more on core 1 (end s: ms):"
    awk -v pat="$pat" '$3 ~ pat && $6 ~ /^[0-9.]+$/ {n++; if ($6 + 0 >= 2) printf "%s: %s  ", $1, $6} END {printf "\n(%d runs in all)\n", n}' "$RUN/timehist-$t.txt"
    echo "core 1 not running (gap start s: ms, thread sampled before -> after, ms since kdamond last ran):"
    awk '{t = $NF; sub(":", "", t); cpu = $(NF - 1); gsub(/[][]/, "", cpu); cpu += 0
          if ($1 ~ /^kdamond/) k = t
          if (cpu == 1) { if (last && t - last >= 0.0012) { n++; printf "%.3f: %.2f, %s -> %s, %s\n", last, (t - last) * 1000, lc, $1, k ? sprintf("%.0f", (last - k) * 1000) : "-" }
                          last = t; lc = $1 } }
         END {printf "(%d gaps)\n", n}' "$RUN/samples-$t.txt" | paste -sd' ' -
  done
} > "$OUT/summary.md"
cat "$OUT/summary.md"
