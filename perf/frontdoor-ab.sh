#!/usr/bin/env bash
# A/B of two kvgate builds beside nginx, for a code change (frontdoor-bench.sh's KVGATE_B_OPTS only varies JVM options).
# The origin (nginx, fixed completion) and wrk on core 0; nginx as a proxy, kvgate A (checkout ROOT_A) and kvgate B
# (checkout ROOT_B) all on core 1, measured in turn, round after round, with bounded wrk runs (-t1 -c32, D seconds).
# Per run: the proxy's CPU us/request (/proc, all threads and workers), syscalls, epoll_ctl and context switches per
# request (perf stat tracepoints); then heap bytes per request of each gateway (JFR thread allocation statistics).
# A second checkout for A: `git archive <commit> | tar -x -C DIR && (cd DIR && ./mvnw -o -q -B -DskipTests package -pl tools -am)`.
# Latency: wrk --latency, its 99th percentile per run (p99_ms).
# usage: perf/frontdoor-ab.sh ROOT_A ROOT_B     env: ROUNDS=3 D=5 PL="1k 16k" OUT=DIR PORT_BASE=24600 ALLOC=1
#        ALLOC_PL=1k (the payload of the allocation run)
#        PL may also name kv / rr: 1 KiB token-id completions on the kv_exact / round-robin rule (nginx: the origin)
#        OPTS_A=... OPTS_B=...  extra JVM options for one side (ROOT_A = ROOT_B: an A/B of options on one build)
# Only processes started here are stopped (by PID). Loopback only.
set -euo pipefail
[ $# = 2 ] || { echo "usage: $0 ROOT_A ROOT_B" >&2; exit 2; }
ROOT_A=$(cd "$1" && pwd); ROOT_B=$(cd "$2" && pwd); OUT=${OUT:-${TMPDIR:-/tmp}/kvgate-frontdoor-ab-$(date -u +%Y%m%dT%H%M%SZ)}
ROUNDS=${ROUNDS:-3}; D=${D:-5}; PL=${PL:-1k 16k}
PB=${PORT_BASE:-24600}; ORIGIN=$((PB+1)); PA=$((PB+4)); PAA=$((PB+5)); PBB=$((PB+6)); PBA=$((PB+7)); KVE=$((PB+8))
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/frontdoor"
mkdir -p "$OUT/run"; RUN=$OUT/run
PIDS=(); cleanup() { for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; sleep 1; for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
sed -e "s#@RUN@#$RUN#g" -e "s#@ORIGIN_PORT@#$ORIGIN#g" $HERE/nginx-origin.conf.in > $RUN/origin.conf
for x in a b; do
  if [ $x = a ]; then P=$PA; A=$PAA; K=$KVE; else P=$PBB; A=$PBA; K=$((KVE+1)); fi
  sed -e "s#@RUN@#$RUN#g" -e "s#@ORIGIN_PORT@#$ORIGIN#g" -e "s#@KVGATE_PORT@#$P#g" -e "s#@KVGATE_ADMIN_PORT@#$A#g" -e "s#@KV_EVENTS_PORT@#$K#g" $HERE/kvgate.yaml.in > $RUN/kvgate-$x.yaml
done
. $HERE/bodies.sh
make_body 1024 $RUN/body-1k.json; make_body 16384 $RUN/body-16k.json
make_token_body bench-kv $RUN/body-kv.json; make_token_body bench-rr $RUN/body-rr.json
export KVGATE_JAVA_OPTS="-Xms512m -Xmx512m -XX:+AlwaysPreTouch"
taskset -c 0 nginx -p $RUN -e $RUN/origin-error.log -c $RUN/origin.conf & PIDS+=($!)
NGX=$((PB+2)); sed -e "s#@RUN@#$RUN#g" -e "s#@ORIGIN_PORT@#$ORIGIN#g" -e "s#@NGINX_PORT@#$NGX#g" $HERE/nginx-proxy.conf.in > $RUN/nginx-proxy.conf
taskset -c 1 nginx -p $RUN -e $RUN/nginx-proxy-error.log -c $RUN/nginx-proxy.conf & PIDS+=($!); PID_N=$!
(cd $ROOT_A && KVGATE_JAVA_OPTS="$KVGATE_JAVA_OPTS ${OPTS_A:-}" exec taskset -c 1 ./kvgate serve --config $RUN/kvgate-a.yaml) > $RUN/kvgate-a.log 2>&1 & PIDS+=($!); PID_A=$!
(cd $ROOT_B && KVGATE_JAVA_OPTS="$KVGATE_JAVA_OPTS ${OPTS_B:-}" exec taskset -c 1 ./kvgate serve --config $RUN/kvgate-b.yaml) > $RUN/kvgate-b.log 2>&1 & PIDS+=($!); PID_B=$!
declare -A PORT=([a]=$PA [b]=$PBB [n]=$NGX) PID=([a]=$PID_A [b]=$PID_B [n]=$PID_N)
for x in a b; do for i in $(seq 150); do c=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @$RUN/body-1k.json http://127.0.0.1:${PORT[$x]}/v1/chat/completions || true); [ "$c" = 200 ] && break; sleep 0.2; done; [ "$c" = 200 ] || { echo "$x not up"; tail $RUN/kvgate-$x.log; exit 1; }; done
HZ=$(getconf CLK_TCK)
ticks() { local s=0 p; for p in $1 $(pgrep -P $1 || true); do s=$((s + $(sed 's/.*) //' /proc/$p/stat | awk '{print $12+$13}'))); done; echo $s; }
# User-space ticks only: the kernel's share of a loopback proxy's CPU moves between processes (softirq work runs in
# whichever task is on the core), so the user part is the steadier measure of a change to the proxy's own code.
uticks() { local s=0 p; for p in $1 $(pgrep -P $1 || true); do s=$((s + $(sed 's/.*) //' /proc/$p/stat | awk '{print $12}'))); done; echo $s; }
wrkrun() { BODY_FILE=$RUN/body-$2.json URI_PATH=$(uri_of $2) taskset -c 0 wrk -t1 -c32 -d$3s --latency -s $HERE/post.lua http://127.0.0.1:${PORT[$1]} > $4 2>&1; }
for x in a b n; do wrkrun $x 1k 8 /dev/null; for pl in $PL; do wrkrun $x $pl 4 /dev/null; done; done   # warm-up
# wrk's 99th percentile latency in ms (its --latency table prints 12.34us / 1.23ms / 1.02s).
p99ms() { awk '$1 == "99%" {v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v); m = (u == "us") ? 0.001 : (u == "s") ? 1000 : 1; printf "%.2f", v * m}' $1; }
echo -e "round\tgw\tpayload\treq/s\tcpu_us/req\tuser_us/req\tsyscalls/req\tepoll_ctl/req\tcs/req\tp99_ms" > $OUT/res.tsv
for r in $(seq $ROUNDS); do for pl in $PL; do for x in n a b; do
  f=$OUT/wrk-$r-$x-$pl.txt
  c0=$(ticks ${PID[$x]}); u0=$(uticks ${PID[$x]})
  perf stat -x, -e raw_syscalls:sys_enter,syscalls:sys_enter_epoll_ctl,context-switches -p $(echo ${PID[$x]} $(pgrep -P ${PID[$x]} || true) | tr ' ' ,) -o $OUT/stat-$r-$x-$pl.csv >/dev/null 2>&1 & ps=$!
  sleep 0.3
  wrkrun $x $pl $D $f
  kill -INT $ps; wait $ps || true
  c1=$(ticks ${PID[$x]}); u1=$(uticks ${PID[$x]})
  n=$(awk '/requests in/ {print $1}' $f); rps=$(awk '/^Requests\/sec:/ {print $2}' $f)
  awk -F, -v n=$n -v r=$r -v x=$x -v pl=$pl -v rps=$rps -v cu=$(awk -v a=$c0 -v b=$c1 -v hz=$HZ -v n=$n 'BEGIN{printf "%.1f",(b-a)*1e6/hz/n}') \
    -v p99=$(p99ms $f) -v uu=$(awk -v a=$u0 -v b=$u1 -v hz=$HZ -v n=$n 'BEGIN{printf "%.1f",(b-a)*1e6/hz/n}') \
    '$3 ~ /sys_enter$/ {s=$1} $3 ~ /epoll_ctl/ {e=$1} $3 ~ /context-switches/ {c=$1} END {printf "%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.3f\t%.3f\t%s\n", r, x, pl, rps, cu, uu, s/n, e/n, c/n, p99}' $OUT/stat-$r-$x-$pl.csv >> $OUT/res.tsv
done; done; done
if [ "${ALLOC:-1}" = 1 ]; then
  JDK=$(dirname $(readlink -f /proc/$PID_A/exe))
  echo -e "gw\trequests\talloc_bytes\tbytes/req" > $OUT/alloc.tsv
  for x in a b; do
    $JDK/jcmd ${PID[$x]} JFR.start name=alloc settings=$HERE/alloc.jfc filename=$OUT/alloc-$x.jfr > /dev/null
    wrkrun $x ${ALLOC_PL:-1k} $D $OUT/wrk-alloc-$x.txt
    $JDK/jcmd ${PID[$x]} JFR.stop name=alloc > /dev/null
    n=$(awk '/requests in/ {print $1}' $OUT/wrk-alloc-$x.txt)
    $JDK/jfr print --json --events jdk.ThreadAllocationStatistics $OUT/alloc-$x.jfr | python3 $HERE/jfr-alloc.py | awk -v x=$x -v n=$n '{printf "%s\t%d\t%d\t%.0f\n", x, n, $1, $1/n}' >> $OUT/alloc.tsv
  done
  column -t $OUT/alloc.tsv
fi
column -t $OUT/res.tsv
echo "mean over the rounds:"
awk -F'\t' 'NR > 1 {k = $2 "\t" $3; n[k]++; r[k] += $4; c[k] += $5; u[k] += $6; p[k] += $10}
  END {printf "gw\tpayload\treq/s\tcpu_us/req\tuser_us/req\tp99_ms\n"; for (k in n) printf "%s\t%.0f\t%.1f\t%.1f\t%.2f\n", k, r[k] / n[k], c[k] / n[k], u[k] / n[k], p[k] / n[k]}' \
  $OUT/res.tsv | sort | column -t
echo "(gw: n = nginx, a = $ROOT_A, b = $ROOT_B; raw output in $OUT)"
uptime
