#!/usr/bin/env bash
# What a tenant's limits reservation adds to a request's latency (issue #40 "Numbers": with Redis on loopback, p99
# added latency <= 1 ms at 1,000 req/s, and nothing added to requests of tenants without limits).
#
# Two gateways over the same simulator, identical but for the store:
#   gwR  `rate_limit_store` = a redis-server on loopback (on_failure: local, timeout_ms 50)
#   gwL  no store (this replica's counters, `replicas: 1`)
# and three callers on each: the tenant `limited` (all four limits, set far above the load so nothing is refused:
# every request is reserved and settled), the tenant `open` (no limits), and a flat `api_keys` key (tenant
# `anonymous`, no tenancy at all). Each target is `./kvgate bench` paced at RATE req/s (constant arrivals, open loop:
# latency from the intended start, so a stall is not hidden), non-streaming, max_tokens 1, WARMUP s not recorded then
# DURATION s measured, one target after the other, all of them ROUNDS times in a rotated order (round k starts at
# target k), so neither the JIT's warm-up nor a drift of the host favours one side.
#
#   added p99 (store)  = p99(limited on gwR) - p99(open on gwR)   the Redis round trip: the issue's bar, <= 1 ms
#   added p99 (local)  = p99(limited on gwL) - p99(open on gwL)   the in-memory reservation
#   added p99 (open)   = p99(open) - p99(flat key), on each       a tenant without limits: the bar is ~0
# Also each gateway's kvgate_rate_limit_store_failures_total (nonzero: some reservations were decided by on_failure
# instead of Redis, e.g. after timeout_ms) and the bench's schedule (late sends: the generator, not the gateway).
#
# Loopback only; bounded: every bench by its own timeout; every process stopped by its PID. Takes about
# 6 x GATEWAY_WARMUP + ROUNDS x 6 x (WARMUP + DURATION + 5) s (defaults: 6 x 15 + 2 x 6 x 35 s = 8.5 min). Writes perf/results/tenant-reserve-latency-<date>.md.
#
#   perf/tenant-reserve-latency.sh                                   # the issue's run: 1,000 req/s
#   RATE=200 DURATION=5 WARMUP=3 ROUNDS=1 perf/tenant-reserve-latency.sh   # a quick end-to-end check
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NAME=tenant-reserve-latency
. "$ROOT/perf/fleet-common.sh"
. "$ROOT/perf/tenant-common.sh"
OUT="${OUT:-$ROOT/perf/results/tenant-reserve-latency-$DATE.md}"
RATE="${RATE:-1000}"
DURATION="${DURATION:-20}"
WARMUP="${WARMUP:-10}"
ROUNDS="${ROUNDS:-2}"
GATEWAY_WARMUP="${GATEWAY_WARMUP:-15}"
P_SIM=$((PORT_BASE + 1)); P_REDIS=$((PORT_BASE + 2))
P_GWR=$((PORT_BASE + 10)); P_GWL=$((PORT_BASE + 11)); P_ADMR=$((PORT_BASE + 20)); P_ADML=$((PORT_BASE + 21))
KEY_LIMITED="reserve-latency-limited-0123456789"
KEY_OPEN="reserve-latency-open-0123456789"
KEY_FLAT="reserve-latency-flat-0123456789"

start sim kv sim --dialect vllm --port "$P_SIM" --model m --ttft-ms 0 --itl-ms 0 --max-concurrency 4096 --queue 4096
start_redis redis "$P_REDIS"
wait_http sim "$P_SIM"

