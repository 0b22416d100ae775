#!/usr/bin/env bash
# Conditional P/D (#14 "Numbers", last item): TTFT p50 for short prompts and for fully cached prompts when the
# decode engine may serve them alone (pd.min_uncached_tokens 256, decode KV events: the gateway sees what it holds)
# vs always splitting into a prefill and a decode leg (pd.min_uncached_tokens 0, no decode events), same run: two
# gateways over the same prefill + decode engines, loaded one after the other with the same seeded schedule.
# (perf/pd-latency.sh measures the P/D path against a plain proxied request; this script measures when to skip it.)
#
#   engines:  `./kvgate sim --dialect vllm` --role prefill and --role decode (the same --pd-secret), TTFT 5 ms +
#             PREFILL_US us per uncached prompt token, ITL 2 ms, 16-token blocks; the decode engine publishes KV
#             events (127.0.0.1) and caches what it computed or received
#   gateways: "conditional": policy pd, pd.min_uncached_tokens: 256, decode endpoint with kv_events;
#             "split": policy pd, pd.min_uncached_tokens: 0, decode endpoint without kv_events (every request splits)
#   load:     `./kvgate bench --route completions --token-ids`, streaming, max_tokens 4, constant arrivals at RATE,
#             compare mode (conditional first, then split):
#               short:  --workload random, 16..200 tokens (below min_uncached_tokens: served by the decode alone)
#               cached: --workload fixed, one ~2,000-token prompt sent again and again (after the first, the decode
#                       engine holds every block: served alone; split pays the prefill leg's round trip)
# Loopback only; bounded (~4 x (WARMUP + DURATION) + start-up). Writes perf/results/pd-conditional-<date>.md.
#
#   perf/pd-conditional.sh                                  # defaults below; env vars override
#   DURATION=3 WARMUP=1 perf/pd-conditional.sh              # a quick end-to-end check
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NAME=pd-conditional
. "$ROOT/perf/fleet-common.sh"
OUT="${OUT:-$ROOT/perf/results/pd-conditional-$DATE.md}"
DURATION="${DURATION:-20}"
WARMUP="${WARMUP:-5}"
RATE="${RATE:-20}"
PREFILL_US="${PREFILL_US:-50}"
SECRET="${SECRET:-pd-conditional-secret}"

P_PREFILL=$((PORT_BASE + 1)); P_DECODE=$((PORT_BASE + 2)); P_DECODE_KV=$((PORT_BASE + 3))
P_COND=$((PORT_BASE + 11)); P_COND_ADMIN=$((PORT_BASE + 12))
P_SPLIT=$((PORT_BASE + 13)); P_SPLIT_ADMIN=$((PORT_BASE + 14))
ENGINE_FLAGS=(--dialect vllm --model m --pd-secret "$SECRET" --ttft-ms 5 --itl-ms 2 --prefill-us-per-token "$PREFILL_US"
              --block-size 16 --hash-seed 0 --max-concurrency 16)
start prefill kv sim --role prefill --port "$P_PREFILL" "${ENGINE_FLAGS[@]}"
start decode kv sim --role decode --port "$P_DECODE" --kv-events "tcp://127.0.0.1:$P_DECODE_KV" --kv-events-mode bind \
  "${ENGINE_FLAGS[@]}"

gateway_yaml() { # gateway_yaml PORT ADMIN_PORT MIN_UNCACHED DECODE_EVENTS_LINE
  cat <<YAML
listen: 127.0.0.1:$1
admin_listen: 127.0.0.1:$2
control_socket: "off"
health: {interval_ms: 1000}
rules:
  - name: pd
    models: [m]
    engine: vllm
    policy: pd
    block_size: 16
    hash_seed: "0"
    pd: {prefill_policy: least_outstanding, min_uncached_tokens: $3}
    endpoints:
      - url: http://127.0.0.1:$P_PREFILL
        role: prefill
      - url: http://127.0.0.1:$P_DECODE
        role: decode
$4
YAML
}
gateway_yaml "$P_COND" "$P_COND_ADMIN" 256 "        kv_events: tcp://127.0.0.1:$P_DECODE_KV" >"$WORK/conditional.yaml"
gateway_yaml "$P_SPLIT" "$P_SPLIT_ADMIN" 0 "" >"$WORK/split.yaml"
start gw-conditional kv serve --config "$WORK/conditional.yaml"
start gw-split kv serve --config "$WORK/split.yaml"
wait_http prefill "$P_PREFILL"; wait_http decode "$P_DECODE"
wait_http gw-conditional "$P_COND" /ready/engines; wait_http gw-split "$P_SPLIT" /ready/engines

# One request through each gateway first: fail loudly rather than measure error responses.
for p in "$P_COND" "$P_SPLIT"; do
  code=$(curl -s -o "$WORK/smoke.txt" -m 30 -w '%{http_code}' -H 'Content-Type: application/json' \
    -d '{"model":"m","prompt":[11,12,13,14,15,16,17,18],"max_tokens":2}' "http://127.0.0.1:$p/v1/completions" || true)
  [ "$code" = 200 ] || { echo "smoke request through port $p answered $code: $(cat "$WORK/smoke.txt")" >&2; exit 1; }
