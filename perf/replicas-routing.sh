#!/usr/bin/env bash
# Many gateways, one routing (#14 "Numbers", first item): ENGINES simulated vLLM engines, REPLICAS gateway replicas
# with the same configuration behind HAProxy in TCP mode (round robin across replicas) vs 1 gateway behind the same
# HAProxy, the same shared-prefix and multi-turn workloads. Goals: the engines' cache hit ratio within 3 points of
# the single gateway, and the busiest engine's share of the requests <= 1.15x the mean share; each with the
# gateways' local-only load (load.enabled: false, today's signal) and with engine-reported load (load.enabled: true,
# the engines' /metrics scraped every load.scrape_interval_ms).
#
#   engines:  ENGINES x `./kvgate sim --dialect vllm` (Qwen3 tokenizer + chat template, 16-token blocks, CACHE_BLOCKS
#             blocks each, KV events over ZeroMQ on 127.0.0.1, --max-concurrency CONC, TTFT 10 ms + 120 us per
#             uncached prompt token, ITL 4 ms)
#   gateways: REPLICAS x `./kvgate serve`, identical YAML (every replica subscribes to every engine's events), one
#             rule per run: kv_exact, session (session.mode hash: consistent hashing; table: each replica's own pin
#             table, the reference), load.enabled false|true; restarted for every run, engine caches reset first
#   balancer: HAProxy `mode tcp`, `balance roundrobin`: frontend "many" over the REPLICAS gateways, frontend "one" over
#             replica 1 alone (the single gateway pays the same hop). Installed with apt-get when missing.
#   load:     `./kvgate bench`, open loop (Poisson), streaming, max_tokens 12, --engine-metrics over every engine: the
#             engines' own counters give the hit ratio and each engine's share (the clients cannot see them)
#   runs:     shared-prefix under kv_exact; multi-turn under kv_exact and under session hash (--conversation-user:
#             the conversation id is the session key); each x load off|on x 1|REPLICAS gateways; plus multi-turn under
#             session table with REPLICAS gateways (how replicas pinned before session.mode hash)
# Loopback only; bounded: each bench by its own timeout, ~(WARMUP + DURATION + 15) s per run, 13 runs by default.
# Writes perf/results/replicas-routing-<date>.md (machine, load average, commands, table, goals).
#
#   perf/replicas-routing.sh                                   # defaults below; env vars override
#   DURATION=5 WARMUP=2 ENGINES=4 RATE_SP=20 RATE_MT=20 perf/replicas-routing.sh   # a quick end-to-end check
#   LOADS=off perf/replicas-routing.sh                         # local-only load alone
#   ONLY=session-hash SESSION_OPTS="share_cap_factor: 0;share_cap_factor: 1.1" perf/replicas-routing.sh
#       # only the runs whose name matches ONLY (grep -E); each ';'-separated SESSION_OPTS variant adds its own
#       # session-hash runs (mode "hash~N": the Nth variant's extra session keys), side by side in one invocation
#   LOAD_OPTS="peer_decay: none;peer_decay: lifetime" LOADS=on ONLY=kv_exact perf/replicas-routing.sh
#       # each ';'-separated LOAD_OPTS variant adds its own engine-reported runs (load "on~N": the Nth variant's
#       # extra load.* keys), side by side in one invocation
#   WARM=1 ...: the first selected run once more before the measured ones, unrecorded (the engine JVMs' JIT warm-up:
#       the first run of an invocation otherwise runs on cold engines)
#   SAMPLE_MS=100 ...: every engine's running / waiting gauges sampled every SAMPLE_MS during each run (0: off),
#       summarised per run (queue, imbalance over time) in a second table; the CSVs stay in the work directory
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NAME=replicas-routing
. "$ROOT/perf/fleet-common.sh"
OUT="${OUT:-$ROOT/perf/results/replicas-routing-$DATE.md}"
ENGINES="${ENGINES:-8}"
REPLICAS="${REPLICAS:-3}"
DURATION="${DURATION:-30}"
WARMUP="${WARMUP:-5}"
RATE_SP="${RATE_SP:-120}"
RATE_MT="${RATE_MT:-120}"
CONC="${CONC:-6}"
CACHE_BLOCKS="${CACHE_BLOCKS:-320}"
SCRAPE_MS="${SCRAPE_MS:-250}"
LOADS="${LOADS:-off on}"
ONLY="${ONLY:-}"
SESSION_OPTS="${SESSION_OPTS:-}"
LOAD_OPTS="${LOAD_OPTS:-}"
SAMPLE_MS="${SAMPLE_MS:-0}"
MODEL_DIR="$ROOT/deploy/models/qwen3"
[ "$REPLICAS" -ge 2 ] && [ "$REPLICAS" -le 9 ] || { echo "REPLICAS=$REPLICAS must be in [2, 9]" >&2; exit 1; }
[ "$ENGINES" -ge 2 ] && [ "$ENGINES" -le 19 ] || { echo "ENGINES=$ENGINES must be in [2, 19]" >&2; exit 1; }

