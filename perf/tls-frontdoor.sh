#!/usr/bin/env bash
# TLS front door: kvgate terminating TLS (BoringSSL through netty-tcnative, and the JDK's SSLEngine) beside nginx
# terminating TLS with the same ECDSA P-256 certificate and the same TLS 1.3 cipher suite, each proxying 1 KiB chat
# completions to the same fixed-answer nginx origin. The origin and wrk share core 0; nginx (1 worker) and each gateway
# (io_threads: 1) run on core 1 (taskset), measured in turn, round after round, with bounded wrk runs:
#   keepalive: wrk -t1 -c32 over kept-alive TLS connections (record encryption + proxying)
#   newconn:   the same with "Connection: close", so every request pays a full TLS handshake (no resumption)
# Reference: the same gateway build serving plain HTTP (p), in the same rounds.
# Per run: requests/s and the proxy's CPU microseconds per request (/proc ticks of all its threads).
# usage: perf/tls-frontdoor.sh     env: ROUNDS=3 D=5 WARM=30 OUT=DIR PORT_BASE=24700
# Only processes started here are stopped (by PID). Loopback only. Needs nginx, wrk, openssl; a built tools jar
# (./kvgate builds it on first use).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"; HERE=$ROOT/perf/tls
OUT=${OUT:-${TMPDIR:-/tmp}/kvgate-tls-$(date -u +%Y%m%dT%H%M%SZ)}; ROUNDS=${ROUNDS:-3}; D=${D:-5}
PB=${PORT_BASE:-24700}; ORIGIN=$((PB+1)); NGX=$((PB+2)); GO=$((PB+3)); GOA=$((PB+4)); GJ=$((PB+5)); GJA=$((PB+6))
GP=$((PB+7)); GPA=$((PB+8))
mkdir -p "$OUT/run"; RUN=$OUT/run
PIDS=(); cleanup() { for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; sleep 1; for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $RUN/server.key -out $RUN/server.pem \
  -days 2 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 2>/dev/null
sed -e "s#@RUN@#$RUN#g" -e "s#@ORIGIN_PORT@#$ORIGIN#g" $ROOT/perf/frontdoor/nginx-origin.conf.in > $RUN/origin.conf
for x in openssl jdk plain; do
  case $x in openssl) P=$GO; A=$GOA ;; jdk) P=$GJ; A=$GJA ;; plain) P=$GP; A=$GPA ;; esac
  sed -e "s#@RUN@#$RUN#g" -e "s#@ORIGIN_PORT@#$ORIGIN#g" -e "s#@KVGATE_PORT@#$P#g" -e "s#@KVGATE_ADMIN_PORT@#$A#g" \
    -e "s#@PROVIDER@#$x#g" $HERE/kvgate-tls.yaml.in > $RUN/kvgate-$x.yaml
