#!/usr/bin/env bash
# Per-replica limit shares without a shared store (issue #40 "Numbers", the no-Redis line): one tenant with
# tokens_per_minute LIMIT offered about 3x that for DURATION seconds, through REPLICAS gateways with `replicas:
# REPLICAS` (each enforces floor(LIMIT / REPLICAS)) behind HAProxy `mode tcp` (round robin), and through one gateway
# with `replicas: 1` behind the same HAProxy as the reference. Admitted tokens are the engine-reported usage the
# gateways counted (kvgate_tenant_tokens_total, summed over the replicas); the limit allows LIMIT per minute.
#
#   engines:  ENGINES x `./kvgate sim --dialect vllm` (Qwen3 tokenizer: the usage is real token counts)
#   gateways: identical YAML but for the port; restarted for every run (fresh windows)
#   load:     `./kvgate bench`, open loop (Poisson), shared-prefix prompts of ~SYSTEM_TOKENS words, max_tokens
#             MAX_TOKENS, streaming, at RATE req/s (default: 3x what LIMIT allows at the measured tokens per request)
# Loopback only; bounded: each bench by its own timeout (DURATION + 90 s), two runs.
# Writes perf/results/tenant-shares-<date>.md.
#
#   perf/tenant-shares.sh                       # defaults below; env vars override
#   DURATION=20 LIMIT=20000 perf/tenant-shares.sh   # a quick end-to-end check
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NAME=tenant-shares
. "$ROOT/perf/fleet-common.sh"
OUT="${OUT:-$ROOT/perf/results/tenant-shares-$DATE.md}"
ENGINES="${ENGINES:-2}"
REPLICAS="${REPLICAS:-3}"
DURATION="${DURATION:-60}"
LIMIT="${LIMIT:-60000}"
SYSTEM_TOKENS="${SYSTEM_TOKENS:-200}"
MAX_TOKENS="${MAX_TOKENS:-20}"
RATE="${RATE:-}"
MODEL_DIR="$ROOT/deploy/models/qwen3"
KEY="tenant-shares-key-0123456789"
DIGEST="$(printf %s "$KEY" | sha256sum | cut -d' ' -f1)"
[ "$REPLICAS" -ge 2 ] && [ "$REPLICAS" -le 9 ] || { echo "REPLICAS=$REPLICAS must be in [2, 9]" >&2; exit 1; }
command -v haproxy >/dev/null || { echo "needs haproxy (apt-get install haproxy)" >&2; exit 1; }

P_ENGINE() { echo $((PORT_BASE + $1)); }
P_GW() { echo $((PORT_BASE + 40 + $1)); }
P_ADMIN() { echo $((PORT_BASE + 50 + $1)); }
P_MANY=$((PORT_BASE + 61)); P_ONE=$((PORT_BASE + 62))

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
for i in $(seq 1 "$ENGINES"); do wait_http "sim$i" "$(P_ENGINE "$i")"; done