if ! command -v haproxy >/dev/null; then
  log "installing haproxy (the L4 balancer in front of the replicas)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null
fi

P_ENGINE() { echo $((PORT_BASE + $1)); }            # 1..ENGINES
P_KV() { echo $((PORT_BASE + 20 + $1)); }           # ZeroMQ PUB of engine i
P_GW() { echo $((PORT_BASE + 40 + $1)); }           # replica r (1..REPLICAS)
P_ADMIN() { echo $((PORT_BASE + 50 + $1)); }
P_MANY=$((PORT_BASE + 61)); P_ONE=$((PORT_BASE + 62))

ENGINE_URLS=()
EPS=""
for i in $(seq 1 "$ENGINES"); do
  start "sim$i" kv sim --dialect vllm --port "$(P_ENGINE "$i")" --model qwen3 --model-dir "$MODEL_DIR" --seed "$i" \
    --kv-events "tcp://127.0.0.1:$(P_KV "$i")" --kv-events-mode bind --block-size 16 --cache-blocks "$CACHE_BLOCKS" \
    --hash-seed 0 --ttft-ms 10 --itl-ms 4 --prefill-us-per-token 120 --max-concurrency "$CONC" --queue 1024
  ENGINE_URLS+=("http://127.0.0.1:$(P_ENGINE "$i")")
  EPS="$EPS      - url: http://127.0.0.1:$(P_ENGINE "$i")
        kv_events: tcp://127.0.0.1:$(P_KV "$i")
"
done
ENGINE_LIST="$(IFS=,; echo "${ENGINE_URLS[*]}")"

{
  printf 'global\n  maxconn 8192\n\ndefaults\n  mode tcp\n  timeout connect 2s\n  timeout client 300s\n  timeout server 300s\n\n'
  printf 'frontend many\n  bind 127.0.0.1:%s\n  default_backend replicas\n\nbackend replicas\n  balance roundrobin\n' "$P_MANY"
  for r in $(seq 1 "$REPLICAS"); do printf '  server r%s 127.0.0.1:%s\n' "$r" "$(P_GW "$r")"; done
  printf '\nfrontend one\n  bind 127.0.0.1:%s\n  default_backend single\n\nbackend single\n  server r1 127.0.0.1:%s\n' "$P_ONE" "$(P_GW 1)"
} >"$WORK/haproxy.cfg"
start haproxy haproxy -db -f "$WORK/haproxy.cfg"
for i in $(seq 1 "$ENGINES"); do wait_http "sim$i" "$(P_ENGINE "$i")"; done

gateway_yaml() { # gateway_yaml REPLICA POLICY SESSION_MODE LOAD(on|off)
  local session="" enabled=false
  local mode="${3%%~*}" extra=""
  if [ "$mode" != "$3" ]; then IFS=';' read -r -a variants <<<"$SESSION_OPTS"; extra=", ${variants[${3#*~}]}"; fi
  [ "$2" = session ] && session="    session: {mode: $mode$extra}
"
  local lextra=""
  if [ "${4%%~*}" != "$4" ]; then IFS=';' read -r -a lvariants <<<"$LOAD_OPTS"; lextra=", ${lvariants[${4#*~}]}"; fi
  [ "${4%%~*}" = on ] && enabled=true
  cat <<YAML
listen: 127.0.0.1:$(P_GW "$1")
admin_listen: 127.0.0.1:$(P_ADMIN "$1")
control_socket: "off"
health: {interval_ms: 1000}
load: {enabled: $enabled, scrape_interval_ms: $SCRAPE_MS$lextra}
rules:
  - name: chat
    models: [qwen3]
    engine: vllm
    policy: $2
    tokenizer: $MODEL_DIR
    block_size: 16
    hash_seed: "0"
${session}    endpoints:
$EPS
YAML
}

LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
RUNS=()
HASH_RUNS=("multi-turn session hash")
if [ -n "$SESSION_OPTS" ]; then
  IFS=';' read -r -a variants <<<"$SESSION_OPTS"
  HASH_RUNS=()
  for v in "${!variants[@]}"; do HASH_RUNS+=("multi-turn session hash~$v"); done
