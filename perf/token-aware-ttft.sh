#!/usr/bin/env bash
# Token-aware cost (#14 "Numbers", second item): mixed prompt lengths, 50 to 50,000 tokens, on ENGINES simulated vLLM
# engines; TTFT p99 when the load estimate counts in-flight uncached prefill tokens (kv.prefill_token_weight > 0,
# default 0.001: one request per 1,000 tokens still in prefill) vs request-count load (kv.prefill_token_weight: 0), in
# the same run: two gateways over the same engines, loaded one after the other with the same seeded schedule.
#
#   engines:  ENGINES x `./kvgate sim --dialect vllm --max-concurrency CONC` (few slots: a request waits behind the
#             long prefills running on its engine, as on a real engine whose batch is busy prefilling), TTFT 5 ms +
#             PREFILL_US us per uncached prompt token (50,000 tokens: 1 s at 20 us), ITL 5 ms, KV events on 127.0.0.1,
#             context length 65536
#   gateways: "tokens" and "requests", `./kvgate serve`, rule kv_exact (token-id prompts are hashed exactly: the
#             gateway knows each request's uncached tokens per engine), load.enabled: true (engine-reported load
#             plus the gateway's own requests since the last scrape); they differ in kv.prefill_token_weight only
#   load:     `./kvgate bench --route completions --token-ids --workload random --random-distribution log-uniform
#             --random-min-tokens 50 --random-max-tokens 50000` (as many prompts per decade of length: mostly short,
#             a long tail; no prompt repeats, so routing is by load alone), streaming, max_tokens 8, open loop
#             (Poisson) at RATE, compare mode: "tokens" first, then "requests", same schedule and prompts
# Loopback only; bounded (~2 x (WARMUP + DURATION) + start-up). Writes perf/results/token-aware-ttft-<date>.md.
#
#   perf/token-aware-ttft.sh                                   # defaults below; env vars override
#   DURATION=5 WARMUP=2 ENGINES=2 RATE=4 perf/token-aware-ttft.sh    # a quick end-to-end check
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NAME=token-aware-ttft
. "$ROOT/perf/fleet-common.sh"
OUT="${OUT:-$ROOT/perf/results/token-aware-ttft-$DATE.md}"
ENGINES="${ENGINES:-8}"
DURATION="${DURATION:-60}"
WARMUP="${WARMUP:-10}"
RATE="${RATE:-30}"
CONC="${CONC:-2}"
PREFILL_US="${PREFILL_US:-20}"
TOKEN_WEIGHT="${TOKEN_WEIGHT:-0.001}"
MIN_TOKENS="${MIN_TOKENS:-50}"
MAX_TOKENS="${MAX_TOKENS:-50000}"
[ "$ENGINES" -ge 2 ] && [ "$ENGINES" -le 19 ] || { echo "ENGINES=$ENGINES must be in [2, 19]" >&2; exit 1; }

P_ENGINE() { echo $((PORT_BASE + $1)); }
P_KV() { echo $((PORT_BASE + 20 + $1)); }
P_TOK=$((PORT_BASE + 41)); P_TOK_ADMIN=$((PORT_BASE + 42))
P_REQ=$((PORT_BASE + 43)); P_REQ_ADMIN=$((PORT_BASE + 44))

ENGINE_URLS=()
EPS=""
for i in $(seq 1 "$ENGINES"); do
  start "sim$i" kv sim --dialect vllm --port "$(P_ENGINE "$i")" --model m --seed "$i" --context-len 65536 \
    --kv-events "tcp://127.0.0.1:$(P_KV "$i")" --kv-events-mode bind --block-size 16 --cache-blocks 65536 --hash-seed 0 \
    --ttft-ms 5 --itl-ms 5 --prefill-us-per-token "$PREFILL_US" --max-concurrency "$CONC" --queue 4096
  ENGINE_URLS+=("http://127.0.0.1:$(P_ENGINE "$i")")
  EPS="$EPS      - url: http://127.0.0.1:$(P_ENGINE "$i")
        kv_events: tcp://127.0.0.1:$(P_KV "$i")
"
done
ENGINE_LIST="$(IFS=,; echo "${ENGINE_URLS[*]}")"

