#!/usr/bin/env bash
# transport-ab.sh: the same kvgate checkout twice on core 1, one on epoll and one on io_uring, beside nginx as a
# proxy, in the front-door layout (perf/frontdoor/layout.sh). Three rotated rounds of wrk -t1 -c32 for 6 s at
# saturation each; prints req/s and the proxy's CPU us/request (/proc ticks, all threads). KVGATE_ROOT: the checkout,
# SIZE: the body size (1024). Bounded: about 3 minutes.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)/frontdoor"; ROOT=${KVGATE_ROOT:-$(dirname "$HERE")/..}; RUN=${RUN:-/tmp/kvgate-transport-ab}; rm -rf $RUN; mkdir -p $RUN
PB=27800; ORIGIN=$((PB+1)); NGX=$((PB+2)); KV=$((PB+4)); KA=$((PB+5)); KVE=$((PB+8)); KV2=$((PB+10)); KA2=$((PB+11)); KVE2=$((PB+12))
. $HERE/layout.sh
layout_render nginx-origin.conf nginx-origin.conf $ORIGIN $NGX 0 0 0; layout_render nginx-proxy.conf nginx-proxy.conf $ORIGIN $NGX 0 0 0
layout_render kvgate.yaml kvgate.yaml $ORIGIN $NGX $KV $KA $KVE
layout_render kvgate.yaml kvgate2.yaml $ORIGIN $NGX $KV2 $KA2 $KVE2; sed -i 's/^transport: .*/transport: epoll/' $RUN/kvgate.yaml; sed -i 's/^transport: .*/transport: io_uring/' $RUN/kvgate2.yaml
. $HERE/bodies.sh; make_body ${SIZE:-1024} $RUN/body.json
layout_start_nginx
layout_start_kvgate $ROOT $RUN/kvgate.yaml $RUN/kvgate.log; P1=$PID_G
layout_start_kvgate $ROOT $RUN/kvgate2.yaml $RUN/kvgate2.log; P2=$PID_G
layout_await_200 $KV $RUN/body.json kvgate; layout_await_200 $KV2 $RUN/body.json kvgate2; layout_await_200 $NGX $RUN/body.json nginx
grep serving $RUN/kvgate.log $RUN/kvgate2.log
for p in $KV $KV2; do BODY_FILE=$RUN/body.json taskset -c 0 wrk -t1 -c32 -d20s -s $HERE/post.lua http://127.0.0.1:$p >/dev/null; done
for r in 1 2 3; do for t in epoll uring nginx; do
  case $t in epoll) p=$KV; pid=$P1;; uring) p=$KV2; pid=$P2;; nginx) p=$NGX; pid=$PID_N;; esac
  c0=$(layout_cpu_ticks $pid)
  n=$(BODY_FILE=$RUN/body.json taskset -c 0 wrk -t1 -c32 -d6s -s $HERE/post.lua http://127.0.0.1:$p | awk '/requests in/ {print $1}')
  c1=$(layout_cpu_ticks $pid)
  echo "$r $t rps $((n/6)) cpu_us_per_req $(awk -v a=$c0 -v b=$c1 -v n=$n 'BEGIN{printf "%.2f", (b-a)*10000/n}')"
done; done