gateway_yaml() { # gateway_yaml REPLICA REPLICAS
  cat <<YAML
listen: 127.0.0.1:$(P_GW "$1")
admin_listen: 127.0.0.1:$(P_ADMIN "$1")
control_socket: "off"
health: {interval_ms: 1000}
replicas: $2
tenants:
  - name: acme
    api_key_sha256: [$DIGEST]
    limits: {tokens_per_minute: $LIMIT}
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
  RATE="$(python3 -c "print(round(3 * $LIMIT / 60 / $PER_REQ, 2))")"
fi
log "about $PER_REQ tokens per request; offering $RATE req/s for $DURATION s against tokens_per_minute $LIMIT"

LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
echo -n >"$WORK/runs.txt"
for n in "$REPLICAS" 1; do
  name="replicas-$n"
  for r in $(seq 1 "$n"); do
    gateway_yaml "$r" "$n" >"$WORK/gw$r.yaml"
    start "gw$r" kv serve --config "$WORK/gw$r.yaml"
  done
  for r in $(seq 1 "$n"); do wait_http "gw$r" "$(P_GW "$r")" /ready/engines; done
  port=$P_ONE; [ "$n" -gt 1 ] && port=$P_MANY
  BENCH_TIMEOUT=$((DURATION + 90)) bench "$name" --target "$name=http://127.0.0.1:$port" --model qwen3 --stream \
    --max-tokens "$MAX_TOKENS" --seed 7 --timeout 30 --drain 30 --duration "$DURATION" --warmup 0 --rate "$RATE" \
    --api-key "$KEY" --workload shared-prefix --groups 4 --system-tokens "$SYSTEM_TOKENS" --question-tokens 30
  for r in $(seq 1 "$n"); do
    curl -s -m 30 -H "Authorization: Bearer $KEY" "http://127.0.0.1:$(P_GW "$r")/metrics" >"$WORK/$name.gw$r.metrics" \
      || { echo "gw$r: /metrics did not answer within 30 s" >&2; exit 1; }
    stop "gw$r"
  done
  echo "$name $n" >>"$WORK/runs.txt"
done
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK" "$OUT" "$LIMIT" "$DURATION" "$RATE" "$PER_REQ" "$REPLICAS" "$(machine)" "$LOAD_START" "$LOAD_END" <<'PY'
import json, re, sys, datetime
work, out, limit, duration, rate, per_req, replicas, machine, load_start, load_end = sys.argv[1:]
limit, duration, replicas = int(limit), int(duration), int(replicas)
allowed = limit * duration / 60  # what a sliding minute admits over the run (the window starts empty)
rows = []
for line in open(f"{work}/runs.txt"):
    name, n = line.split()
    n = int(n)
    tokens = {"prompt": 0, "completion": 0}
    status = {}
    per_replica = []
    for r in range(1, n + 1):
        mine = 0
        for m in open(f"{work}/{name}.gw{r}.metrics"):
            t = re.match(r'kvgate_tenant_tokens_total\{kind="(\w+)",tenant="acme"\} (\S+)', m) or \
                re.match(r'kvgate_tenant_tokens_total\{tenant="acme",kind="(\w+)"\} (\S+)', m)
            if t:
                tokens[t.group(1)] += float(t.group(2))
                mine += float(t.group(2))
            s = re.match(r'kvgate_tenant_requests_total\{status="(\d+)",tenant="acme"\} (\S+)', m) or \
                re.match(r'kvgate_tenant_requests_total\{tenant="acme",status="(\d+)"\} (\S+)', m)
            if s:
                status[s.group(1)] = status.get(s.group(1), 0) + float(s.group(2))
        per_replica.append(int(mine))
    rep = json.load(open(f"{work}/{name}.json"))
    admitted = tokens["prompt"] + tokens["completion"]
    rows.append((n, admitted, status, per_replica, rep))
with open(out, "w") as f:
    f.write(f"# Tenant limits through {replicas} replicas without a shared store (per-replica shares), "
            f"{datetime.date.today().isoformat()}\n\n")
    f.write("Issue #40 \"Numbers\", the line without Redis: one tenant offered about 3x its `tokens_per_minute` for "
            f"{duration} s; each replica enforces `floor(limit / replicas)` of it. Written by `perf/tenant-shares.sh`.\n\n")
    f.write("| | |\n|---|---|\n")
    f.write(f"| machine | {machine} |\n")
    f.write(f"| load average (1/5/15 min) | start {load_start}, end {load_end} (shared with seven other helpers' builds) |\n")
    f.write(f"| tenant | `tokens_per_minute: {limit}`; about {per_req} tokens per request (engine-reported); "
            f"offered {rate} req/s, open loop, for {duration} s |\n")
    f.write(f"| allowed | {allowed:.0f} tokens (the limit's per-minute allowance over {duration} s, windows empty at the start) |\n\n")
    f.write("| gateways | balancer | each enforces | answers by status (gateways) | client errors by class | admitted tokens (per replica) | admitted / allowed |\n")
    f.write("|---|---|---:|---|---|---:|---:|\n")
    for n, admitted, status, per_replica, rep in rows:
        share = limit // n if n > 1 else limit
        st = ", ".join(f"{k}: {int(v)}" for k, v in sorted(status.items()))
        errs = ", ".join(f"{k}: {v}" for k, v in rep.get("errors_by_class", {}).items() if v) or "none"
        f.write(f"| {n} (`replicas: {n}`) | HAProxy `mode tcp` roundrobin | {share} | {st} | {errs} | {int(admitted)} "
                f"({' + '.join(map(str, per_replica))}) | {admitted / allowed:.3f} |\n")
    f.write("\nAdmitted tokens are what the engines reported as usage for the tenant's answered requests, counted by the "
            "gateways (`kvgate_tenant_tokens_total`, prompt + completion, summed over the replicas). A request is admitted "
            "against its reservation (an estimate from the body: no tokenizer on the rule) and settled to the usage at "
            "its end.\n")
print(open(out).read())
PY