gateway_yaml() { # gateway_yaml PORT ADMIN_PORT STORE(yes|no)
  cat <<YAML
listen: 127.0.0.1:$1
admin_listen: 127.0.0.1:$2
control_socket: "off"
$TENANT_HEALTH
api_keys: [$KEY_FLAT]
YAML
  if [ "$3" = yes ]; then
    echo "rate_limit_store: {url: \"redis://127.0.0.1:$P_REDIS\", on_failure: local, timeout_ms: 50}"
  fi
  cat <<YAML
tenants:
  - name: limited
    api_key_sha256: [$(tenant_digest "$KEY_LIMITED")]
    limits: {requests_per_minute: 100000000, tokens_per_minute: 1000000000000, max_concurrent: 100000, tokens_per_day: 1000000000000}
  - name: open
    api_key_sha256: [$(tenant_digest "$KEY_OPEN")]
YAML
  sim_rule "$P_SIM"
}
gateway_yaml "$P_GWR" "$P_ADMR" yes >"$WORK/gwR.yaml"
gateway_yaml "$P_GWL" "$P_ADML" no >"$WORK/gwL.yaml"
start gwR kv serve --config "$WORK/gwR.yaml"
start gwL kv serve --config "$WORK/gwL.yaml"
wait_http gwR "$P_GWR" /ready/engines
wait_http gwL "$P_GWL" /ready/engines

# label gateway-port key
TARGETS=(
  "redis-limited $P_GWR $KEY_LIMITED"
  "redis-open $P_GWR $KEY_OPEN"
  "redis-flat $P_GWR $KEY_FLAT"
  "local-limited $P_GWL $KEY_LIMITED"
  "local-open $P_GWL $KEY_OPEN"
  "local-flat $P_GWL $KEY_FLAT"
)
LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
# Every caller on both gateways once, nothing recorded: a gateway's first seconds at this rate are its JIT compiling
# (and, cold, its store's reservations missing timeout_ms), which would land on whichever target came first.
log "warming both gateways: every target for $GATEWAY_WARMUP s"
for t in "${TARGETS[@]}"; do
  read -r label port key <<<"$t"
  BENCH_TIMEOUT=$((GATEWAY_WARMUP + 60)) bench "warm-$label" --target "$label=http://127.0.0.1:$port" --model m \
    --max-tokens 1 --workload fixed --payload-bytes 512 --arrival constant --rate "$RATE" --duration "$GATEWAY_WARMUP" \
    --timeout 10 --drain 10 --seed 99 --api-key "$key"
