#!/usr/bin/env bash
# Paced latency A/B of two kvgate builds beside nginx (frontdoor-ab.sh does the same for throughput at saturation).
# The layout of frontdoor-bench.sh: origin (nginx) and h2load on core 0; nginx as a proxy, kvgate A (checkout ROOT_A)
# and kvgate B (checkout ROOT_B) pinned as whole processes to core 1, default scheduler. After a wrk and a paced
# warm-up of each, ROUNDS rounds of paced runs (h2load --h1 -c16, RATE req/s, D s, 1 KiB chat), the three proxies in
# a rotated order each round. Per run: p50/p99/p99.9, the proxy's CPU per request (/proc, all threads) and the
# hypervisor's steal on core 1 (/proc/stat) during the run; per round the ratios to nginx, and their medians.
# A second checkout for A: `git archive <commit> | tar -x -C DIR && (cd DIR && ./mvnw -o -q -B -DskipTests package -pl tools -am)`.
# usage: perf/paced-ab.sh ROOT_A ROOT_B    env: ROUNDS=6 RATE=2000 D=6 PL=1k OUT=DIR PORT_BASE=27600
#        TRANSPORT_A=epoll TRANSPORT_B=io_uring  the transport of one side (ROOT_A = ROOT_B: an A/B of transports)
#        OPTS_A=... OPTS_B=...  extra JVM options for one side
# Only processes started here are stopped (by PID). Loopback only.
set -euo pipefail
[ $# = 2 ] || { echo "usage: $0 ROOT_A ROOT_B" >&2; exit 2; }
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"; HERE="$ROOT/perf/frontdoor"
ROOT_A=$(cd "$1" && pwd); ROOT_B=$(cd "$2" && pwd)
ROUNDS=${ROUNDS:-6}; RATE=${RATE:-2000}; D=${D:-6}; PL=${PL:-1k}; PB=${PORT_BASE:-27600}
OUT=${OUT:-${TMPDIR:-/tmp}/kvgate-paced-ab-$(date -u +%Y%m%dT%H%M%SZ)}; RUN=$OUT/run; mkdir -p "$RUN"
ORIGIN=$((PB+1)); NGX=$((PB+2)); KVE=$((PB+8))
declare -A PORT=([nginx]=$NGX [A]=$((PB+4)) [B]=$((PB+6))) ADMIN=([A]=$((PB+5)) [B]=$((PB+7))) SRC=([A]=$ROOT_A [B]=$ROOT_B)
. "$HERE/layout.sh"
layout_render nginx-origin.conf nginx-origin.conf $ORIGIN $NGX 0 0 0; layout_render nginx-proxy.conf nginx-proxy.conf $ORIGIN $NGX 0 0 0
layout_render kvgate.yaml kvgate-A.yaml $ORIGIN $NGX "${PORT[A]}" "${ADMIN[A]}" $KVE
layout_render kvgate.yaml kvgate-B.yaml $ORIGIN $NGX "${PORT[B]}" "${ADMIN[B]}" $((KVE + 1))
for g in A B; do t=TRANSPORT_$g; [ -z "${!t:-}" ] || sed -i "s/^transport: .*/transport: ${!t}/" "$RUN/kvgate-$g.yaml"; done
. "$HERE/bodies.sh"; case $PL in 1k) make_body 1024 "$RUN/body.json" ;; 16k) make_body 16384 "$RUN/body.json" ;; *) echo "PL: 1k or 16k" >&2; exit 2 ;; esac
layout_start_nginx
declare -A PID=([nginx]=$PID_N)
declare -A OPTS=([A]="${OPTS_A:-}" [B]="${OPTS_B:-}")
for g in A B; do
  KVGATE_JAVA_OPTS="-Xms512m -Xmx512m -XX:+AlwaysPreTouch ${OPTS[$g]}" layout_start_kvgate "${SRC[$g]}" "$RUN/kvgate-$g.yaml" "$RUN/kvgate-$g.log"
  PID[$g]=$PID_G