fi
EXPANDED_LOADS=()
for load in $LOADS; do
  if [ "$load" = on ] && [ -n "$LOAD_OPTS" ]; then
    IFS=';' read -r -a lvariants <<<"$LOAD_OPTS"
    for v in "${!lvariants[@]}"; do EXPANDED_LOADS+=("on~$v"); done
  else
    EXPANDED_LOADS+=("$load")
  fi
done
if [ -n "$LOAD_OPTS" ]; then
  # Variants side by side: each workload and gateway count runs every load variant in a row, so a before/after
  # pair is measured minutes apart, not a whole invocation apart (the machine's load drifts).
  for wl in "shared-prefix kv_exact -" "multi-turn kv_exact -" "${HASH_RUNS[@]}"; do
    for n in 1 "$REPLICAS"; do
      for load in "${EXPANDED_LOADS[@]}"; do RUNS+=("$wl $load $n"); done
    done
  done
else
  for load in "${EXPANDED_LOADS[@]}"; do
    for wl in "shared-prefix kv_exact -" "multi-turn kv_exact -" "${HASH_RUNS[@]}"; do
      for n in 1 "$REPLICAS"; do RUNS+=("$wl $load $n"); done
    done
  done
fi
RUNS+=("multi-turn session table off $REPLICAS")
echo -n >"$WORK/runs.txt"
WARM="${WARM:-0}"   # 1: the first selected run once more before it, unrecorded (the engine JVMs' JIT warm-up)
for run in "${RUNS[@]}"; do
  read -r workload policy mode load n <<<"$run"
  name="$workload-$policy$([ "$mode" = - ] || echo "-$mode")-load_$load-$n"
  name="${name//\~/-v}"
  if [ -n "$ONLY" ] && ! grep -Eq -- "$ONLY" <<<"$name"; then continue; fi
  if [ "$WARM" = 1 ] && [ -z "${RUNS_WARM[*]:-}" ]; then RUNS_WARM=("$run"); fi
done
if [ "$WARM" = 1 ] && [ -n "${RUNS_WARM[*]:-}" ]; then RUNS=("warm:${RUNS_WARM[0]}" "${RUNS[@]}"); fi
for run in "${RUNS[@]}"; do
  warmup_run=""
  if [ "${run#warm:}" != "$run" ]; then warmup_run=1; run="${run#warm:}"; fi
  read -r workload policy mode load n <<<"$run"
  name="$workload-$policy$([ "$mode" = - ] || echo "-$mode")-load_$load-$n"
  name="${name//\~/-v}"
  if [ -n "$ONLY" ] && [ -z "$warmup_run" ] && ! grep -Eq -- "$ONLY" <<<"$name"; then continue; fi
  [ -n "$warmup_run" ] && name="warmup-$name"
  # Cold engine caches and fresh gateways for every run: the run measures what its routing builds up.
  for i in $(seq 1 "$ENGINES"); do curl -s -o /dev/null -m 5 -X POST "http://127.0.0.1:$(P_ENGINE "$i")/reset_prefix_cache"; done
  for r in $(seq 1 "$n"); do
    gateway_yaml "$r" "$policy" "$mode" "$load" >"$WORK/gw$r.yaml"
    start "gw$r" kv serve --config "$WORK/gw$r.yaml"
  done
  for r in $(seq 1 "$n"); do wait_http "gw$r" "$(P_GW "$r")" /ready/engines; done
  port=$P_ONE; [ "$n" -gt 1 ] && port=$P_MANY
  args=(--target "$name=http://127.0.0.1:$port" --model qwen3 --stream --max-tokens 12 --seed 7 --timeout 60 --drain 30
        --duration "$DURATION" --warmup "$WARMUP" --engine-metrics "$ENGINE_LIST")
  if [ "$workload" = shared-prefix ]; then
    args+=(--workload shared-prefix --rate "$RATE_SP" --groups $((3 * ENGINES)) --system-tokens 520 --question-tokens 30)
  else
    args+=(--workload multi-turn --rate "$RATE_MT" --conversations $((6 * ENGINES)) --turns 8 --system-tokens 300
           --question-tokens 30 --conversation-user)
  fi
  if [ "$SAMPLE_MS" -gt 0 ]; then
    start sampler python3 "$ROOT/perf/engine-sampler.py" "$WORK/$name.engines.csv" "$SAMPLE_MS" $((WARMUP + DURATION + 60)) \
      "$WORK/$name.stop" "${ENGINE_URLS[@]}"
  fi
  BENCH_TIMEOUT=$((WARMUP + DURATION + 120)) bench "$name" "${args[@]}"
  if [ "$SAMPLE_MS" -gt 0 ]; then touch "$WORK/$name.stop"; stop sampler; fi
  for r in $(seq 1 "$n"); do
    curl -s -m 5 "http://127.0.0.1:$(P_GW "$r")/metrics" >"$WORK/$name.gw$r.metrics" 2>/dev/null || true
    stop "gw$r"
  done
  [ -n "$warmup_run" ] || echo "$name $workload $policy $mode $load $n" >>"$WORK/runs.txt"
