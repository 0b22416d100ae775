#!/usr/bin/env bash
# A tenant's tokens_per_minute across replicas (issue #40 "Numbers"): one tenant with tokens_per_minute LIMIT offered
# 3x that for DURATION seconds through REPLICAS gateways behind HAProxy `mode tcp` (round robin), in up to three runs
# (RUNS, in this order by default):
#   redis   the REPLICAS gateways share one redis-server (`rate_limit_store.url`): each enforces the whole limit
#           against the same counters. The issue's bar: admitted tokens <= 101 % and >= 95 % of what the limit allows.
#   shares  no store: each gateway enforces its share, floor(LIMIT / REPLICAS) (`replicas: REPLICAS`)
#   one     one gateway (`replicas: 1`) behind the same HAProxy: the reference
# What the limit allows over a run of at most a minute that starts with empty windows is LIMIT itself (a sliding
# minute), so the offered rate is 3 x LIMIT / DURATION tokens per second. Admitted tokens are the engine-reported
# usage the gateways counted (kvgate_tenant_tokens_total, summed over the replicas).
#
#   engines:  ENGINES x `./kvgate sim --dialect vllm` (Qwen3 tokenizer: the usage is real token counts)
#   gateways: identical YAML but for the port; restarted for every run (fresh windows), Redis flushed between runs
#   load:     `./kvgate bench`, open loop (Poisson), shared-prefix prompts of ~SYSTEM_TOKENS words, max_tokens
#             MAX_TOKENS, streaming, at RATE req/s (default: 3x what LIMIT allows at the measured tokens per request)
# Loopback only; bounded: each bench by its own timeout (DURATION + 90 s); every process stopped by its PID.
# Before each measured run, WARMUP s (10) of the same load as another limited tenant (`warm-up`) warm the gateways'
# JIT and the store's connection without touching the measured tenant's windows; the store's failures during the
# warm-up are subtracted. About 20 + RUNS x (WARMUP + DURATION + 25) s (defaults: 4.5 min). Writes perf/results/tenant-shares-<date>.md (OUT) and prints it.
#
#   perf/tenant-shares.sh                                    # the issue's run: 60 s, all three
#   DURATION=20 LIMIT=6000 RUNS="redis shares" perf/tenant-shares.sh   # a quick end-to-end check
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NAME=tenant-shares
. "$ROOT/perf/fleet-common.sh"
. "$ROOT/perf/tenant-common.sh"
OUT="${OUT:-$ROOT/perf/results/tenant-shares-$DATE.md}"
ENGINES="${ENGINES:-2}"
REPLICAS="${REPLICAS:-3}"
DURATION="${DURATION:-60}"
LIMIT="${LIMIT:-60000}"
SYSTEM_TOKENS="${SYSTEM_TOKENS:-200}"
MAX_TOKENS="${MAX_TOKENS:-20}"
RATE="${RATE:-}"
RUNS="${RUNS:-redis shares one}"
MODEL_DIR="$ROOT/deploy/models/qwen3"
KEY="tenant-shares-key-0123456789"
WARM_KEY="tenant-shares-warm-up-0123456789"
WARMUP="${WARMUP:-10}"
STORE_TIMEOUT_MS="${STORE_TIMEOUT_MS:-50}"
DIGEST="$(tenant_digest "$KEY")"
[ "$REPLICAS" -ge 2 ] && [ "$REPLICAS" -le 9 ] || { echo "REPLICAS=$REPLICAS must be in [2, 9]" >&2; exit 1; }
[ "$DURATION" -ge 5 ] && [ "$DURATION" -le 60 ] || { echo "DURATION=$DURATION must be in [5, 60] s (the limit allows LIMIT over one sliding minute)" >&2; exit 1; }
for run in $RUNS; do
  case "$run" in redis|shares|one) ;; *) echo "RUNS: unknown run '$run' (redis, shares, one)" >&2; exit 1 ;; esac
done
command -v haproxy >/dev/null || { echo "needs haproxy (apt-get install haproxy)" >&2; exit 1; }