done
for t in A B nginx; do layout_await_200 "${PORT[$t]}" "$RUN/body.json" "$t"; done
paced() { layout_paced "$1" "$2" "$RUN/body.json" "$RATE" ${3:+"$3"}; } # port seconds [log]
steal() { awk '$1 == "cpu1" {print $9}' /proc/stat; }
HZ=$(getconf CLK_TCK)
for t in A B nginx; do BODY_FILE="$RUN/body.json" taskset -c 0 wrk -t1 -c32 -d10s -s "$HERE/post.lua" "http://127.0.0.1:${PORT[$t]}" > /dev/null; done
for t in A B nginx; do paced "${PORT[$t]}" 12; done
printf 'round\tproxy\tp50_us\tp99_us\tp999_us\tcpu_us/req\tsteal_ms\n' > "$OUT/paced.tsv"
ORDERS=("nginx A B" "A B nginx" "B nginx A")
for r in $(seq "$ROUNDS"); do for t in ${ORDERS[$(( (r - 1) % 3 ))]}; do
  c0=$(layout_cpu_ticks "${PID[$t]}"); s0=$(steal)
  paced "${PORT[$t]}" "$D" "$RUN/h2-$r-$t.log"
  c1=$(layout_cpu_ticks "${PID[$t]}"); s1=$(steal)
  awk '{print $3}' "$RUN/h2-$r-$t.log" | sort -n | awk -v r=$r -v t=$t -v c=$((c1 - c0)) -v st=$((s1 - s0)) -v hz=$HZ '
    {v[NR] = $1} END {n = NR; printf "%s\t%s\t%d\t%d\t%d\t%.1f\t%.0f\n", r, t, v[int(.5*(n-1))+1], v[int(.99*(n-1))+1],
      v[int(.999*(n-1))+1], c * 1e6 / hz / n, st * 1000 / hz}' >> "$OUT/paced.tsv"
  rm -f "$RUN/h2-$r-$t.log"
done; done
{
  echo "# Paced A/B, $(date -u +%Y-%m-%dT%H:%M:%SZ): $PL chat at $RATE req/s, h2load -c16, ${D}s runs, $ROUNDS rounds"
  echo
  echo "A = $ROOT_A ($(git -C "$ROOT_A" rev-parse --short HEAD 2>/dev/null || echo 'no git')), B = $ROOT_B ($(git -C "$ROOT_B" rev-parse --short HEAD 2>/dev/null || echo 'no git'))."
  for g in A B; do echo "$g: transport $(awk '/^transport:/ {print $2}' "$RUN/kvgate-$g.yaml"), extra JVM options: ${OPTS[$g]:-none}."; done
  echo "$(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}'), $(nproc) cores, kernel $(uname -r), default CFS; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "| round | proxy | p50 µs | p99 µs | p99.9 µs | CPU µs/req | steal on core 1, ms |"
  echo "|---|---|---:|---:|---:|---:|---:|"
  tail -n +2 "$OUT/paced.tsv" | awk -F'\t' '{printf "| %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7}'
  echo
  echo "| ratio to nginx | A: median (rounds) | B: median (rounds) |"
  echo "|---|---|---|"
  for m in p50:3 p99:4 p99.9:5 cpu:6; do
    row="| ${m%%:*} |"
    for g in A B; do
      row+=$(awk -F'\t' -v g=$g -v col="${m#*:}" 'NR > 1 && $2 == "nginx" {n[$1] = $col} NR > 1 && $2 == g {k[$1] = $col}
        END {m = 0; for (r in n) if (n[r] > 0 && (r in k)) x[++m] = k[r] / n[r]
          for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (x[j] < x[i]) {t = x[i]; x[i] = x[j]; x[j] = t}
          s = ""; for (i = 1; i <= m; i++) s = s sprintf(" %.2f", x[i])
          printf " **%.2f** (sorted:%s) |", (m % 2) ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2, s}' "$OUT/paced.tsv")
    done
    echo "$row"
  done
} > "$OUT/summary.md"
cat "$OUT/summary.md"
