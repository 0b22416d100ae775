#!/usr/bin/env bash
# Hedged first token with one straggling engine (#41 "Numbers": interactive TTFT p99 >= 2x better than without
# hedging, with <= 10 % extra prefill tokens). One run, loopback only, bounded (~2 minutes), every process started
# here is stopped by PID.
#
#   engines: 4 x `./kvgate sim --dialect vllm --itl-ms 5 --prefill-us-per-token 0`, three with --ttft-ms FAST_TTFT,
#            one straggler with --ttft-ms 10x FAST_TTFT
#   gateway "off": least_outstanding, no hedge block
#   gateway "on":  the same rule with hedge: {after_ms: AFTER_MS, max_extra_ratio: MAX_EXTRA (0.1)[, ttft_factor: TTFT_FACTOR]}
#   both:          load: {ttft_aware: TTFT_AWARE (true)}: the same routing, TTFT-aware (outlier avoidance) unless false
#   load: `./kvgate bench`, closed loop, CONNS connections, streaming chat, fixed 512-byte body, max_tokens 20, every
#         request X-Kvgate-Priority: interactive; first against "off", then the same against "on" (same engines)
# Writes perf/results/hedge-<date>.md (machine, load average, command, TTFT p50/p99 both ways, the hedge counters).
#
#   perf/hedge.sh                  # defaults; env vars override
#   DURATION=20 CONNS=8 perf/hedge.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DATE="${DATE:-$(date -u +%Y-%m-%d)}"
OUT="${OUT:-$ROOT/perf/results/hedge-$DATE.md}"
DURATION="${DURATION:-30}"
WARMUP="${WARMUP:-5}"
CONNS="${CONNS:-8}"
FAST_TTFT="${FAST_TTFT:-50}"
SLOW_TTFT="${SLOW_TTFT:-$((FAST_TTFT * 10))}"
AFTER_MS="${AFTER_MS:-$((FAST_TTFT * 2))}"
export MAX_EXTRA="${MAX_EXTRA:-0.1}"
export TTFT_AWARE="${TTFT_AWARE:-true}"
export TTFT_FACTOR="${TTFT_FACTOR:-}"
NAME=hedge
. "$ROOT/perf/fleet-common.sh" # ports, work directory, start/kv/wait_http, and the processes stopped by PID on exit
P_OFF=$((PORT_BASE + 11)); P_OFF_ADMIN=$((PORT_BASE + 12))
P_ON=$((PORT_BASE + 13)); P_ON_ADMIN=$((PORT_BASE + 14))
[ -f "$ROOT/tools/target/kvgate-tools.jar" ] || { echo "build first: ./mvnw -o -q -B -DskipTests package -pl tools -am" >&2; exit 1; }

EPS=""
for i in 1 2 3 4; do
  ttft="$FAST_TTFT"; [ "$i" = 4 ] && ttft="$SLOW_TTFT"
  start "sim$i" kv sim --dialect vllm --port $((PORT_BASE + i)) --model m --ttft-ms "$ttft" --itl-ms 5 --prefill-us-per-token 0
  EPS="$EPS      - url: http://127.0.0.1:$((PORT_BASE + i))
"
done
gateway_yaml() { # gateway_yaml PORT ADMIN_PORT HEDGE_BLOCK
  cat <<YAML
listen: 127.0.0.1:$1
admin_listen: 127.0.0.1:$2
control_socket: "off"
health: {interval_ms: 60000}
load: {ttft_aware: $TTFT_AWARE}
rules:
  - name: chat
    models: [m]
    policy: least_outstanding
$3    endpoints:
$EPS
YAML
}
gateway_yaml "$P_OFF" "$P_OFF_ADMIN" "" >"$WORK/off.yaml"
FACTOR_KEY=""; [ -n "$TTFT_FACTOR" ] && FACTOR_KEY=", ttft_factor: $TTFT_FACTOR"
gateway_yaml "$P_ON" "$P_ON_ADMIN" "    hedge: {after_ms: $AFTER_MS, max_extra_ratio: $MAX_EXTRA$FACTOR_KEY}
" >"$WORK/on.yaml"
start gw-off kv serve --config "$WORK/off.yaml"
start gw-on kv serve --config "$WORK/on.yaml"
for i in 1 2 3 4; do wait_http "sim$i" $((PORT_BASE + i)); done
wait_http gw-off "$P_OFF"; wait_http gw-on "$P_ON"

