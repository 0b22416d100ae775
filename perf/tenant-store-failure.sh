#!/usr/bin/env bash
# Redis killed mid-run under each `rate_limit_store.on_failure` (issue #40 "Numbers": each mode behaves as documented,
# 0 hung requests). For each mode in MODES (default: local deny allow), a fresh redis-server and a fresh gateway with
# `rate_limit_store: {on_failure: MODE, timeout_ms: 50}` and one limited tenant (limits far above the load, so every
# 429 would be a bug); `./kvgate bench` paced at RATE req/s (constant arrivals, non-streaming) for DURATION s; at
# KILL_AT s (counted from the load's first answer) redis-server is SIGKILLed (its PID), and at RESTART_AT s a new one
# starts on the same port (0: never).
#
# Per mode it reports the answers by status (the gateway's kvgate_tenant_requests_total), the client's errors by
# class, the hung requests (no answer within the bench's --timeout of 10 s, or never answered: must be 0), the
# latency, and kvgate_rate_limit_store_failures_total by decision and cause. What each mode should show
# (docs/tenants.md): local: all 200, decisions "local"; deny: 503 rate_limit_store_unavailable while Redis is down,
# decisions "deny"; allow: all 200, decisions "allow"; in every mode 200s again from Redis once it is back.
#
# Each mode's gateway first serves WARMUP s (10) of the same load as another limited tenant, not counted.
# Loopback only; bounded: the bench by its own timeout; every process stopped by its PID. Takes about
# 3 x (WARMUP + DURATION + 30) s (defaults: 3.5 min). Writes perf/results/tenant-store-failure-<date>.md.
#
#   perf/tenant-store-failure.sh
#   MODES=deny RATE=50 DURATION=8 KILL_AT=3 RESTART_AT=5 perf/tenant-store-failure.sh   # a quick check
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NAME=tenant-store-failure
. "$ROOT/perf/fleet-common.sh"
. "$ROOT/perf/tenant-common.sh"
OUT="${OUT:-$ROOT/perf/results/tenant-store-failure-$DATE.md}"
MODES="${MODES:-local deny allow}"
RATE="${RATE:-200}"
DURATION="${DURATION:-30}"
KILL_AT="${KILL_AT:-10}"
RESTART_AT="${RESTART_AT:-20}"
P_SIM=$((PORT_BASE + 1)); P_REDIS=$((PORT_BASE + 2)); P_GW=$((PORT_BASE + 10)); P_ADMIN=$((PORT_BASE + 20))
KEY="store-failure-key-0123456789"
WARM_KEY="store-failure-warm-up-0123456789"
WARMUP="${WARMUP:-10}"
for m in $MODES; do
  case "$m" in local|deny|allow) ;; *) echo "MODES: unknown on_failure '$m' (local, deny, allow)" >&2; exit 1 ;; esac
done
[ "$KILL_AT" -lt "$DURATION" ] || { echo "KILL_AT=$KILL_AT must be before the end of the run (DURATION=$DURATION)" >&2; exit 1; }
[ "$RESTART_AT" = 0 ] || [ "$RESTART_AT" -gt "$KILL_AT" ] || { echo "RESTART_AT must be 0 or after KILL_AT" >&2; exit 1; }

start sim kv sim --dialect vllm --port "$P_SIM" --model m --ttft-ms 5 --itl-ms 0 --max-concurrency 4096 --queue 4096
wait_http sim "$P_SIM"

gateway_yaml() { # gateway_yaml MODE
  cat <<YAML
listen: 127.0.0.1:$P_GW
admin_listen: 127.0.0.1:$P_ADMIN
control_socket: "off"
$TENANT_HEALTH
rate_limit_store: {url: "redis://127.0.0.1:$P_REDIS", on_failure: $1, timeout_ms: 50}
tenants:
  - name: acme
    api_key_sha256: [$(tenant_digest "$KEY")]
    limits: {requests_per_minute: 100000000, tokens_per_minute: 1000000000000, max_concurrent: 100000}
  - name: warm-up
    api_key_sha256: [$(tenant_digest "$WARM_KEY")]
    limits: {requests_per_minute: 100000000}
YAML
  sim_rule "$P_SIM"
}

LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
echo -n >"$WORK/runs.txt"
for mode in $MODES; do
  start_redis "redis-$mode" "$P_REDIS"
  gateway_yaml "$mode" >"$WORK/gw-$mode.yaml"
  start "gw-$mode" kv serve --config "$WORK/gw-$mode.yaml"
  wait_http "gw-$mode" "$P_GW" /ready/engines
  # The same load as another limited tenant first (not counted): the gateway's JIT and the store's connection and
  # scripts warm, so what follows is the failure, not a cold start; its store failures are subtracted.
  BENCH_TIMEOUT=$((WARMUP + 60)) bench "warm-$mode" --target "warm-$mode=http://127.0.0.1:$P_GW" --model m --max-tokens 1 \
    --workload fixed --payload-bytes 512 --arrival constant --rate "$RATE" --duration "$WARMUP" --warmup 0 \
    --timeout 10 --drain 15 --seed 2 --api-key "$WARM_KEY"
  scrape "$P_GW" "$WORK/$mode.before.metrics" "$KEY"
  BENCH_TIMEOUT=$((DURATION + 60)) bench "$mode" --target "$mode=http://127.0.0.1:$P_GW" --model m --max-tokens 1 \
    --workload fixed --payload-bytes 512 --arrival constant --rate "$RATE" --duration "$DURATION" --warmup 0 \
    --timeout 10 --drain 15 --seed 1 --api-key "$KEY" &
  BENCH_PID=$!
  # KILL_AT counts from the load's first answer, not from the generator's start (a JVM that takes seconds to start on
  # a busy host would move the kill towards the run's end).
  answered() { curl -s -m 5 -H "Authorization: Bearer $KEY" "http://127.0.0.1:$P_GW/metrics" \
    | awk '/^kvgate_tenant_requests_total\{.*tenant="acme"/ {n += $2} END {print n + 0}'; }
  first="$(answered)"
  for _ in $(seq 1 300); do
    [ "$(answered)" = "$first" ] || break
    kill -0 "$BENCH_PID" 2>/dev/null || break
    sleep 0.2
  done
  sleep "$KILL_AT"
  var="PID_redis_$mode"; kill -9 "${!var}"
  log "$mode: redis-server (PID ${!var}) killed at ${KILL_AT} s"
  if [ "$RESTART_AT" != 0 ]; then
    sleep $((RESTART_AT - KILL_AT))
    stop "redis-$mode" # reaps the killed one
    start_redis "redis-$mode-back" "$P_REDIS"
    log "$mode: redis-server started again at ${RESTART_AT} s"
  fi
  wait "$BENCH_PID" || { echo "bench $mode failed" >&2; exit 1; }
  scrape "$P_GW" "$WORK/$mode.metrics" "$KEY"
  stop "gw-$mode"
  stop "redis-$mode"
  stop "redis-$mode-back"
  echo "$mode" >>"$WORK/runs.txt"
done
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK" "$OUT" "$RATE" "$DURATION" "$KILL_AT" "$RESTART_AT" "$(machine)" "$LOAD_START" "$LOAD_END" <<'PY'
import json, re, sys, datetime
work, out, rate, duration, kill_at, restart_at, machine, load_start, load_end = sys.argv[1:]

def families(path):
    fam = {}
    for m in open(path):
        g = re.match(r'(kvgate_\w+)\{([^}]*)\} (\S+)', m)
        if g:
            fam.setdefault(g.group(1), []).append((dict(re.findall(r'(\w+)="([^"]*)"', g.group(2))), float(g.group(3))))
    return fam

def delta(before, after, family, key):
    out = {}
    for lab, v in after.get(family, []):
        k = key(lab)
        if k is not None:
            out[k] = out.get(k, 0) + v
    for lab, v in before.get(family, []):
        k = key(lab)
        if k is not None:
            out[k] = out.get(k, 0) - v
    return {k: int(v) for k, v in out.items() if v}

expect = {"local": "200s; decisions `local` (this replica's share) while Redis is down",
          "deny": "503 `rate_limit_store_unavailable` while Redis is down; decisions `deny`",
          "allow": "200s unchecked while Redis is down; decisions `allow`"}
with open(out, "w") as f:
    f.write(f"# Redis killed mid-run under each `on_failure`, {datetime.date.today().isoformat()}\n\n")
    f.write("Issue #40 \"Numbers\": each `rate_limit_store.on_failure` mode behaves as documented, 0 hung requests. "
            "Written by `perf/tenant-store-failure.sh` (what it runs is in its header).\n\n")
    f.write("| | |\n|---|---|\n")
    f.write(f"| machine | {machine} |\n")
    f.write(f"| load average (1/5/15 min) | start {load_start}, end {load_end} |\n")
    f.write(f"| load | {rate} req/s constant arrivals, non-streaming, for {duration} s; redis-server SIGKILLed at {kill_at} s, "
            + (f"started again at {restart_at} s" if restart_at != "0" else "not restarted") + "; `timeout_ms: 50` |\n\n")
    f.write("| on_failure | expected | answers by status (gateway) | client errors by class | hung (timeout + unfinished) "
            "| latency p50 / p99 / max ms | store failures (decision/cause) |\n")
    f.write("|---|---|---|---|---:|---|---|\n")
    for line in open(f"{work}/runs.txt"):
        mode = line.strip()
        before, after = families(f"{work}/{mode}.before.metrics"), families(f"{work}/{mode}.metrics")
        status = delta(before, after, "kvgate_tenant_requests_total", lambda l: l["status"] if l.get("tenant") == "acme" else None)
        fails = delta(before, after, "kvgate_rate_limit_store_failures_total", lambda l: f'{l.get("decision")}/{l.get("cause")}')
        rep = json.load(open(f"{work}/{mode}.json"))
        errs = ", ".join(f"{k}: {v}" for k, v in rep.get("errors_by_class", {}).items() if v) or "none"
        hung = rep.get("errors_by_class", {}).get("timeout", 0) + rep.get("unfinished", 0)
        lat = rep["latency_ms"] or {"p50": float("nan"), "p99": float("nan"), "max": float("nan")}  # none answered
        f.write(f"| {mode} | {expect[mode]} | {', '.join(f'{k}: {v}' for k, v in sorted(status.items()))} | {errs} | "
                f"{hung}{'' if hung == 0 else ' **(must be 0)**'} | {lat['p50']:.1f} / {lat['p99']:.1f} / {lat['max']:.1f} | "
                f"{', '.join(f'{k}: {v}' for k, v in sorted(fails.items())) or '0'} |\n")
    f.write("\nStore failures: `decision` is what `on_failure` did (`local`, `deny`, `allow`; `released`: a grant that "
            "came after the timer had decided, given back; `lost`: a settlement that did not reach Redis), `cause` is "
            "`error` (refused or lost connection, an error reply: decided at once) or `timeout` (no answer within `timeout_ms`). Counted over "
            "the run only (a scrape before it is subtracted).\n")
print(open(out).read())
PY
