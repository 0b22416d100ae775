#!/usr/bin/env bash
# Rolling restart behind a balancer (issue #38 "Done when"): two gateways with the same configuration behind HAProxy
# (mode http, health check GET /ready every second, fall 1, rise 2) in front of two simulated vLLM engines;
# `./kvgate bench` through HAProxy for DURATION s; at KILL1_AT s gateway 1 gets SIGTERM, is started again once it has
# exited, and at KILL2_AT s gateway 2 gets the same. Goal: 0 failed requests (the gateway answers /ready 503 at once,
# keeps serving for shutdown.drain_delay_ms while HAProxy takes it out, then drains and exits 0).
#
#   engines:  2 x `./kvgate sim --dialect vllm` (TTFT 20 ms, ITL 5 ms)
#   gateways: 2 x `./kvgate serve`, least_outstanding over both engines, shutdown.drain_delay_ms DELAY_MS
#   balancer: HAProxy mode http, round robin, `option httpchk GET /ready`, inter 1s fall 1 rise 2, no retries of
#             failed requests (`retries 0`, no retry-on, no redispatch): a request that reaches a gateway that does not
#             answer counts
#   load:     open loop (Poisson) RATE req/s, streaming chat, max_tokens 16, DURATION s
# Loopback only; bounded (bench by its own timeout, each wait by a deadline). Writes perf/results/rolling-restart-<date>.md.
#
#   perf/rolling-restart.sh                     # defaults below; env vars override
#   DELAY_MS=0 perf/rolling-restart.sh          # the old behaviour for comparison: the listener closes at the signal
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NAME=rolling-restart
. "$ROOT/perf/fleet-common.sh"
OUT="${OUT:-$ROOT/perf/results/rolling-restart-$DATE.md}"
DURATION="${DURATION:-40}"
RATE="${RATE:-50}"
KILL1_AT="${KILL1_AT:-10}"
KILL2_AT="${KILL2_AT:-25}"
DELAY_MS="${DELAY_MS:-5000}"
DRAIN_MS="${DRAIN_MS:-30000}"
command -v haproxy >/dev/null || { echo "needs haproxy (.ci/setup installs it)" >&2; exit 1; }

P_ENGINE() { echo $((PORT_BASE + $1)); }
P_GW() { echo $((PORT_BASE + 10 + $1)); }
P_ADMIN() { echo $((PORT_BASE + 20 + $1)); }
P_HA=$((PORT_BASE + 30)); P_STATS=$((PORT_BASE + 31))

for i in 1 2; do
  start "sim$i" kv sim --dialect vllm --port "$(P_ENGINE "$i")" --model qwen3 --seed "$i" --ttft-ms 20 --itl-ms 5
done
for r in 1 2; do
  cat >"$WORK/gw$r.yaml" <<YAML
listen: 127.0.0.1:$(P_GW "$r")
admin_listen: 127.0.0.1:$(P_ADMIN "$r")
control_socket: off
shutdown:
  drain_delay_ms: $DELAY_MS
# Generous probe timeouts: on a loaded host an engine's /health can take over a second, and an engine marked
# unhealthy would fail requests for reasons that have nothing to do with the restart under test.
health:
  interval_ms: 1000
  timeout_ms: 5000
  unhealthy_threshold: 5
rules:
  - name: chat
    models: [qwen3]
    policy: least_outstanding
    endpoints:
      - url: http://127.0.0.1:$(P_ENGINE 1)
      - url: http://127.0.0.1:$(P_ENGINE 2)
YAML
done
serve() { start "gw$1" kv serve --config "$WORK/gw$1.yaml" --drain-ms "$DRAIN_MS"; }
serve 1; serve 2
for i in 1 2; do wait_http "sim$i" "$(P_ENGINE "$i")" /health; done
for r in 1 2; do wait_http "gw$r" "$(P_GW "$r")" /ready/engines; done

cat >"$WORK/haproxy.cfg" <<CFG
global
    maxconn 4096
    log stdout format raw local0
defaults
    mode http
    log global
    option httplog
    option http-keep-alive
    retries 0
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
    timeout check 5s
frontend fe
    bind 127.0.0.1:$P_HA
    default_backend gateways
frontend stats
    bind 127.0.0.1:$P_STATS
    stats enable
    stats uri /stats
backend gateways
    balance roundrobin
    option httpchk GET /ready
    http-check expect status 200
    default-server inter 1s fall 1 rise 2
    server gw1 127.0.0.1:$(P_GW 1) check
    server gw2 127.0.0.1:$(P_GW 2) check