bench() { # bench NAME ARGS... : JSON into $WORK/NAME.json (bounded by timeout)
  local name="$1"; shift
  echo "bench $name: $*" >&2
  timeout 600 "$JAVA_HOME/bin/java" @"$ROOT/deploy/jvm.options" -Dkvgate.home="$ROOT" \
    -cp "$ROOT/tools/target/kvgate-tools.jar:$ROOT/tools/target/lib/*" io.kvgate.tools.Main bench "$@" \
    --model m --workload fixed --payload-bytes 512 --stream --max-tokens 20 --timeout 20 --drain 5 --quiet \
    --header X-Kvgate-Priority:interactive --closed-loop --connections "$CONNS" --duration "$DURATION" --warmup "$WARMUP" \
    --seed 1 --out "$WORK/$name.json" >"$WORK/bench-$name.log" 2>&1 \
    || { echo "bench $name failed:" >&2; tail -20 "$WORK/bench-$name.log" >&2; return 1; }
}
LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
bench off --target "off=http://127.0.0.1:$P_OFF"
curl -s -m 5 "http://127.0.0.1:$P_OFF/metrics" >"$WORK/metrics-off.txt"
bench on --target "on=http://127.0.0.1:$P_ON"
curl -s -m 5 "http://127.0.0.1:$P_ON/metrics" >"$WORK/metrics-on.txt"
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg)"

MACHINE="$(lscpu | grep 'Model name' | sed 's/  */ /g'); nproc=$(nproc); mem=$(free -g | awk '/Mem:/{print $2}') GiB; kernel $(uname -r); $("$JAVA_HOME/bin/java" -version 2>&1 | head -1 || true)"
python3 - "$WORK" "$OUT" "$DATE" "$MACHINE" "$LOAD_START" "$LOAD_END" "$DURATION" "$WARMUP" "$CONNS" "$FAST_TTFT" \
  "$SLOW_TTFT" "$AFTER_MS" "127.0.0.1:$((PORT_BASE + 4))" <<'PY'
import json, os, re, sys
work, out, date, machine, load_start, load_end, duration, warmup, conns, fast, slow, after, straggler = sys.argv[1:14]
aware = os.environ.get("TTFT_AWARE", "true")
factor = os.environ.get("TTFT_FACTOR", "")
def t(name):
    with open(os.path.join(work, name + ".json")) as f:
        return json.load(f)["targets"][0]
def metrics(name):
    m = {}
    with open(os.path.join(work, name)) as f:
        for line in f:
            if line.startswith(("kvgate_hedge", "kvgate_tokens_total", "kvgate_requests_total", "kvgate_endpoint_routed_total")):
                k, v = line.rsplit(" ", 1)
                m[k] = float(v)
    return m
off, on = t("off"), t("on")
m_on, m_off = metrics("metrics-on.txt"), metrics("metrics-off.txt")
def pick(m, prefix):
    return sum(v for k, v in m.items() if k.startswith(prefix))
def hedges(result):
    # label order is the exposition's (alphabetical: result before rule), so match the label, not a prefix
    return sum(v for k, v in m_on.items() if k.startswith("kvgate_hedges_total{") and 'result="%s"' % result in k)
legs = hedges("won_hedge") + hedges("won_primary")
reqs = pick(m_on, 'kvgate_requests_total{')
prompt = pick(m_on, 'kvgate_tokens_total{') and sum(v for k, v in m_on.items() if k.startswith("kvgate_tokens_total") and 'kind="prompt"' in k)
extra = pick(m_on, 'kvgate_hedge_extra_prompt_tokens_total{')
def straggler_share(m):
    routed = {k: v for k, v in m.items() if k.startswith("kvgate_endpoint_routed_total{")}
    total = sum(routed.values())
    slow_n = sum(v for k, v in routed.items() if 'endpoint="%s"' % straggler in k)
    return slow_n, total
def row(label, x):
    e = x["errors_by_class"]
    ttft = x.get("ttft_ms") or {}
    f = lambda d, k: ("%.1f" % d[k]) if d and k in d else "-"
    return (f"| {label} | {x['requests']} | {x['ok']} | {sum(e.values())} | {f(ttft,'p50')} | {f(ttft,'p90')} | {f(ttft,'p99')} | "
            f"{f(ttft,'max')} | {x['goodput_rps']:.1f} |")