gateway_yaml() { # gateway_yaml PORT ADMIN_PORT PREFILL_TOKEN_WEIGHT
  cat <<YAML
listen: 127.0.0.1:$1
admin_listen: 127.0.0.1:$2
control_socket: "off"
health: {interval_ms: 1000}
load: {enabled: true, scrape_interval_ms: 250}
rules:
  - name: mixed
    models: [m]
    engine: vllm
    policy: kv_exact
    block_size: 16
    hash_seed: "0"
    kv: {prefill_token_weight: $3}
    endpoints:
$EPS
YAML
}
gateway_yaml "$P_TOK" "$P_TOK_ADMIN" "$TOKEN_WEIGHT" >"$WORK/tokens.yaml"
gateway_yaml "$P_REQ" "$P_REQ_ADMIN" 0 >"$WORK/requests.yaml"
start gw-tokens kv serve --config "$WORK/tokens.yaml"
start gw-requests kv serve --config "$WORK/requests.yaml"
for i in $(seq 1 "$ENGINES"); do wait_http "sim$i" "$(P_ENGINE "$i")"; done
wait_http gw-tokens "$P_TOK" /ready/engines; wait_http gw-requests "$P_REQ" /ready/engines

LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
BENCH_TIMEOUT=$((2 * (WARMUP + DURATION) + 600)) bench mixed \
  --target "tokens=http://127.0.0.1:$P_TOK" --compare "requests=http://127.0.0.1:$P_REQ" --model m \
  --route completions --token-ids --workload random --random-distribution log-uniform \
  --random-min-tokens "$MIN_TOKENS" --random-max-tokens "$MAX_TOKENS" --stream --max-tokens 8 --rate "$RATE" \
  --duration "$DURATION" --warmup "$WARMUP" --seed 11 --timeout 120 --drain 60 --engine-metrics "$ENGINE_LIST"
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK" "$OUT" "$DATE" "$(machine)" "$LOAD_START" "$LOAD_END" "$ENGINES" "$DURATION" "$WARMUP" "$RATE" "$CONC" \
  "$PREFILL_US" "$TOKEN_WEIGHT" "$MIN_TOKENS" "$MAX_TOKENS" <<'PY'
import json, os, sys
(work, out, date, machine, load_start, load_end, engines, duration, warmup, rate, conc, prefill_us, weight, lo,
 hi) = sys.argv[1:16]
rep = json.load(open(os.path.join(work, "mixed.json")))
t = {x["label"]: x for x in rep["targets"]}
L = [f"# Token-aware load vs request-count load, mixed prompt lengths — {date}\n",
     f"Machine: {machine}. Load average (1/5/15 min) at start {load_start}, at end {load_end}: compare the two rows of "
     "this run, not numbers across runs.\n",
     f"Command: `perf/token-aware-ttft.sh` (ENGINES={engines} DURATION={duration} WARMUP={warmup} RATE={rate} CONC={conc} "
     f"PREFILL_US={prefill_us} TOKEN_WEIGHT={weight}). Engines: `./kvgate sim --dialect vllm --max-concurrency {conc}`, "
     f"TTFT 5 ms + {prefill_us} us per uncached prompt token, ITL 5 ms, KV events. Gateways: `kv_exact`, "
     "`load.enabled: true`; **tokens**: `kv.prefill_token_weight: " + weight + "`, **requests**: "
     "`kv.prefill_token_weight: 0`. Load: `./kvgate bench --route completions --token-ids --workload random "
     f"--random-distribution log-uniform --random-min-tokens {lo} --random-max-tokens {hi}`, streaming, max_tokens 8, "
     f"Poisson at {rate} req/s, compare mode (tokens first, the same schedule and prompts for both).\n",
     "| load estimate | requests | errors | TTFT p50 ms | TTFT p90 ms | TTFT p99 ms | TTFT max ms | latency p99 ms | busiest / mean |",
     "|---|---|---|---|---|---|---|---|---|"]
for label in ("tokens", "requests"):
    x = t[label]
    f = x["ttft_ms"] or {}
    e = x.get("engines") or {}
    skew = e.get("busiest_share_vs_mean")
    warn = " (schedule shortfall)" if x["schedule"]["shortfall"] else ""
    L.append(f"| {label} | {x['requests']}{warn} | {x['errors']} | {f.get('p50', float('nan')):.1f} | "
             f"{f.get('p90', float('nan')):.1f} | {f.get('p99', float('nan')):.1f} | {f.get('max', float('nan')):.1f} | "
             f"{(x['latency_ms'] or {}).get('p99', float('nan')):.1f} | {'-' if skew is None else f'{skew:.2f}'} |")
a, b = t["tokens"]["ttft_ms"], t["requests"]["ttft_ms"]
if a and b:
    L.append("")
    L.append(f"- **TTFT p99, token-aware / request-count: {a['p99'] / b['p99']:.2f}x** "
             f"(p50 {a['p50'] / b['p50']:.2f}x, p90 {a['p90'] / b['p90']:.2f}x).")
with open(out, "w") as fh:
    fh.write("\n".join(L) + "\n")
print("\n".join(L))
PY
log "wrote $OUT"
