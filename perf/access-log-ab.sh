#!/usr/bin/env bash
# The access log's cost on the front door (issue #37 item 2: <= 5 % throughput at 1 KiB): one kvgate build, three
# gateways side by side in one session, differing only in logging.access_log: off, stdout (the process's stdout sent
# to /dev/null) and a file. The nginx origin of frontdoor-bench.sh answers a fixed completion; wrk (-t1 -c32, D
# seconds, 1 KiB chat bodies) drives each gateway in turn, round after round, so machine noise spreads over all three.
# Per run: requests/s and the gateway's CPU us/request (/proc, all threads). Then heap bytes per request of each
# (JFR thread allocation statistics), to show what the log costs in allocation.
# usage: perf/access-log-ab.sh     env: ROUNDS=5 D=5 OUT=DIR PORT_BASE=24700 ALLOC=1 CORES="0 1" (wrk+origin, gateways)
#        VARIANTS="off stdout file" (the order each round runs them in)
# Only processes started here are stopped (by PID). Loopback only.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd); HERE=$ROOT/perf/frontdoor
OUT=${OUT:-${TMPDIR:-/tmp}/kvgate-access-log-ab-$(date -u +%Y%m%dT%H%M%SZ)}; ROUNDS=${ROUNDS:-5}; D=${D:-5}
read -r CORE_LOAD CORE_GW <<< "${CORES:-0 1}"
PB=${PORT_BASE:-24700}; ORIGIN=$((PB+1))
mkdir -p "$OUT/run"; RUN=$OUT/run
PIDS=(); cleanup() { for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; sleep 1; for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
. $HERE/bodies.sh
make_body 1024 $RUN/body-1k.json
sed -e "s#@RUN@#$RUN#g" -e "s#@ORIGIN_PORT@#$ORIGIN#g" $HERE/nginx-origin.conf.in > $RUN/origin.conf
taskset -c $CORE_LOAD nginx -p $RUN -e $RUN/origin-error.log -c $RUN/origin.conf & PIDS+=($!)
(cd $ROOT && ./kvgate serve --help > /dev/null)   # builds once, before three launchers race to
export KVGATE_JAVA_OPTS="-Xms512m -Xmx512m -XX:+AlwaysPreTouch"
declare -A PORT PID
VARIANTS=${VARIANTS:-off stdout file}
i=0
for v in $VARIANTS; do
  P=$((PB+10+i*3)); i=$((i+1))
  sed -e "s#@RUN@#$RUN#g" -e "s#@ORIGIN_PORT@#$ORIGIN#g" -e "s#@KVGATE_PORT@#$P#g" -e "s#@KVGATE_ADMIN_PORT@#$((P+1))#g" \
      -e "s#@KV_EVENTS_PORT@#$((P+2))#g" $HERE/kvgate.yaml.in > $RUN/kvgate-$v.yaml
  case $v in
    off) ;;
    stdout) printf 'logging:\n  access_log: stdout\n' >> $RUN/kvgate-$v.yaml ;;
    file) printf 'logging:\n  access_log: %s/access.jsonl\n' "$RUN" >> $RUN/kvgate-$v.yaml ;;
  esac
  # stdout (the access log of the stdout variant) to /dev/null; the operator log (stderr) to a file.
  (cd $ROOT && exec taskset -c $CORE_GW ./kvgate serve --config $RUN/kvgate-$v.yaml) > /dev/null 2> $RUN/kvgate-$v.log & PIDS+=($!)
  PORT[$v]=$P; PID[$v]=$!
done
for v in $VARIANTS; do for t in $(seq 300); do c=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @$RUN/body-1k.json http://127.0.0.1:${PORT[$v]}/v1/chat/completions || true); [ "$c" = 200 ] && break; sleep 0.2; done; [ "$c" = 200 ] || { echo "$v not up"; tail $RUN/kvgate-$v.log; exit 1; }; done
HZ=$(getconf CLK_TCK)
ticks() { local s=0 p; for p in $1 $(pgrep -P $1 || true); do s=$((s + $(sed 's/.*) //' /proc/$p/stat | awk '{print $12+$13}'))); done; echo $s; }
wrkrun() { BODY_FILE=$RUN/body-1k.json taskset -c $CORE_LOAD wrk -t1 -c32 -d$2s -s $HERE/post.lua http://127.0.0.1:${PORT[$1]} > $3 2>&1; }
for v in $VARIANTS; do wrkrun $v 8 /dev/null; done   # warm-up
echo -e "round\taccess_log\treq/s\tcpu_us/req" > $OUT/res.tsv
for r in $(seq $ROUNDS); do for v in $VARIANTS; do
  f=$OUT/wrk-$r-$v.txt
  c0=$(ticks ${PID[$v]})
  wrkrun $v $D $f
  c1=$(ticks ${PID[$v]})
  n=$(awk '/requests in/ {print $1}' $f); rps=$(awk '/^Requests\/sec:/ {print $2}' $f)
  echo -e "$r\t$v\t$rps\t$(awk -v a=$c0 -v b=$c1 -v hz=$HZ -v n=$n 'BEGIN{printf "%.1f",(b-a)*1e6/hz/n}')" >> $OUT/res.tsv
done; done
if [ "${ALLOC:-1}" = 1 ]; then
  JDK=$(dirname $(readlink -f /proc/$(pgrep -P ${PID[off]} java || echo ${PID[off]})/exe))
  echo -e "access_log\trequests\talloc_bytes\tbytes/req" > $OUT/alloc.tsv
  for v in $VARIANTS; do
    J=$(pgrep -P ${PID[$v]} java || echo ${PID[$v]})
    $JDK/jcmd $J JFR.start name=alloc settings=$HERE/alloc.jfc filename=$OUT/alloc-$v.jfr > /dev/null
    wrkrun $v $D $OUT/wrk-alloc-$v.txt
    $JDK/jcmd $J JFR.stop name=alloc > /dev/null
    n=$(awk '/requests in/ {print $1}' $OUT/wrk-alloc-$v.txt)
    $JDK/jfr print --json --events jdk.ThreadAllocationStatistics $OUT/alloc-$v.jfr | python3 $HERE/jfr-alloc.py | awk -v v=$v -v n=$n '{printf "%s\t%d\t%d\t%.0f\n", v, n, $1, $1/n}' >> $OUT/alloc.tsv
  done
  column -t $OUT/alloc.tsv
fi
column -t $OUT/res.tsv
echo "mean over the rounds (ratio: req/s over access_log off):"
awk -F'\t' 'NR > 1 {n[$2]++; r[$2] += $3; c[$2] += $4}
  END {printf "access_log\treq/s\tcpu_us/req\tratio\n"; for (k in n) printf "%s\t%.0f\t%.1f\t%.3f\n", k, r[k] / n[k], c[k] / n[k], (r[k] / n[k]) / (r["off"] / n["off"])}' \
  $OUT/res.tsv | column -t
echo "access-log lines in the file: $(wc -l < $RUN/access.jsonl)"; head -c 600 $RUN/access.jsonl; echo
uptime