done
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK" "$OUT" "$DATE" "$(machine)" "$LOAD_START" "$LOAD_END" "$ENGINES" "$REPLICAS" "$DURATION" "$WARMUP" \
  "$RATE_SP" "$RATE_MT" "$CONC" "$CACHE_BLOCKS" "$SCRAPE_MS" "$SESSION_OPTS" "$LOAD_OPTS" "$SAMPLE_MS" <<'PY'
import json, os, re, sys
(work, out, date, machine, load_start, load_end, engines, replicas, duration, warmup, rate_sp, rate_mt, conc, cache,
 scrape, session_opts, load_opts, sample_ms) = sys.argv[1:19]
load_variants = [v.strip() for v in load_opts.split(";")] if load_opts else []
runs = [l.split() for l in open(os.path.join(work, "runs.txt")) if l.strip()]
def report(name):
    with open(os.path.join(work, name + ".json")) as f:
        return json.load(f)["targets"][0]
def tiers(name, n):
    t = {}
    for r in range(1, int(n) + 1):
        p = os.path.join(work, f"{name}.gw{r}.metrics")
        if not os.path.exists(p):
            continue
        for line in open(p):
            m = re.match(r'kvgate_route_decisions_total\{rule="chat",tier="([^"]+)"\} (\S+)', line)
            if m:
                t[m.group(1)] = t.get(m.group(1), 0) + float(m.group(2))
    total = sum(t.values()) or 1
    return ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in sorted(t.items(), key=lambda kv: -kv[1]))
L = [f"# Gateway replicas behind HAProxy (TCP round robin) vs one gateway — {date}\n",
     f"Machine: {machine}. Load average (1/5/15 min) at start {load_start}, at end {load_end}: numbers from a shared "
     "machine compare rows of the same run only.\n",
     f"Command: `perf/replicas-routing.sh` (ENGINES={engines} REPLICAS={replicas} DURATION={duration} WARMUP={warmup} "
     f"RATE_SP={rate_sp} RATE_MT={rate_mt} CONC={conc} CACHE_BLOCKS={cache} SCRAPE_MS={scrape}"
     + (f" SESSION_OPTS=\"{session_opts}\": " + "; ".join(f"`hash~{i}` = `{v.strip()}`" for i, v in enumerate(session_opts.split(";")))
        if session_opts else "")
     + (f" LOAD_OPTS=\"{load_opts}\": " + "; ".join(f"`on~{i}` = `load.{v.strip()}`" for i, v in enumerate(load_opts.split(";")))
        if load_opts else "") + (f" SAMPLE_MS={sample_ms}" if sample_ms != "0" else "") + "). Engines: `./kvgate sim "
     f"--dialect vllm` with the Qwen3 tokenizer and template, 16-token blocks, {cache}-block caches, {conc} running requests "
     "each, TTFT 10 ms + 120 us per uncached prompt token, ITL 4 ms, KV events over ZeroMQ. Gateways: `./kvgate serve`, "
     "identical configuration, restarted for each run after the engines' caches were reset. Balancer: HAProxy `mode tcp`, "
     "`balance roundrobin` (the single gateway goes through HAProxy too). Load: `./kvgate bench`, open loop (Poisson), "
     "streaming, max_tokens 12; shared-prefix: 3 prompt families per engine (520-word system prompts, 30-word questions); "
     "multi-turn: 6 conversations per engine, 8 turns, 300-word system prompt, 30-word turns, the conversation id as "
     "`user` (the session key). Hit ratio and requests per engine are the engines' own counters "
     "(`--engine-metrics`: vllm:prefix_cache_hits_total / vllm:prompt_tokens_total, vllm:request_success_total).\n",
     "| run | gateways | load signal | requests | errors | engine cache hit | busiest / mean | TTFT p50 ms | TTFT p99 ms | decisions (all replicas) |",
     "|---|---|---|---|---|---|---|---|---|---|"]