done

metrics() { curl -s -m 5 "http://127.0.0.1:$P_COND/metrics" | grep '^kvgate_pd_decisions_total' || true; }
metrics >"$WORK/decisions-before.txt"
LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
COMMON=(--target "conditional=http://127.0.0.1:$P_COND" --compare "split=http://127.0.0.1:$P_SPLIT" --model m
        --route completions --token-ids --stream --max-tokens 4 --arrival constant --rate "$RATE" --duration "$DURATION"
        --warmup "$WARMUP" --timeout 30 --drain 10)
BENCH_TIMEOUT=$((2 * (WARMUP + DURATION) + 300)) bench short "${COMMON[@]}" --workload random --random-min-tokens 16 \
  --random-max-tokens 200 --seed 3
metrics >"$WORK/decisions-short.txt"
BENCH_TIMEOUT=$((2 * (WARMUP + DURATION) + 300)) bench cached "${COMMON[@]}" --workload fixed --payload-bytes 12000 --seed 4
metrics >"$WORK/decisions-cached.txt"
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK" "$OUT" "$DATE" "$(machine)" "$LOAD_START" "$LOAD_END" "$DURATION" "$WARMUP" "$RATE" "$PREFILL_US" <<'PY'
import json, os, re, sys
work, out, date, machine, load_start, load_end, duration, warmup, rate, prefill_us = sys.argv[1:11]
def targets(name):
    return {x["label"]: x for x in json.load(open(os.path.join(work, name + ".json")))["targets"]}
def decisions(name):
    d = {}
    for line in open(os.path.join(work, name)):
        m = re.match(r'kvgate_pd_decisions_total\{[^}]*path="(\w+)"[^}]*\} (\S+)', line)
        if m:
            d[m.group(1)] = d.get(m.group(1), 0) + float(m.group(2))
    return d
before, short, cached = decisions("decisions-before.txt"), decisions("decisions-short.txt"), decisions("decisions-cached.txt")
def delta(a, b, k):
    return a.get(k, 0) - b.get(k, 0)
L = [f"# Conditional P/D vs always splitting — {date}\n",
     f"Machine: {machine}. Load average (1/5/15 min) at start {load_start}, at end {load_end}: compare rows of this run.\n",
     f"Command: `perf/pd-conditional.sh` (DURATION={duration} WARMUP={warmup} RATE={rate} PREFILL_US={prefill_us}). "
     "Engines: `./kvgate sim --dialect vllm --role prefill|decode` (same --pd-secret), TTFT 5 ms + "
     f"{prefill_us} us per uncached prompt token, ITL 2 ms; the decode engine publishes KV events. Gateways: policy pd; "
     "**conditional**: `pd.min_uncached_tokens: 256` and the decode endpoint's `kv_events`; **split**: "
     "`pd.min_uncached_tokens: 0`, no decode events (every request takes both legs). Load: `./kvgate bench --route "
     f"completions --token-ids`, streaming, max_tokens 4, constant {rate} req/s, compare mode (conditional first). "
     "**short**: 16..200-token prompts; **cached**: one ~2,000-token prompt repeated (fully held by the decode engine "
     "after the first).\n",
     "| prompts | gateway | requests | errors | TTFT p50 ms | TTFT p99 ms | latency p50 ms |", "|---|---|---|---|---|---|---|"]
ratios = []
for name, label in (("short", "short (16..200 tokens)"), ("cached", "fully cached (~2,000 tokens)")):
    t = targets(name)
    for g in ("conditional", "split"):
        x = t[g]
        f = x["ttft_ms"] or {}
        L.append(f"| {label} | {g} | {x['requests']} | {x['errors']} | {f.get('p50', float('nan')):.2f} | "
                 f"{f.get('p99', float('nan')):.2f} | {(x['latency_ms'] or {}).get('p50', float('nan')):.2f} |")
    c, s = t["conditional"]["ttft_ms"], t["split"]["ttft_ms"]
    if c and s:
        ratios.append(f"- **{label}: TTFT p50 conditional / split = {c['p50'] / s['p50']:.2f}x** "
                      f"({c['p50']:.2f} ms vs {s['p50']:.2f} ms)")
L.append("")
L += ratios
L.append(f"- Conditional gateway's decisions (`kvgate_pd_decisions_total`, warm-up included): short run "
         f"local {delta(short, before, 'local'):.0f} / split {delta(short, before, 'split'):.0f}; cached run local "
         f"{delta(cached, short, 'local'):.0f} / split {delta(cached, short, 'split'):.0f}.")
with open(out, "w") as fh:
    fh.write("\n".join(L) + "\n")
print("\n".join(L))
PY
log "wrote $OUT"