done
# The reference: the same gateway without TLS (plain HTTP), so the TLS share of its cost is visible.
sed -i -e '/^tls:/,/^  provider:/d' $RUN/kvgate-plain.yaml
. $ROOT/perf/frontdoor/bodies.sh
make_body 1024 $RUN/body-1k.json
export KVGATE_JAVA_OPTS="-Xms512m -Xmx512m -XX:+AlwaysPreTouch"
taskset -c 0 nginx -p $RUN -e $RUN/origin-error.log -c $RUN/origin.conf & PIDS+=($!)
(cd $ROOT && exec taskset -c 1 ./kvgate serve --config $RUN/kvgate-openssl.yaml) > $RUN/kvgate-openssl.log 2>&1 & PIDS+=($!); PID_O=$!
(cd $ROOT && exec taskset -c 1 ./kvgate serve --config $RUN/kvgate-jdk.yaml) > $RUN/kvgate-jdk.log 2>&1 & PIDS+=($!); PID_J=$!
(cd $ROOT && exec taskset -c 1 ./kvgate serve --config $RUN/kvgate-plain.yaml) > $RUN/kvgate-plain.log 2>&1 & PIDS+=($!); PID_P=$!
declare -A PORT=([o]=$GO [j]=$GJ [n]=$NGX [p]=$GP) SCHEME=([o]=https [j]=https [n]=https [p]=http)
up() { for i in $(seq 300); do c=$(curl -s -o /dev/null -w '%{http_code}' --cacert $RUN/server.pem -H 'Content-Type: application/json' \
  --data-binary @$RUN/body-1k.json https://127.0.0.1:$1/v1/chat/completions || true); [ "$c" = 200 ] && return 0; sleep 0.2; done; return 1; }
for i in $(seq 300); do c=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @$RUN/body-1k.json http://127.0.0.1:$GP/v1/chat/completions || true); [ "$c" = 200 ] && break; sleep 0.2; done
for x in o j; do up ${PORT[$x]} || { echo "gateway $x not up"; tail $RUN/kvgate-*.log; exit 1; }; done
cipher() { openssl s_client -connect 127.0.0.1:$1 -CAfile $RUN/server.pem </dev/null 2>/dev/null | awk '/^New,/ {print $2 " " $5}'; }
CIPHER_O=$(cipher $GO); CIPHER_J=$(cipher $GJ)
SUITE=$(echo "$CIPHER_O" | awk '{print $2}')
sed -e "s#@RUN@#$RUN#g" -e "s#@ORIGIN_PORT@#$ORIGIN#g" -e "s#@NGINX_PORT@#$NGX#g" -e "s#@CIPHERS@#$SUITE#g" $HERE/nginx-tls-proxy.conf.in > $RUN/nginx-tls.conf
taskset -c 1 nginx -p $RUN -e $RUN/nginx-tls-error.log -c $RUN/nginx-tls.conf & PIDS+=($!); PID_N=$!
up $NGX || { echo "nginx not up"; cat $RUN/nginx-tls-error.log; exit 1; }
CIPHER_N=$(cipher $NGX)
declare -A PID=([o]=$PID_O [j]=$PID_J [n]=$PID_N [p]=$PID_P)
HZ=$(getconf CLK_TCK)
ticks() { local s=0 p; for p in $1 $(pgrep -P $1 || true); do s=$((s + $(sed 's/.*) //' /proc/$p/stat | awk '{print $12+$13}'))); done; echo $s; }
wrkrun() { # gw mode seconds file
  local hdr=(); [ $2 = newconn ] && hdr=(-H "Connection: close")
  BODY_FILE=$RUN/body-1k.json taskset -c 0 wrk -t1 -c32 -d$3s "${hdr[@]}" -s $ROOT/perf/frontdoor/post.lua ${SCHEME[$1]}://127.0.0.1:${PORT[$1]} > $4 2>&1; }
# Warm-up (JIT): WARM seconds of each mode per proxy before the measured rounds.
for x in o j n p; do wrkrun $x keepalive ${WARM:-30} /dev/null; wrkrun $x newconn $(( ${WARM:-30} / 3 )) /dev/null; done
echo -e "round\tgw\tmode\treq/s\tcpu_us/req\terrors" > $OUT/res.tsv
for r in $(seq $ROUNDS); do for mode in keepalive newconn; do for x in n o j p; do
  f=$OUT/wrk-$r-$x-$mode.txt
  c0=$(ticks ${PID[$x]}); wrkrun $x $mode $D $f; c1=$(ticks ${PID[$x]})
  n=$(awk '/requests in/ {print $1}' $f); rps=$(awk '/^Requests\/sec:/ {print $2}' $f)
  err=$(awk '/Non-2xx|Socket errors/ {printf "%s ", $0}' $f)
  echo -e "$r\t$x\t$mode\t$rps\t$(awk -v a=$c0 -v b=$c1 -v hz=$HZ -v n=$n 'BEGIN{printf "%.1f",(b-a)*1e6/hz/n}')\t${err:-none}" >> $OUT/res.tsv
done; done; done
column -t -s$'\t' $OUT/res.tsv
echo "mean over the rounds (gw: n = nginx 1 worker, o = kvgate tls.provider openssl, j = kvgate tls.provider jdk, p = kvgate plain HTTP, for reference):"
awk -F'\t' 'NR > 1 {k = $2 "\t" $3; n[k]++; r[k] += $4; c[k] += $5}
  END {printf "gw\tmode\treq/s\tcpu_us/req\n"; for (k in n) printf "%s\t%.0f\t%.1f\n", k, r[k] / n[k], c[k] / n[k]}' $OUT/res.tsv | sort | column -t | tee $OUT/mean.tsv
echo "negotiated (protocol cipher): nginx $CIPHER_N; kvgate openssl $CIPHER_O; kvgate jdk $CIPHER_J"
echo "(raw output in $OUT)"; nproc; uptime