done
log "RATE=$RATE req/s, WARMUP=$WARMUP s, DURATION=$DURATION s, ROUNDS=$ROUNDS over ${#TARGETS[@]} targets"
for round in $(seq 1 "$ROUNDS"); do
  for i in $(seq 0 $((${#TARGETS[@]} - 1))); do
    read -r label port key <<<"${TARGETS[$(((i + round - 1) % ${#TARGETS[@]}))]}"
    scrape "$port" "$WORK/$label.r$round.before.metrics" "$KEY_FLAT"
    BENCH_TIMEOUT=$((WARMUP + DURATION + 60)) bench "$label.r$round" --target "$label=http://127.0.0.1:$port" --model m \
      --max-tokens 1 --workload fixed --payload-bytes 512 --arrival constant --rate "$RATE" --warmup "$WARMUP" \
      --duration "$DURATION" --timeout 10 --drain 10 --seed "$round" --api-key "$key"
    scrape "$port" "$WORK/$label.r$round.after.metrics" "$KEY_FLAT"
  done
done
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK" "$OUT" "$RATE" "$WARMUP" "$DURATION" "$ROUNDS" "$(machine)" "$LOAD_START" "$LOAD_END" <<'PY'
import json, re, sys, datetime, glob, os
work, out, rate, warmup, duration, rounds, machine, load_start, load_end = sys.argv[1:]
rounds = int(rounds)
labels = ["redis-limited", "redis-open", "redis-flat", "local-limited", "local-open", "local-flat"]
rep = {}
for r in range(1, rounds + 1):
    for l in labels:
        rep[(l, r)] = json.load(open(f"{work}/{l}.r{r}.json"))

def pct(l, r, p):
    return rep[(l, r)]["latency_ms"][p]

def late(label, r):
    """The share of the target's requests the generator sent more than its lag threshold behind schedule."""
    x = rep[(label, r)]
    return x.get("schedule", {}).get("late_sends", 0) / max(1, x["requests"])

def failures(label, r):
    """kvgate_rate_limit_store_failures_total over one target's run (warm-up and measured), by decision/cause."""
    out = {}
    for side, sign in (("after", 1), ("before", -1)):
        for m in open(f"{work}/{label}.r{r}.{side}.metrics"):
            g = re.match(r'kvgate_rate_limit_store_failures_total\{([^}]*)\} (\S+)', m)
            if g:
                lab = dict(re.findall(r'(\w+)="([^"]*)"', g.group(1)))
                k = f'{lab.get("decision")}/{lab.get("cause")}'
                out[k] = out.get(k, 0) + sign * int(float(g.group(2)))
    return ", ".join(f"{k}: {v}" for k, v in sorted(out.items()) if v) or "0"

with open(out, "w") as f:
    f.write(f"# The tenant limits' reservation cost, with Redis on loopback and in memory, {datetime.date.today().isoformat()}\n\n")
    f.write("Issue #40 \"Numbers\": p99 added latency <= 1 ms at 1,000 req/s with Redis on loopback, and nothing added "
            "to requests of tenants without limits. Written by `perf/tenant-reserve-latency.sh` (what it runs is in its "
            "header): end-to-end latency from the intended start, paced open loop, non-streaming, max_tokens 1, through "
            "one gateway to one simulator answering at once.\n\n")
    f.write("| | |\n|---|---|\n")
    f.write(f"| machine | {machine} |\n")
    f.write(f"| load average (1/5/15 min) | start {load_start}, end {load_end} |\n")
    f.write(f"| load | {rate} req/s constant arrivals per target, {warmup} s warm-up (not recorded), {duration} s measured, "
            f"{rounds} round(s), targets one after the other in a rotated order |\n")
    f.write("\n| round | target | requests | errors | late sends (max lag ms) | p50 ms | p99 ms | p99.9 ms | max ms | store failures |\n")
    f.write("|---|---|---:|---:|---|---:|---:|---:|---:|---|\n")
    for r in range(1, rounds + 1):
        for l in labels:
            x = rep[(l, r)]
            s = x.get("schedule", {})
            lat = x["latency_ms"]
            f.write(f"| {r} | {l} | {x['requests']} | {x['errors']} | {s.get('late_sends', '?')} "
                    f"({s.get('max_lag_ms', 0):.1f}) | {lat['p50']:.3f} | {lat['p99']:.3f} | {lat['p999']:.3f} | {lat['max']:.3f} | "
                    f"{failures(l, r)} |\n")
    f.write("\n| round | added p99, limited via Redis (bar <= 1 ms) | added p99, limited in memory | added p99, open tenant vs flat key (gwR / gwL) | added p50, limited via Redis |\n")
    f.write("|---|---:|---:|---|---:|\n")
    for r in range(1, rounds + 1):
        red = pct("redis-limited", r, "p99") - pct("redis-open", r, "p99")
        loc = pct("local-limited", r, "p99") - pct("local-open", r, "p99")
        o1 = pct("redis-open", r, "p99") - pct("redis-flat", r, "p99")
        o2 = pct("local-open", r, "p99") - pct("local-flat", r, "p99")
        p50 = pct("redis-limited", r, "p50") - pct("redis-open", r, "p50")
        # A verdict only where both runs are what they claim: every reservation decided by Redis, the load delivered on time.
        clean = failures("redis-limited", r) == "0" and all(late(l, r) <= 0.01 for l in ("redis-limited", "redis-open"))
        verdict = ("**met**" if red <= 1.0 else "**not met**") if clean else "no verdict (store failures or late sends)"
        f.write(f"| {r} | {red:+.3f} ms {verdict} | {loc:+.3f} ms | {o1:+.3f} / {o2:+.3f} ms | {p50:+.3f} ms |\n")
    f.write("\nAdded latency is a difference of two runs on the same gateway, seconds apart: on a busy host it carries "
            "that host's noise (negative values are noise), so read it beside the late sends, the load average and the "
            "other round. A tenant without limits never reaches the store or takes a lock (docs/tenants.md), so its "
            "column is the run-to-run noise. Store failures (`kvgate_rate_limit_store_failures_total` over the target's "
            "run, by decision/cause) must be 0 on `redis-limited` for its row to be Redis's cost: a reservation that "
            "missed `timeout_ms` was decided by `on_failure: local` instead.\n")
print(open(out).read())
PY
