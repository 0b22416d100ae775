# The front-door layout shared by perf/paced-jit.sh, perf/paced-ab.sh and perf/idle-cost.sh (sourced), with its paced
# load and CPU counters: the origin (nginx, fixed completion) on core 0, nginx as a proxy and kvgate gateways pinned
# as whole processes to core 1, everything on 127.0.0.1. Expects HERE (perf/frontdoor) and RUN (a scratch directory)
# to be set; keeps every PID it starts in PIDS and stops only those on exit.

PIDS=()
layout_cleanup() { local p; for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; }
trap layout_cleanup EXIT

# layout_render TEMPLATE OUT ORIGIN_PORT NGINX_PORT KVGATE_PORT ADMIN_PORT KV_EVENTS_PORT: one file from
# perf/frontdoor/TEMPLATE.in into $RUN/OUT with the ports and the run directory filled in.
layout_render() {
  sed -e "s#@RUN@#$RUN#g" -e "s#@ORIGIN_PORT@#$3#g" -e "s#@NGINX_PORT@#$4#g" -e "s#@KVGATE_PORT@#$5#g" \
    -e "s#@KVGATE_ADMIN_PORT@#$6#g" -e "s#@KV_EVENTS_PORT@#$7#g" "$HERE/$1.in" > "$RUN/$2"
}

# layout_start_nginx: the origin on core 0 and nginx as a proxy on core 1, from $RUN/nginx-origin.conf and
# $RUN/nginx-proxy.conf; sets PID_N (the proxy's master).
layout_start_nginx() {
  taskset -c 0 nginx -p "$RUN" -e "$RUN/origin-error.log" -c "$RUN/nginx-origin.conf" & PIDS+=($!)
  taskset -c 1 nginx -p "$RUN" -e "$RUN/nginx-proxy-error.log" -c "$RUN/nginx-proxy.conf" & PIDS+=($!); PID_N=$!
}

# layout_start_kvgate CHECKOUT CONFIG LOG: builds the checkout if needed, starts its gateway on core 1 (the JVM is
# the started process: `kvgate serve` execs it); sets PID_G.
layout_start_kvgate() {
  (cd "$1" && ./kvgate --help) > "$3.build" 2>&1 || true
  (cd "$1" && KVGATE_JAVA_OPTS="${KVGATE_JAVA_OPTS:--Xms512m -Xmx512m -XX:+AlwaysPreTouch}" exec taskset -c 1 \
    ./kvgate serve --config "$2") > "$3" 2>&1 & PIDS+=($!); PID_G=$!
}

# layout_await_200 PORT BODY WHAT: waits (bounded, 30 s) for a 200 to a chat POST of BODY, or exits naming WHAT.
layout_await_200() {
  local c=""
  for _ in $(seq 150); do
    c=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$2" \
      "http://127.0.0.1:$1/v1/chat/completions" || true); [ "$c" = 200 ] && return 0; sleep 0.2
  done
  echo "$3 did not answer 200 on 127.0.0.1:$1 (last: $c); see $RUN" >&2; exit 1
}

# layout_paced PORT SECONDS BODY RATE [LOG]: h2load's paced load from core 0 (16 connections, RATE req/s in all) of
# chat POSTs of BODY; LOG gets its per-request log (start µs, status, duration µs).
layout_paced() {
  taskset -c 0 h2load --h1 -t1 -c16 -m1 --rps=$(($4 / 16)) -D "$2" -d "$3" -H 'content-type: application/json' \
    ${5:+--log-file=$5} "http://127.0.0.1:$1/v1/chat/completions" > /dev/null 2>&1 || true
}

# layout_cpu_ticks PID [user]: the CPU clock ticks of a process and its children (nginx: master and workers), all
# threads; user time only with "user".
layout_cpu_ticks() {
  local s=0 p
  for p in $1 $(pgrep -P "$1" || true); do
    s=$((s + $(sed 's/.*) //' /proc/"$p"/stat | awk -v f="${2:-all}" '{print f == "user" ? $12 : $12 + $13}')))
  done
  echo $s
}