P_ENGINE() { echo $((PORT_BASE + $1)); }
P_GW() { echo $((PORT_BASE + 40 + $1)); }
P_ADMIN() { echo $((PORT_BASE + 50 + $1)); }
P_MANY=$((PORT_BASE + 61)); P_ONE=$((PORT_BASE + 62)); P_REDIS=$((PORT_BASE + 63))

EPS=""
for i in $(seq 1 "$ENGINES"); do
  start "sim$i" kv sim --dialect vllm --port "$(P_ENGINE "$i")" --model qwen3 --model-dir "$MODEL_DIR" --seed "$i" \
    --ttft-ms 5 --itl-ms 2 --max-concurrency 64 --queue 1024
  EPS="$EPS      - url: http://127.0.0.1:$(P_ENGINE "$i")
"
done
{
  printf 'global\n  maxconn 4096\n\ndefaults\n  mode tcp\n  timeout connect 2s\n  timeout client 300s\n  timeout server 300s\n\n'
  printf 'frontend many\n  bind 127.0.0.1:%s\n  default_backend replicas\n\nbackend replicas\n  balance roundrobin\n' "$P_MANY"
  for r in $(seq 1 "$REPLICAS"); do printf '  server r%s 127.0.0.1:%s\n' "$r" "$(P_GW "$r")"; done
  printf '\nfrontend one\n  bind 127.0.0.1:%s\n  default_backend single\n\nbackend single\n  server r1 127.0.0.1:%s\n' "$P_ONE" "$(P_GW 1)"
} >"$WORK/haproxy.cfg"
start haproxy haproxy -db -f "$WORK/haproxy.cfg"
case " $RUNS " in *" redis "*) start_redis redis "$P_REDIS" ;; esac
for i in $(seq 1 "$ENGINES"); do wait_http "sim$i" "$(P_ENGINE "$i")"; done

gateway_yaml() { # gateway_yaml REPLICA REPLICAS STORE(yes|no)
  cat <<YAML
listen: 127.0.0.1:$(P_GW "$1")
admin_listen: 127.0.0.1:$(P_ADMIN "$1")
control_socket: "off"
$TENANT_HEALTH
replicas: $2
YAML
  if [ "$3" = yes ]; then
    echo "rate_limit_store: {url: \"redis://127.0.0.1:$P_REDIS\", on_failure: local, timeout_ms: $STORE_TIMEOUT_MS}"
  fi
  cat <<YAML
tenants:
  - name: acme
    api_key_sha256: [$DIGEST]
    limits: {tokens_per_minute: $LIMIT, tokens_per_day: 1000000000000}
  - name: warm-up
    api_key_sha256: [$(tenant_digest "$WARM_KEY")]
    limits: {tokens_per_minute: 1000000000}
rules:
  - name: chat
    models: [qwen3]
    engine: vllm
    policy: round_robin
    endpoints:
$EPS
YAML
}

# What one request costs (prompt + completion, engine-reported): one request through a gateway without limits.
tokens_per_request() {
  curl -s -m 10 "http://127.0.0.1:$(P_ENGINE 1)/v1/chat/completions" -H 'content-type: application/json' -d "$(python3 - <<PY
import json
print(json.dumps({"model": "qwen3", "max_tokens": $MAX_TOKENS, "messages": [
  {"role": "system", "content": " ".join(["word"] * $SYSTEM_TOKENS)}, {"role": "user", "content": "question " * 30}]}))
PY
)" | python3 -c 'import json,sys; u=json.load(sys.stdin)["usage"]; print(u["prompt_tokens"]+u["completion_tokens"])'
}
PER_REQ="$(tokens_per_request)"
if [ -z "$RATE" ]; then
  RATE="$(python3 -c "print(round(3 * $LIMIT / $DURATION / $PER_REQ, 2))")"
fi
log "about $PER_REQ tokens per request; offering $RATE req/s for $DURATION s against tokens_per_minute $LIMIT (runs: $RUNS)"

LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
echo -n >"$WORK/runs.txt"
for run in $RUNS; do
  n="$REPLICAS"; store=no; port=$P_MANY
  case "$run" in redis) store=yes ;; one) n=1; port=$P_ONE ;; esac
  name="$run"
  [ "$store" = no ] || redis-cli -p "$P_REDIS" flushall >/dev/null
  for r in $(seq 1 "$n"); do
    gateway_yaml "$r" "$n" "$store" >"$WORK/gw$r.yaml"
    start "gw$r" kv serve --config "$WORK/gw$r.yaml"
  done
  for r in $(seq 1 "$n"); do wait_http "gw$r" "$(P_GW "$r")" /ready/engines; done
  # The same load as another limited tenant first: the gateways' JIT, the store's connection and its scripts warm
  # (cold, a reservation can miss timeout_ms and on_failure decides), the measured tenant's windows untouched.
  BENCH_TIMEOUT=$((WARMUP + 90)) bench "warm-$name" --target "warm-$name=http://127.0.0.1:$port" --model qwen3 --stream \
    --max-tokens "$MAX_TOKENS" --seed 8 --timeout 30 --drain 30 --duration "$WARMUP" --warmup 0 --rate "$RATE" \
    --api-key "$WARM_KEY" --workload shared-prefix --groups 4 --system-tokens "$SYSTEM_TOKENS" --question-tokens 30
  for r in $(seq 1 "$n"); do scrape "$(P_GW "$r")" "$WORK/$name.gw$r.before.metrics" "$KEY"; done
  BENCH_TIMEOUT=$((DURATION + 90)) bench "$name" --target "$name=http://127.0.0.1:$port" --model qwen3 --stream \
    --max-tokens "$MAX_TOKENS" --seed 7 --timeout 30 --drain 30 --duration "$DURATION" --warmup 0 --rate "$RATE" \
    --api-key "$KEY" --workload shared-prefix --groups 4 --system-tokens "$SYSTEM_TOKENS" --question-tokens 30
  for r in $(seq 1 "$n"); do
    scrape "$(P_GW "$r")" "$WORK/$name.gw$r.metrics" "$KEY"
    stop "gw$r"
  done
  # What Redis holds for the tenant, settled to the usage: the day ring (its far-off tokens_per_day keeps every token
  # of the run, where the minute ring may have let the first seconds go by now). Redis's own count of what it admitted.
  held=-
  [ "$store" = no ] || held="$(redis-cli -p "$P_REDIS" hget 'kvgate:rl:{acme}:tokens_per_day' s)"
  echo "$name $n $store ${held:--}" >>"$WORK/runs.txt"
done
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK" "$OUT" "$LIMIT" "$DURATION" "$RATE" "$PER_REQ" "$REPLICAS" "$(machine)" "$LOAD_START" "$LOAD_END" <<'PY'
import json, re, sys, datetime
work, out, limit, duration, rate, per_req, replicas, machine, load_start, load_end = sys.argv[1:]
limit, duration, replicas = int(limit), int(duration), int(replicas)
allowed = limit  # a run of at most a minute from empty windows: the sliding minute admits the limit, once

def labels(text):
    return dict(re.findall(r'(\w+)="([^"]*)"', text))

rows = []
for line in open(f"{work}/runs.txt"):
    name, n, store, held = line.split()
    n = int(n)
    tokens = {"prompt": 0.0, "completion": 0.0}
    status, failures, per_replica = {}, {}, []
    for r in range(1, n + 1):
        mine = 0.0
        for m in open(f"{work}/{name}.gw{r}.metrics"):
            g = re.match(r'(kvgate_\w+)\{([^}]*)\} (\S+)', m)
            if not g:
                continue
            family, lab, v = g.group(1), labels(g.group(2)), float(g.group(3))
            if family == "kvgate_tenant_tokens_total" and lab.get("tenant") == "acme":
                tokens[lab["kind"]] += v
                mine += v
            elif family == "kvgate_tenant_requests_total" and lab.get("tenant") == "acme":
                status[lab["status"]] = status.get(lab["status"], 0) + v
            elif family == "kvgate_rate_limit_store_failures_total" and v > 0:
                k = f'{lab.get("decision")}/{lab.get("cause")}'
                failures[k] = failures.get(k, 0) + v
        for m in open(f"{work}/{name}.gw{r}.before.metrics"):  # the warm-up's store failures are not the run's
            g = re.match(r'kvgate_rate_limit_store_failures_total\{([^}]*)\} (\S+)', m)
            if g and float(g.group(2)) > 0:
                lab = labels(g.group(1))
                k = f'{lab.get("decision")}/{lab.get("cause")}'
                failures[k] = failures.get(k, 0) - float(g.group(2))
        per_replica.append(int(mine))
    failures = {k: v for k, v in failures.items() if v}
    rep = json.load(open(f"{work}/{name}.json"))
    rows.append((name, n, store == "yes", tokens["prompt"] + tokens["completion"], status, failures, per_replica, rep, held))

