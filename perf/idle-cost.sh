#!/usr/bin/env bash
# What an idle gateway costs its host: per thread, wake-ups per second and CPU milliseconds per second, after a
# short burst of traffic (so the request path is compiled) and a settling pause. Every periodic wake-up of a
# thread on the proxy's core is a context switch that can land in front of a request under CFS; this measures them.
# The layout of frontdoor-bench.sh: origin (nginx) on core 0, kvgate pinned as a whole process to core 1, with the
# bench's configuration (a round-robin rule and a kv_exact rule whose KV-event endpoint nobody publishes on, so
# the ingest thread holds one open subscription). nginx as a proxy is measured beside it.
# usage: perf/idle-cost.sh      env: SETTLE_S=20 IDLE_S=20 KVGATE_ROOT=<checkout to run> OUT=DIR PORT_BASE=26600
# Only processes started here are stopped (by PID). Loopback only.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"; HERE="$ROOT/perf/frontdoor"
KVGATE_ROOT="${KVGATE_ROOT:-$ROOT}"
SETTLE_S=${SETTLE_S:-20}; IDLE_S=${IDLE_S:-20}; PB=${PORT_BASE:-26600}
OUT=${OUT:-${TMPDIR:-/tmp}/kvgate-idle-$(date -u +%Y%m%dT%H%M%SZ)}; RUN=$OUT/run; mkdir -p "$RUN"
ORIGIN=$((PB+1)); NGX=$((PB+2)); KVG=$((PB+4)); ADM=$((PB+5)); KVE=$((PB+8))
. "$HERE/layout.sh"
for t in nginx-origin.conf nginx-proxy.conf kvgate.yaml; do layout_render $t $t $ORIGIN $NGX $KVG $ADM $KVE; done
. "$HERE/bodies.sh"; make_body 1024 "$RUN/body-1k.json"
layout_start_nginx
layout_start_kvgate "$KVGATE_ROOT" "$RUN/kvgate.yaml" "$RUN/kvgate.log"; PID_K=$PID_G
layout_await_200 $KVG "$RUN/body-1k.json" kvgate
for p in $KVG $NGX; do BODY_FILE="$RUN/body-1k.json" taskset -c 0 wrk -t1 -c32 -d5s -s "$HERE/post.lua" "http://127.0.0.1:$p" > /dev/null; done
sleep "$SETTLE_S"
HZ=$(getconf CLK_TCK)
snap() { # pid... -> "tid comm switches ticks" per thread
  local p t
  for p in "$@"; do for t in /proc/"$p"/task/*; do
    [ -r "$t/stat" ] || continue
    printf '%s %s %s %s\n' "${t##*/}" "$(tr ' ' _ < "$t/comm")" \
      "$(awk '/^(voluntary|nonvoluntary)_ctxt_switches/ {s += $2} END {print s + 0}' "$t/status")" \
      "$(sed 's/.*) //' "$t/stat" | awk '{print $12 + $13}')"
  done; done
}
NGX_PIDS="$PID_N $(pgrep -P "$PID_N" | tr '\n' ' ')"
snap "$PID_K" > "$RUN/k0"; snap $NGX_PIDS > "$RUN/n0"
sleep "$IDLE_S"
snap "$PID_K" > "$RUN/k1"; snap $NGX_PIDS > "$RUN/n1"
delta() { # before after label
  join <(sort "$1") <(sort "$2") | awk -v s="$IDLE_S" -v hz="$HZ" -v l="$3" '
    {w = ($6 - $3) / s; c = ($7 - $4) * 1000 / hz / s; W += w; C += c
     if (w >= 0.5 || c > 0) printf "%s\t%s\t%.1f\t%.1f\n", l, $2, w, c}
    END {printf "%s\t(all threads)\t%.1f\t%.1f\n", l, W, C}'
}
{ printf 'process\tthread\twakeups/s\tCPU ms/s\n'; delta "$RUN/k0" "$RUN/k1" kvgate; delta "$RUN/n0" "$RUN/n1" nginx; } > "$OUT/idle.tsv"
{
  echo "# Idle cost, $(date -u +%Y-%m-%dT%H:%M:%SZ), kvgate $(git -C "$KVGATE_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo
  echo "$(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}'), $(nproc) cores, kernel $(uname -r); ${SETTLE_S}s after a 5s burst, measured over ${IDLE_S}s"
  echo
  echo "| process | thread | wake-ups/s | CPU ms/s |"
  echo "|---|---|---:|---:|"
  tail -n +2 "$OUT/idle.tsv" | awk -F'\t' '{printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4}'
} > "$OUT/summary.md"
cat "$OUT/summary.md"