CFG
start haproxy haproxy -db -f "$WORK/haproxy.cfg"
# Both gateways in rotation before the load starts.
server_up() { curl -s -m 1 "http://127.0.0.1:$P_STATS/stats;csv" | awk -F, -v s="$1" '$1=="gateways" && $2==s {print $18}' | grep -q '^UP'; }
wait_up() { for _ in $(seq 1 150); do server_up "$1" && return 0; sleep 0.2; done; echo "HAProxy never saw $1 UP" >&2; exit 1; }
wait_up gw1; wait_up gw2

T0=$(date +%s%3N)
since_ms() { echo $(( $(date +%s%3N) - T0 )); }
since() { local ms; ms=$(since_ms); printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)); }
EVENTS="$WORK/events.txt"; : >"$EVENTS"
event() { echo "$(since) s: $*" | tee -a "$EVENTS" >&2; }

( BENCH_TIMEOUT=$((DURATION + 60)) bench rolling --target "http://127.0.0.1:$P_HA" --model qwen3 --workload shared-prefix \
    --rate "$RATE" --duration "$DURATION" --stream --max-tokens 16 --seed 7 ) &
BENCH_PID=$!

roll() { # roll R AT : SIGTERM gateway R at AT s into the load, wait for its exit, start it again, wait until UP
  local r="$1" at="$2" var p rc t_exit
  while [ "$(since_ms)" -lt $((at * 1000)) ]; do sleep 0.05; done
  var="PID_gw$r"; p="${!var}"
  event "SIGTERM gw$r (pid $p)"
  kill -TERM "$p"
  # Out of rotation: HAProxy's next check sees /ready 503.
  for _ in $(seq 1 50); do server_up "gw$r" || break; sleep 0.1; done
  server_up "gw$r" && event "gw$r still UP in HAProxy after 5 s" || event "gw$r DOWN in HAProxy"
  local deadline=$(( $(date +%s) + DELAY_MS / 1000 + DRAIN_MS / 1000 + 30 ))
  while kill -0 "$p" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.1; done
  rc=0; wait "$p" || rc=$?
  event "gw$r exited with status $rc"
  echo "$rc" >"$WORK/gw$r.exit"
  cp "$WORK/gw$r.log" "$WORK/gw$r.first.log"
  serve "$r"
  wait_up "gw$r"
  event "gw$r UP again in HAProxy"
}
roll 1 "$KILL1_AT"
roll 2 "$KILL2_AT"
wait "$BENCH_PID"
event "bench done"

python3 - "$WORK" "$OUT" "$DATE" "$(machine)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$DURATION" "$RATE" "$DELAY_MS" \
  "$KILL1_AT" "$KILL2_AT" "$(haproxy -v | head -1)" <<'PY'
import json, os, sys
work, out, date, machine, load, duration, rate, delay, k1, k2, haproxy = sys.argv[1:]
t = json.load(open(os.path.join(work, "rolling.json")))["targets"][0]
events = open(os.path.join(work, "events.txt")).read().strip().splitlines()
exits = [open(os.path.join(work, f"gw{r}.exit")).read().strip() for r in (1, 2)]
def pct(k):
    p = t[k]
    return f"{p['p50']} / {p['p90']} / {p['p99']} / {p['max']}"
lines = [f"# Rolling restart behind HAProxy ({date})", "",
    f"Machine: {machine}. Load average at the end: {load}. {haproxy}.", "",
    "Command: `perf/rolling-restart.sh` "
    f"(DURATION={duration} RATE={rate} DELAY_MS={delay} KILL1_AT={k1} KILL2_AT={k2}): two gateways behind HAProxy "
    "(mode http, `option httpchk GET /ready`, inter 1s fall 1 rise 2, `retries 0`), two simulated vLLM engines, "
    f"`./kvgate bench` open loop {rate} req/s streaming chat for {duration} s through HAProxy; each gateway in turn "
    "gets SIGTERM, is started again after it exits and rejoins.", "",
    "| requests | ok | errors | errors by class | latency ms p50 / p90 / p99 / max | TTFT ms p50 / p90 / p99 / max | gateway exit status |",
    "|---|---|---|---|---|---|---|",
    f"| {t['requests']} | {t['ok']} | {t['errors']} | {json.dumps(t['errors_by_class'])} | {pct('latency_ms')} | {pct('ttft_ms')} | {', '.join(exits)} |",
    "", "Timeline (seconds since the load started):", ""] + [f"- {e}" for e in events]
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
[ "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['targets'][0]['errors'])" "$WORK/rolling.json")" = 0 ] \
  || { echo "rolling restart: requests failed" >&2; exit 1; }