res = {}
for name, workload, policy, mode, load, n in runs:
    t = report(name)
    e = t.get("engines") or {}
    hit = e.get("hit_ratio")
    skew = e.get("busiest_share_vs_mean")
    ttft = t.get("ttft_ms") or {}
    label = f"{workload} / {policy}" + ("" if mode == "-" else f" {mode}")
    res[(workload, policy, mode, load, n)] = (hit, skew)
    sig = "engine-reported + local" if load.startswith("on") else "local in-flight only"
    if "~" in load:
        sig += f" `{load_variants[int(load.split('~')[1])]}`"
    warn = " (schedule shortfall)" if t["schedule"]["shortfall"] else ""
    L.append(f"| {label} | {n} | {sig} | {t['requests']}{warn} | {t['errors']} | "
             f"{'-' if hit is None else f'{100 * hit:.1f} %'} | {'-' if skew is None else f'{skew:.2f}'} | "
             f"{ttft.get('p50', float('nan')):.1f} | {ttft.get('p99', float('nan')):.1f} | {tiers(name, n)} |")
L.append("")
L.append(f"Goals ({replicas} replicas vs 1 gateway, same workload, policy and load signal): engine cache hit ratio within "
         "3 points of the single gateway; busiest engine's share <= 1.15x the mean share.\n")
for (workload, policy, mode, load, n), (hit, skew) in sorted(res.items()):
    if n == "1":
        continue
    single = res.get((workload, policy, mode, load, "1"))
    label = f"{workload} / {policy}" + ("" if mode == "-" else f" {mode}") + f", load {load}"
    if single is None or hit is None or single[0] is None:
        L.append(f"- {label}: {replicas} replicas hit {'-' if hit is None else f'{100 * hit:.1f} %'}, busiest/mean "
                 f"{'-' if skew is None else f'{skew:.2f}'} (no single-gateway run to compare)")
        continue
    d = 100 * (hit - single[0])
    L.append(f"- **{label}**: hit {100 * hit:.1f} % vs {100 * single[0]:.1f} % ({d:+.1f} points: "
             f"{'met' if d >= -3 else 'NOT met'}); busiest/mean {skew:.2f} vs {single[1]:.2f} "
             f"({'met' if skew <= 1.15 else 'NOT met'})")
if sample_ms != "0":
    L.append("")
    L.append(f"Engine queues over time (every engine's running / waiting gauges sampled every {sample_ms} ms by "
             "`perf/engine-sampler.py`, whole run incl. warm-up): mean in system (running + waiting) per engine; "
             "waiting > 0: share of engine samples with a queue; p99 / max waiting over all samples; imbalance: the "
             "mean over sample rounds of (busiest engine's running + waiting - the round's mean); generator lag: "
             "the load generator's own `max_lag_ms` and late sends (its schedule, not the fleet).\n")
    L.append("| run | gateways | load signal | mean in system | waiting > 0 | waiting p99 | waiting max | imbalance | generator max lag ms / late sends |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for name, workload, policy, mode, load, n in runs:
        p = os.path.join(work, name + ".engines.csv")
        if not os.path.exists(p):
            continue
        rounds = {}
        for line in list(open(p))[1:]:
            t, e, r, w = line.strip().split(",")
            if int(r) < 0:
                continue
            rounds.setdefault(t, []).append((int(r), int(w)))
        waits = sorted(w for rs in rounds.values() for _, w in rs)
        sys_ = [r + w for rs in rounds.values() for r, w in rs]
        imb = [max(r + w for r, w in rs) - sum(r + w for r, w in rs) / len(rs) for rs in rounds.values() if rs]
        t = report(name)
        sch = t["schedule"]
        label = f"{workload} / {policy}" + ("" if mode == "-" else f" {mode}")
        sig = "engine-reported + local" if load.startswith("on") else "local in-flight only"
        if "~" in load:
            sig += f" `{load_variants[int(load.split('~')[1])]}`"
        if not waits:
            continue
        L.append(f"| {label} | {n} | {sig} | {sum(sys_) / len(sys_) * int(engines) / int(engines):.2f} | "
                 f"{100 * sum(1 for w in waits if w > 0) / len(waits):.1f} % | {waits[int(0.99 * (len(waits) - 1))]} | "
                 f"{waits[-1]} | {sum(imb) / len(imb):.2f} | {sch.get('max_lag_ms')} / {sch.get('late_sends')} |")
with open(out, "w") as f:
    f.write("\n".join(L) + "\n")
print("\n".join(L))
PY
log "wrote $OUT"