L = []
L.append(f"# Hedged first token with one straggling engine — {date}\n")
L.append(f"Machine: {machine}. Load average (1/5/15 min) at start {load_start}, at end {load_end} (2 cores shared with"
         " other helpers' builds and tests: compare the two rows of this run, not absolute numbers across runs).\n")
L.append(f"Command: `perf/hedge.sh` (DURATION={duration} s measured after {warmup} s warm-up per run). Fleet: 4 "
         f"`./kvgate sim --dialect vllm --itl-ms 5 --prefill-us-per-token 0`, three with `--ttft-ms {fast}`, one straggler "
         f"with `--ttft-ms {slow}` (10x). Gateways: `least_outstanding`; \"off\" without a hedge block, \"on\" with "
         f"`hedge: {{after_ms: {after}, max_extra_ratio: {os.environ.get('MAX_EXTRA', '0.1')}" + (f", ttft_factor: {factor}" if factor else "") + "}`; "
         f"both with `load: {{ttft_aware: {aware}}}` (the same routing). Load: `./kvgate bench --closed-loop --connections {conns}`, "
         "streaming chat, fixed 512-byte body, max_tokens 20, every request `X-Kvgate-Priority: interactive`; first "
         "against \"off\", then against \"on\" (the same engines).\n")
L.append("| gateway | requests | ok | errors | TTFT p50 ms | TTFT p90 ms | TTFT p99 ms | TTFT max ms | goodput rps |")
L.append("|---|---|---|---|---|---|---|---|---|")
L.append(row("off (no hedging)", off))
L.append(row("on (hedge after %s ms)" % after, on))
L.append("")
if off.get("ttft_ms") and on.get("ttft_ms"):
    r99 = off["ttft_ms"]["p99"] / on["ttft_ms"]["p99"]
    r50 = off["ttft_ms"]["p50"] / on["ttft_ms"]["p50"]
    L.append(f"- **TTFT p99 without / with hedging: {r99:.2f}x** (goal >= 2x: {'met' if r99 >= 2 else 'NOT met'}); p50: {r50:.2f}x.")
else:
    L.append("- **No TTFT ratio**: a run produced no successful streamed request (errors by class: off "
             + json.dumps(off["errors_by_class"]) + ", on " + json.dumps(on["errors_by_class"]) + ").")
share = legs / reqs if reqs else float("nan")
L.append(f"- **Extra prefill**: {legs:.0f} hedge legs for {reqs:.0f} requests (warm-up included) = {100*share:.1f} % of the "
         f"requests; every request has the same prompt, so that is the extra prefill tokens' share (goal <= 10 %: "
         f"{'met' if share <= 0.10 else 'NOT met'}). The gateway's budget counted {extra:.0f} hedge prompt tokens "
         f"(estimated as body bytes / 4: the rule does not tokenize) against {prompt:.0f} prompt tokens the engines reported "
         "in successful answers. A cancelled leg's prefill is counted whole, though the engine may not have finished it.")
for name, m in (("off", m_off), ("on", m_on)):
    n, tot = straggler_share(m)
    L.append(f"- Straggler ({straggler}) share of the requests routed by \"{name}\" (`kvgate_endpoint_routed_total`, hedge legs and"
             f" warm-up included): {n:.0f} of {tot:.0f} = {100 * n / tot if tot else float('nan'):.1f} %.")
L.append(f"- Results (`kvgate_hedges_total`): won_hedge {hedges('won_hedge'):.0f}, won_primary {hedges('won_primary'):.0f}, "
         f"skipped_budget {hedges('skipped_budget'):.0f}, no_candidate {hedges('no_candidate'):.0f}.")
L.append("")
L.append("Gateway \"on\" hedge metrics at the end (cumulative, warm-up included):\n")
L.append("```")
for k, v in sorted(m_on.items()):
    if k.startswith("kvgate_hedge"):
        L.append(f"{k} {v:g}")
L.append("```")
with open(out, "w") as f:
    f.write("\n".join(L) + "\n")
print("\n".join(L))
PY
echo "wrote $OUT" >&2
