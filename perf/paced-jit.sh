#!/usr/bin/env bash
# Paced latency of kvgate beside nginx, with the JIT compilation and GC time that fell inside each kvgate run.
# The layout of frontdoor-bench.sh: origin (nginx) and h2load on core 0, nginx as a proxy and kvgate on core 1, each
# pinned as a whole process, default scheduler. After a wrk warm-up and a paced one, ROUNDS interleaved paced runs
# (h2load --h1 -c16, RATE req/s, D s, 1 KiB chat) on kvgate and nginx; per run: p50/p99/p99.9, the proxy's CPU and
# user CPU per request (/proc, all threads), and for kvgate the compile and GC milliseconds of a JFR recording
# (compile.jfc) that spans the run. It shows whether a bad p99 run is the compiler sharing the gateway's core.
# usage: perf/paced-jit.sh     env: ROUNDS=4 RATE=2000 D=6 OUT=DIR PORT_BASE=25600
# Only processes started here are stopped (by PID). Loopback only.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"; HERE="$ROOT/perf/frontdoor"
ROUNDS=${ROUNDS:-4}; RATE=${RATE:-2000}; D=${D:-6}; PB=${PORT_BASE:-25600}
OUT=${OUT:-${TMPDIR:-/tmp}/kvgate-paced-jit-$(date -u +%Y%m%dT%H%M%SZ)}; RUN=$OUT/run; mkdir -p "$RUN"
ORIGIN=$((PB+1)); NGX=$((PB+2)); KVG=$((PB+4)); ADM=$((PB+5)); KVE=$((PB+8))
. "$HERE/layout.sh"
for t in nginx-origin.conf nginx-proxy.conf kvgate.yaml; do layout_render $t $t $ORIGIN $NGX $KVG $ADM $KVE; done
. "$HERE/bodies.sh"; make_body 1024 "$RUN/body-1k.json"
layout_start_nginx
layout_start_kvgate "$ROOT" "$RUN/kvgate.yaml" "$RUN/kvgate.log"; PID_K=$PID_G
layout_await_200 $KVG "$RUN/body-1k.json" kvgate
JDK=$(dirname "$(dirname "$(readlink -f /proc/$PID_K/exe)")")
paced() { layout_paced "$1" "$2" "$RUN/body-1k.json" "$RATE" ${3:+"$3"}; } # port seconds [log]
for p in $KVG $NGX; do BODY_FILE="$RUN/body-1k.json" taskset -c 0 wrk -t1 -c32 -d10s -s "$HERE/post.lua" "http://127.0.0.1:$p" > /dev/null; done
paced $KVG 12; paced $NGX 4
HZ=$(getconf CLK_TCK)
# One recording across all rounds (starting and stopping one per run compiles JFR's own code inside the run).
"$JDK/bin/jcmd" $PID_K JFR.start name=jit settings="$HERE/compile.jfc" > /dev/null
: > "$OUT/windows.txt"; : > "$OUT/rows.tsv"
for r in $(seq "$ROUNDS"); do for x in kvgate nginx; do
  if [ $x = kvgate ]; then pid=$PID_K; port=$KVG; else pid=$PID_N; port=$NGX; fi
  c0=$(layout_cpu_ticks $pid); u0=$(layout_cpu_ticks $pid user); t0=$(date +%s%N)
  paced $port "$D" "$OUT/h2-$r-$x.log"
  t1=$(date +%s%N); c1=$(layout_cpu_ticks $pid); u1=$(layout_cpu_ticks $pid user)
  [ $x = kvgate ] && echo "$r $t0 $t1" >> "$OUT/windows.txt"
  awk '{print $3}' "$OUT/h2-$r-$x.log" | sort -n | awk -v r=$r -v x=$x -v c=$((c1 - c0)) -v u=$((u1 - u0)) -v hz=$HZ '
    {v[NR] = $1} END {n = NR; printf "%s\t%s\t%d\t%d\t%d\t%.1f\t%.1f\n", r, x, v[int(.5*(n-1))+1], v[int(.99*(n-1))+1],
      v[int(.999*(n-1))+1], c * 1e6 / hz / n, u * 1e6 / hz / n}' >> "$OUT/rows.tsv"
  rm -f "$OUT/h2-$r-$x.log"
done; done
"$JDK/bin/jcmd" $PID_K JFR.stop name=jit filename="$OUT/jit.jfr" > /dev/null
"$JDK/bin/jfr" print --json --events jdk.Compilation,jdk.GarbageCollection "$OUT/jit.jfr" \
  | python3 "$HERE/jfr-compile.py" "$OUT/windows.txt" > "$OUT/jit.txt"
printf 'round\tproxy\tp50_us\tp99_us\tp999_us\tcpu_us/req\tuser_us/req\tcompile_ms\tcompiles\tgc_ms\tgcs\tlongest_compiles\n' > "$OUT/paced.tsv"
awk 'NR == FNR {j[$1] = $2 "\t" $3 "\t" $4 "\t" $5 "\t" $6; next}
  {print $0 "\t" ($2 == "kvgate" ? j[$1] : "-\t-\t-\t-\t-")}' "$OUT/jit.txt" "$OUT/rows.tsv" >> "$OUT/paced.tsv"
column -t -s $'\t' "$OUT/paced.tsv"; echo "(raw output in $OUT)"; uptime