what = {"redis": "{n} gateways, one shared Redis (`rate_limit_store`)", "shares": "{n} gateways, no store (`replicas: {n}`)",
        "one": "1 gateway (`replicas: 1`)"}
with open(out, "w") as f:
    f.write(f"# A tenant's tokens_per_minute through {replicas} replicas, with and without a shared store, "
            f"{datetime.date.today().isoformat()}\n\n")
    f.write("Issue #40 \"Numbers\": one tenant offered 3x its `tokens_per_minute` through gateways behind HAProxy `mode tcp` "
            "(round robin). Written by `perf/tenant-shares.sh`.\n\n")
    f.write("| | |\n|---|---|\n")
    f.write(f"| machine | {machine} |\n")
    f.write(f"| load average (1/5/15 min) | start {load_start}, end {load_end} |\n")
    f.write(f"| tenant | `tokens_per_minute: {limit}`; about {per_req} tokens per request (engine-reported); "
            f"offered {rate} req/s (3x the limit over the run), open loop, for {duration} s |\n")
    f.write(f"| allowed | {allowed} tokens: a run of at most a minute, windows empty at its start, admits the limit once |\n\n")
    f.write("| run | each gateway enforces | answers by status (gateways) | client errors by class | store failures "
            "(decision/cause) | admitted tokens (per replica) | admitted / allowed | issue's bar (0.95-1.01) | held in Redis (/ allowed) |\n")
    f.write("|---|---:|---|---|---|---:|---:|---|---:|\n")
    for name, n, store, admitted, status, failures, per_replica, rep, held in rows:
        each = f"{limit} (shared)" if store else str(limit // n if n > 1 else limit)
        st = ", ".join(f"{k}: {int(v)}" for k, v in sorted(status.items()))
        errs = ", ".join(f"{k}: {v}" for k, v in rep.get("errors_by_class", {}).items() if v) or "none"
        fails = ", ".join(f"{k}: {int(v)}" for k, v in sorted(failures.items())) or ("0" if store else "-")
        ratio = admitted / allowed
        bar = ("**met**" if 0.95 <= ratio <= 1.01 else "**not met**") if store else "-"
        f.write(f"| {what[name].format(n=n)} | {each} | {st} | {errs} | {fails} | {int(admitted)} "
                f"({' + '.join(map(str, per_replica))}) | {ratio:.3f} | {bar} | "
                + (f"{held} ({int(held) / allowed:.3f})" if held != "-" else "-") + " |\n")
    f.write("\nAdmitted tokens are what the engines reported as usage for the tenant's answered requests, counted by the "
            "gateways (`kvgate_tenant_tokens_total`, prompt + completion, summed over the replicas). A request is admitted "
            "against its reservation (an estimate from the body, one token per 4 bytes, plus `max_tokens`: no tokenizer "
            "on the rule) and settled to the usage at its end. The 429s are the tenant's limit (`http_4xx` at the "
            "client). Store failures other than 0 in the Redis run mean some requests were decided by `on_failure: "
            "local` (the replica's share), not by Redis: their tokens are in the admitted column but not in Redis's. Held in "
            "Redis is its own count of the tokens it admitted, settled to the usage (the tenant's `tokens_per_day` ring: "
            "that limit is set far above the run so it only counts).\n")
print(open(out).read())
PY
